"""The JAX binding's host top_k_abs (an XLA custom call, ``backends.jax.host_topk``)
lists exactly the indices of the reference composition
``nonzero(scatter(top_k(abs(x), k)))``: ties (lowest index first), zeros,
NaN and ±inf, float32 and float64 keys, k from 1 to n (the sampled threshold
and the every-key-survives path), under jit, vmap and nested vmap."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import backends
from backends.jax import host_topk
from compressors.fused import Fused

JAX = backends.get("jax")
NP = backends.get("numpy")


def reference(x: np.ndarray, k: int) -> np.ndarray:
    """The composition on NumPy's primitive ops (tests/backends/test_fused.py checks
    JAX's composition gives the same bits), far quicker than eager JAX at these sizes."""
    return np.asarray(Fused.top_k_abs(NP, np.asarray(x), k))


def rows(rng, n: int, dtype) -> np.ndarray:
    x = rng.standard_normal((5, n)).astype(dtype)
    x[1] = np.round(x[1] * 2) / 2                  # many ties
    x[2, : n // 2] = 0.0                           # half zeros (and -0.0)
    x[2, 1::7] = -0.0
    x[3, rng.integers(0, n, 5)] = np.nan
    x[3, rng.integers(0, n, 3)] = np.inf
    x[3, rng.integers(0, n, 3)] = -np.inf
    x[4] = 1.0                                     # every key equal
    x[4, 17] = np.finfo(dtype).tiny
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,k", [(40000, 1), (40000, 400), (50000, 12500), (33000, 33000), (1 << 16, 9000)])
def test_rows_match_reference_under_jit_and_vmap(dtype, n, k):
    with jax.enable_x64(dtype == np.float64):  # float64 arrays need 64-bit mode
        check_rows(rows(np.random.default_rng(n + k), n, dtype), k)


def check_rows(x: np.ndarray, k: int) -> None:
    n = x.shape[1]
    assert jnp.asarray(x).dtype == x.dtype
    one = jax.jit(lambda r: host_topk.top_k_abs(r, k))
    batched = np.asarray(jax.jit(jax.vmap(lambda r: host_topk.top_k_abs(r, k)))(jnp.asarray(x)))
    for i in range(len(x)):
        ref = reference(x[i], k)
        assert np.array_equal(np.asarray(one(jnp.asarray(x[i]))), ref), (i, n, k)
        assert np.array_equal(batched[i], ref), (i, n, k)


def test_nested_vmap_and_unbatched_operand():
    x = rows(np.random.default_rng(3), 40000, np.float32)
    k = 321
    xx = jnp.asarray(np.stack([x, x[::-1]]))       # (2, 5, n)
    got = np.asarray(jax.jit(jax.vmap(jax.vmap(lambda r: host_topk.top_k_abs(r, k))))(xx))
    for a in range(2):
        for b in range(5):
            assert np.array_equal(got[a, b], reference(np.asarray(xx[a, b]), k))
    # an operand vmap does not batch (in_axes None) is broadcast to every lane
    lanes = np.asarray(jax.vmap(lambda _, r: host_topk.top_k_abs(r, k), in_axes=(0, None))(jnp.arange(3),
                                                                                           jnp.asarray(x[0])))
    assert all(np.array_equal(lane, reference(x[0], k)) for lane in lanes)


def test_ops_top_k_abs_routes_big_rows_to_the_custom_call():
    x = jnp.asarray(np.random.default_rng(0).standard_normal(1 << 16).astype(np.float32))
    text = jax.jit(lambda r: JAX.top_k_abs(r, 655)).lower(x).as_text()
    assert "kfsim_top_k_abs_f32" in text and "callback" not in text
    assert np.array_equal(np.asarray(JAX.top_k_abs(x, 655)), reference(np.asarray(x), 655))
