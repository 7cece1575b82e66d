"""Models for simulated training, written in JAX; parameters are flat dicts.

``init_params(name, seed) -> dict[str, np.ndarray]`` (float32, deterministic
in ``seed``); ``apply(name, params, x) -> logits``; ``loss(name, params, x, y)``
is the mean softmax cross-entropy

    L = -(1/B) sum_b log softmax(f(x_b))[y_b],   softmax(z)_c = exp(z_c) / sum_j exp(z_j)

* ``"mlp"``: f(x) = relu(x W1 + b1) W2 + b2, x in R^784; W1 (784, 256), b1
  (256,), W2 (256, 10), b2 (10,).
* ``"cnn"``: conv3x3(1->8) relu maxpool2, conv3x3(8->16) relu maxpool2,
  dense(784 -> 10) on 28x28 images given flat [B, 784] (LeCun et al. 1998
  style, small enough for a 2-core CPU).
* ``"charlm"``: a fixed-context neural character LM (Bengio et al. 2003):
  embed the last 16 characters (E: V x 16), concatenate, h = relu(e W1 + b1)
  with 256 units, logits = h W2 + b2 over V = 73 symbols; x is int32 [B, 16].

Weights use He-normal init, N(0, 2 / fan_in) (He et al. 2015); biases are zero;
the output layer uses N(0, 1 / fan_in).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

CHARLM_CONTEXT = 16
CHARLM_EMBED = 16
CHARLM_HIDDEN = 256
CHARLM_VOCAB = 73  # symbols of the KJV text (kfsim.data.kjv.vocab())


class ModelDef(NamedTuple):
    name: str
    shapes: dict  # parameter name -> shape
    fan_in: dict  # parameter name -> fan-in for init (0: zeros)
    gain: dict  # parameter name -> variance gain (2 for relu layers, 1 for output)
    apply: Callable  # (params, x) -> logits
    input_dtype: str
    flops_per_sample: float  # forward+backward, ~3x the forward multiply-adds x 2


def _mlp_apply(p, x):
    import jax.numpy as jnp

    h = jnp.maximum(x @ p["w1"] + p["b1"], 0.0)
    return h @ p["w2"] + p["b2"]


def _conv(x, w, b):
    from jax import lax

    y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return y + b


def _pool(x):
    from jax import lax

    return lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def _cnn_apply(p, x):
    import jax.numpy as jnp

    h = jnp.reshape(x, (x.shape[0], 28, 28, 1))
    h = _pool(jnp.maximum(_conv(h, p["c1w"], p["c1b"]), 0.0))
    h = _pool(jnp.maximum(_conv(h, p["c2w"], p["c2b"]), 0.0))
    h = jnp.reshape(h, (h.shape[0], -1))
    return h @ p["w"] + p["b"]


def _charlm_apply(p, x):
    import jax.numpy as jnp

    e = jnp.take(p["emb"], x, axis=0)  # [B, C, E]
    e = jnp.reshape(e, (x.shape[0], -1))
    h = jnp.maximum(e @ p["w1"] + p["b1"], 0.0)
    return h @ p["w2"] + p["b2"]


def _fwd_flops(macs: int) -> float:
    return 3.0 * 2.0 * macs  # forward + backward (~2x forward)


MODELS: dict[str, ModelDef] = {
    "mlp": ModelDef(
        "mlp",
        {"w1": (784, 256), "b1": (256,), "w2": (256, 10), "b2": (10,)},
        {"w1": 784, "b1": 0, "w2": 256, "b2": 0},
        {"w1": 2.0, "w2": 1.0},
        _mlp_apply, "float32", _fwd_flops(784 * 256 + 256 * 10)),
    "cnn": ModelDef(
        "cnn",
        {"c1w": (3, 3, 1, 8), "c1b": (8,), "c2w": (3, 3, 8, 16), "c2b": (16,), "w": (784, 10), "b": (10,)},
        {"c1w": 9, "c1b": 0, "c2w": 72, "c2b": 0, "w": 784, "b": 0},
        {"c1w": 2.0, "c2w": 2.0, "w": 1.0},
        _cnn_apply, "float32", _fwd_flops(28 * 28 * 9 * 8 + 14 * 14 * 72 * 16 + 784 * 10)),
    "charlm": ModelDef(
        "charlm",
        {"emb": (CHARLM_VOCAB, CHARLM_EMBED), "w1": (CHARLM_CONTEXT * CHARLM_EMBED, CHARLM_HIDDEN),
         "b1": (CHARLM_HIDDEN,), "w2": (CHARLM_HIDDEN, CHARLM_VOCAB), "b2": (CHARLM_VOCAB,)},
        {"emb": 1, "w1": CHARLM_CONTEXT * CHARLM_EMBED, "b1": 0, "w2": CHARLM_HIDDEN, "b2": 0},
        {"emb": 1.0, "w1": 2.0, "w2": 1.0},
        _charlm_apply, "int32",
        _fwd_flops(CHARLM_CONTEXT * CHARLM_EMBED * CHARLM_HIDDEN + CHARLM_HIDDEN * CHARLM_VOCAB)),
}
NAMES = tuple(MODELS)


def get(name: str) -> ModelDef:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(NAMES)}")
    return MODELS[name]


def init_params(name: str, seed: int = 0) -> dict[str, np.ndarray]:
    """Fresh float32 parameters (sorted keys; deterministic in ``seed``)."""
    m = get(name)
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"init_params: seed must be a non-negative int, got {seed!r}")
    rng = np.random.default_rng([int(seed), sorted(MODELS).index(name)])
    params = {}
    for key in sorted(m.shapes):
        shape, fan = m.shapes[key], m.fan_in[key]
        if fan == 0:
            params[key] = np.zeros(shape, np.float32)
        else:
            std = np.sqrt(m.gain[key] / fan)
            params[key] = (rng.standard_normal(shape) * std).astype(np.float32)
    return params


def apply(name: str, params, x):
    """Logits [B, classes] (JAX arrays)."""
    return get(name).apply(params, x)


def cross_entropy(logits, y):
    """Mean softmax cross-entropy of integer labels (numerically stable log-sum-exp)."""
    import jax
    import jax.numpy as jnp

    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None].astype(jnp.int32), axis=1))


def loss(name: str, params, x, y):
    return cross_entropy(apply(name, params, x), y)


def n_params(name: str) -> int:
    return int(sum(np.prod(s) for s in get(name).shapes.values()))
