"""The faster execution paths agree with the reference ones.

* the JAX binding's host top_k (Numba, for big float32 rows) == lax.top_k,
  index for index (ties, NaN, ±inf), under jit and vmap;
* the runner's VMAP workers == its LOOP workers (to float32
  rounding: batched matmuls may reassociate);
* a run with exchange="vmap" tracks the reference run.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import backends
import compressors
from compressors.core import make_keys
from compressors import protocol
from backends.jax.ops import HOST_TOP_K_MIN
from kfsim.train import loop
from kfsim.train.step import stack_trees, unstack_tree
from kfsim.train.config import RunConfig


def test_host_topk_matches_lax_topk():
    ops = backends.get("jax")
    rng = np.random.default_rng(1)
    for trial in range(12):
        d = int(rng.integers(HOST_TOP_K_MIN, 70000))
        k = int(rng.integers(1, d + 1))
        x = rng.standard_normal(d).astype(np.float32)
        if trial % 3 == 0:
            x = np.round(x * 2) / 2  # many ties
        if trial % 4 == 0:
            x[rng.integers(0, d, 3)] = np.nan
            x[rng.integers(0, d, 2)] = np.inf
            x[rng.integers(0, d, 2)] = -np.inf
        got = ops.top_k(jnp.asarray(x), k)[1]
        assert np.array_equal(got, np.asarray(lax.top_k(jnp.asarray(x), k)[1])), (trial, d, k)


def test_fast_ops_top_k_batched_under_jit_and_vmap():
    x = jnp.abs(jax.random.normal(jax.random.PRNGKey(0), (3, 1 << 16)))
    v, i = jax.jit(jax.vmap(lambda r: backends.get("jax").top_k(r, 500)))(x)
    rv, ri = jax.vmap(lambda r: lax.top_k(r, 500))(x)
    assert np.array_equal(np.asarray(i), np.asarray(ri)) and np.array_equal(np.asarray(v), np.asarray(rv))


@pytest.mark.parametrize("spec", ["ef(topk(ratio=0.05))", "powersgd(rank=2)", "ef(quantize(bits=4))",
                                  "randomk(ratio=0.1)"])
def test_vectorised_exchange_matches_reference(spec):
    ops = backends.get("jax")
    n = 4
    shapes = {"b": (7,), "w": (64, 33)}
    grads = [{k: jax.random.normal(jax.random.PRNGKey(10 * i + j), s) for j, (k, s) in enumerate(shapes.items())}
             for i in range(n)]
    comp = compressors.parse(spec)
    states = [comp.init(ops, grads[0]) for _ in range(n)]
    keys = [make_keys(ops, 0, 3, r) for r in range(n)]
    bits = {}

    def ref(g, s, k):
        res = protocol.run(ops, comp, g, s, k, workers=protocol.LOOP)
        bits["ref"] = res.plan.bits_per_round()
        return res.mean, res.states

    def vec(g, s, k):
        res = protocol.run(ops, comp, g, s, k, workers=protocol.VMAP)
        bits["vec"] = res.plan.bits_per_round()
        return res.mean, res.states

    m1, s1 = jax.jit(ref)(grads, states, keys)
    m2, s2 = jax.jit(vec)(stack_trees(grads), stack_trees(states), stack_trees(keys))
    assert bits["ref"] == bits["vec"]
    for k in m1:
        np.testing.assert_allclose(np.asarray(m2[k]), np.asarray(m1[k]), rtol=0, atol=1e-6)
    for a, b in zip(jax.tree_util.tree_leaves(s1), jax.tree_util.tree_leaves(unstack_tree(s2, n))):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=0, atol=1e-6)


def test_fast_run_tracks_reference_run(fmnist_small):
    kw = dict(compressor="ef(topk(ratio=0.01))", workers=4, batch=64, steps=6, eval_every=6)
    ref = loop.run(RunConfig(**kw), task=fmnist_small)
    fast = loop.run(RunConfig(grad_mode="vmap", exchange="vmap", **kw), task=fmnist_small)
    for k in ref.state.params:
        np.testing.assert_allclose(np.asarray(fast.state.params[k]), np.asarray(ref.state.params[k]),
                                   rtol=0, atol=1e-5)
