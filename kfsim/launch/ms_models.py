"""The kfsim models as MindSpore Cells that load ``kfsim.train.models.init_params`` exactly.

Parameters keep the JAX layouts and names (``w1`` (784, 256), conv kernels
HWIO) and are created in sorted-name order — the order ``jax.tree_util``
flattens the simulator's parameter dict — so gradient leaf i is the same
tensor in both lives and the compressor folds the same key into it.

* mlp: f(x) = relu(x W1 + b1) W2 + b2
* cnn: conv3x3(1->8) relu maxpool2, conv3x3(8->16) relu maxpool2, dense(784->10),
  flattened in NHWC order like the JAX model.
"""
from __future__ import annotations

import numpy as np

MODELS = ("mlp", "cnn")


def build(name: str, params: dict):
    """An ``nn.Cell`` whose Parameters are ``params`` (NumPy), sorted by name."""
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    if name not in MODELS:
        raise ValueError(f"model {name!r} has no MindSpore version; choose one of {', '.join(MODELS)}")

    def relu(h):
        """max(h, 0) with JAX's derivative: jnp.maximum splits a tie, so d/dh at h = 0 is 1/2
        (MindSpore's ReLU gives 0). (h + |h|) / 2 is exact and has that derivative; exact
        zeros are common (zero background pixels, zero-initialised biases)."""
        return (h + ops.abs(h)) * 0.5

    class _Net(nn.Cell):
        def __init__(self):
            super().__init__()
            for key in sorted(params):
                setattr(self, key, Parameter(ms.Tensor(np.asarray(params[key], np.float32)), name=key))

    class MLP(_Net):
        def construct(self, x):
            h = relu(ops.matmul(x, self.w1) + self.b1)
            return ops.matmul(h, self.w2) + self.b2

    class CNN(_Net):
        def pool(self, h):
            """2x2 max pool whose gradient goes to the first maximum of each window
            (row-major), as XLA's reduce_window/select_and_scatter; MindSpore's
            MaxPool gradient treats ties differently, and relu makes ties common."""
            b, c, hh, ww = h.shape
            w = ops.reshape(h, (b, c, hh // 2, 2, ww // 2, 2))
            w = ops.reshape(ops.transpose(w, (0, 1, 2, 4, 3, 5)), (b, c, hh // 2, ww // 2, 4))
            first = ops.stop_gradient(ops.one_hot(ops.argmax(w, -1), 4, self.one, self.zero))
            return ops.reduce_sum(w * first, -1)

        def construct(self, x):
            h = ops.reshape(x, (x.shape[0], 1, 28, 28))
            h = ops.conv2d(h, ops.transpose(self.c1w, (3, 2, 0, 1)), pad_mode="same")
            h = self.pool(relu(ops.bias_add(h, self.c1b)))
            h = ops.conv2d(h, ops.transpose(self.c2w, (3, 2, 0, 1)), pad_mode="same")
            h = self.pool(relu(ops.bias_add(h, self.c2b)))
            h = ops.reshape(ops.transpose(h, (0, 2, 3, 1)), (x.shape[0], 784))
            return ops.matmul(h, self.w) + self.b

    net = (MLP if name == "mlp" else CNN)()
    if name == "cnn":
        net.one, net.zero = ms.Tensor(1.0, ms.float32), ms.Tensor(0.0, ms.float32)
    return net


def wide_mlp_params(hidden: int, seed: int = 0) -> dict:
    """A bigger MLP (784 -> hidden -> hidden -> 10) for benchmarks (~10M parameters at hidden=2900)."""
    rng = np.random.default_rng(seed)
    def he(i, o, g=2.0):
        return (rng.standard_normal((i, o)) * np.sqrt(g / i)).astype(np.float32)
    return {"b1": np.zeros(hidden, np.float32), "b2": np.zeros(hidden, np.float32), "b3": np.zeros(10, np.float32),
            "w1": he(784, hidden), "w2": he(hidden, hidden), "w3": he(hidden, 10, 1.0)}


def build_wide(params: dict):
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    def relu(h):  # JAX's derivative at 0 (see build)
        return (h + ops.abs(h)) * 0.5

    class Wide(nn.Cell):
        def __init__(self):
            super().__init__()
            for key in sorted(params):
                setattr(self, key, Parameter(ms.Tensor(params[key]), name=key))

        def construct(self, x):
            h = relu(ops.matmul(x, self.w1) + self.b1)
            h = relu(ops.matmul(h, self.w2) + self.b2)
            return ops.matmul(h, self.w3) + self.b3

    return Wide()
