"""Model profiles imported from a JAX pytree and a MindSpore Cell, priced by the simulator."""
import numpy as np
import pytest

from kfsim import catalog
from kfsim.catalog.imported import from_cell, from_pytree
from kfsim.sim.predict import predict_iteration


def test_pytree_shapes_names_and_count():
    jnp = pytest.importorskip("jax.numpy")
    params = {"dense1": {"kernel": jnp.zeros((784, 512)), "bias": jnp.zeros(512)},
              "dense2": {"kernel": jnp.zeros((512, 10)), "bias": jnp.zeros(10)},
              "scale": jnp.float32(1.0)}                                  # a scalar leaf: one parameter
    m = from_pytree("mlp", params, 2 * 3 * 407_050.0, batch=64)
    assert m.params == 784 * 512 + 512 + 512 * 10 + 10 + 1
    assert m.tensor_shapes == [(512,), (784, 512), (10,), (512, 10), ()]   # flatten order: keys sorted
    assert m.tensor_names == ("['dense1']['bias']", "['dense1']['kernel']", "['dense2']['bias']",
                              "['dense2']['kernel']", "['scale']")
    b = predict_iteration(m, catalog.seed_cluster(), "ef(topk(ratio=0.01))", 8)
    assert b.total_s > 0 and b.bytes_per_worker > 0


def test_pytree_of_shape_structs_matches_the_catalog_count():
    jax = pytest.importorskip("jax")
    ref = catalog.get_model("resnet-50")
    tree = [jax.ShapeDtypeStruct(s, np.float32) for s in ref.tensor_shapes]
    m = from_pytree("r50", tree, ref.flops_per_sample, batch=ref.batch, mfu=ref.mfu)
    assert m.params == ref.params == 25_557_032
    # no overlap: the catalog's per-tensor backward FLOPs (bucket readiness) do not matter; an import
    # knows no layer kinds, so it is compared with the catalog entry at its one utilisation (mfu)
    one_kind = ref._replace(kind_flops=None)
    assert predict_iteration(m, "seed", "none", 16, overlap=False).total_s == pytest.approx(
        predict_iteration(one_kind, "seed", "none", 16, overlap=False).total_s, rel=1e-12)


def test_mindspore_cell_trainable_and_all_parameters():
    nn = pytest.importorskip("mindspore.nn")

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, has_bias=False)
            self.bn = nn.BatchNorm2d(8)
            self.fc = nn.Dense(8, 10)

        def construct(self, x):
            return self.fc(self.bn(self.conv(x)).mean((2, 3)))

    net = Net()
    m = from_cell("tiny", net, 1e6)
    assert m.params == 3 * 8 * 9 + 8 + 8 + 8 * 10 + 10           # conv, BN γ and β, dense
    assert m.tensor_shapes[0] == (8, 3, 3, 3) and m.tensor_shapes[-1] == (10,)
    assert m.tensor_names[0] == "conv.weight"
    every = from_cell("tiny", net, 1e6, trainable_only=False)
    assert every.params == m.params + 2 * 8                      # + BN moving mean and variance


def test_bad_definitions_are_clear_errors():
    pytest.importorskip("jax")
    with pytest.raises(ValueError, match="no parameter tensors"):
        from_pytree("empty", {}, 1e9)
    with pytest.raises(ValueError, match="flops_per_sample must be > 0"):
        from_pytree("x", [np.zeros(3)], 0.0)
    with pytest.raises(ValueError, match="batch must be >= 1"):
        from_pytree("x", [np.zeros(3)], 1e9, batch=0)
