"""Every example spec, *lowered to a compiled MindSpore graph*, against JAX.

Two workers exchange through ``LoopbackExchange`` (the whole protocol of both
workers in one GRAPH_MODE graph, combined exactly as ``compressors.exchange``)
for three steps on a pytree of three leaves (matrix, vector, 3-D tensor).
Compared with ``compressors.exchange`` on the JAX binding with the same
gradients, seed and keys, after every step: the mean estimate and every
worker's state. Bit-identical, except PowerSGD (matmul + QR: rtol 1e-5 /
atol 1e-5 since BLAS accumulation order is not in the contract). Top-k ties
need no set comparison: the lowered top-k is stable by construction
(composite key), which this suite checks on tied inputs below.
Schedules (warm-up, DGC's sparsity warm-up) re-lower at each phase and keep state.
"""
from __future__ import annotations

import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import pytest

import compressors
from backends import get
from backends.mindspore.lower import LoopbackExchange
from compressors import exchange, make_keys
from tests.specs import EXAMPLE_SPECS

J = get("jax")
SHAPES = [(12, 10), (33,), (4, 4, 3)]
N = 2
SEED = 3
MATMUL = ("powersgd",)


def _grads(rng, tie=False, shapes=SHAPES):
    out = []
    for s in shapes:
        g = rng.standard_normal(s).astype(np.float32)
        if tie:  # many equal magnitudes: top-k must break ties by lowest index
            g = np.round(g * 2) / 2
        out.append(g)
    return out


def _close(a, b, tol):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    if tol:
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol, atol=tol)
    else:
        assert np.array_equal(a, b, equal_nan=True), f"max diff {np.max(np.abs(a.astype(np.float64) - b))}"


def run_both(spec, steps=3, tie=False, device="CPU", shapes=SHAPES, n=N):
    """``device``: what the graphs are lowered for (GPU/Ascend: native ops only); they run on CPU."""
    comp = compressors.parse(spec)
    tol = 1e-5 if spec.startswith(MATMUL) else 0
    rng = np.random.default_rng(7)
    lowered = {}

    def at(step):
        ph = comp.phase_of(step)
        if ph not in lowered:
            lowered[ph] = LoopbackExchange(comp.step(step), [(s, np.float32) for s in shapes], n=n, seed=SEED,
                                           device=device)
        return lowered[ph]

    gs = _grads(rng, tie, shapes)
    ms_states = at(0).init([gs] * n)
    j_states = [comp.step(0).init(J, tuple(jnp.asarray(x) for x in gs)) for _ in range(n)]
    for step in range(steps):
        per = [_grads(rng, tie, shapes) for _ in range(n)]
        mean, ms_states = at(step)(per, ms_states, step)
        jm, j_states, _ = exchange(J, comp.step(step), [tuple(jnp.asarray(x) for x in g) for g in per], j_states,
                                   [make_keys(J, SEED, step, w) for w in range(n)])
        for a, b in zip(mean, jm):
            _close(a, b, tol)
        for w in range(n):
            for a, b in zip(ms_states[w], jtu.tree_leaves(j_states[w])):
                _close(a, b, tol)


@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_lowered_matches_jax(spec):
    run_both(spec)


@pytest.mark.parametrize("spec", ["topk(ratio=0.1)", "ef(topk(ratio=0.1))", "dgc(ratio=0.05, sample=0.5)"])
def test_lowered_ties_match_jax(spec):
    run_both(spec, steps=2, tie=True)


def test_many_leaves_pytree():
    """A pytree of 12 parameters of mixed shapes, combinators stacked."""
    comp = compressors.parse("momentum(ef(topk(ratio=0.2)), beta=0.5)")
    shapes = [(3,), (5, 4), (7,), (2, 3, 2), (1,), (16,), (4, 4), (9,), (3, 3), (2,), (11,), (6, 2)]
    lx = LoopbackExchange(comp, [(s, np.float32) for s in shapes], n=N, seed=1)
    rng = np.random.default_rng(0)
    per = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(N)]
    st = lx.init(per)
    js = [comp.init(J, tuple(jnp.asarray(x) for x in g)) for g in per]
    for step in range(2):
        per = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(N)]
        mean, st = lx(per, st, step)
        jm, js, _ = exchange(J, comp, [tuple(jnp.asarray(x) for x in g) for g in per], js,
                             [make_keys(J, 1, step, w) for w in range(N)])
        for a, b in zip(mean, jm):
            _close(a, b, 0)
