"""Models: parameter layout, deterministic init, forward pass and loss against NumPy."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from kfsim.train import models


def test_mlp_layout_and_determinism():
    p = models.init_params("mlp", 3)
    assert {k: v.shape for k, v in p.items()} == {"w1": (784, 256), "b1": (256,), "w2": (256, 10), "b2": (10,)}
    assert all(v.dtype == np.float32 for v in p.values())
    q = models.init_params("mlp", 3)
    assert all(np.array_equal(p[k], q[k]) for k in p)
    assert not np.array_equal(p["w1"], models.init_params("mlp", 4)["w1"])


@pytest.mark.parametrize("name", models.NAMES)
def test_every_model_gives_finite_loss(name):
    p = models.init_params(name, 0)
    x = jnp.zeros((5, models.CHARLM_CONTEXT), jnp.int32) if name == "charlm" else jnp.full((5, 784), 0.5)
    logits = models.apply(name, p, x)
    assert logits.shape == (5, models.CHARLM_VOCAB if name == "charlm" else 10)
    assert np.isfinite(float(models.loss(name, p, x, jnp.arange(5, dtype=jnp.int32))))


def test_mlp_forward_and_cross_entropy_match_numpy():
    p = models.init_params("mlp", 1)
    rng = np.random.default_rng(0)
    x = rng.random((7, 784), dtype=np.float32)
    y = rng.integers(0, 10, 7).astype(np.int32)
    z = np.maximum(x @ p["w1"] + p["b1"], 0) @ p["w2"] + p["b2"]
    zs = z - z.max(1, keepdims=True)
    ce = -np.mean(zs[np.arange(7), y] - np.log(np.exp(zs).sum(1)))
    np.testing.assert_allclose(np.asarray(models.apply("mlp", p, x)), z, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(float(models.loss("mlp", p, x, y)), ce, rtol=1e-5)


def test_bad_names_and_seeds():
    with pytest.raises(ValueError, match="unknown model"):
        models.init_params("resnet", 0)
    with pytest.raises(ValueError, match="seed"):
        models.init_params("mlp", -1)
