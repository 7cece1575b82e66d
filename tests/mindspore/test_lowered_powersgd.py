"""PowerSGD lowered to a MindSpore graph on the inputs its orthogonalisation
must survive (rank-deficient, zero, near-zero gradients), against JAX, step
by step from JAX's state (1e-5) and left to itself (with EF: the stated
agreement of docs/powersgd.md); and the static slice ``x[a:]`` it uses (once
emitted as ``x[a]``)."""
from __future__ import annotations

import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import pytest

import compressors
from backends import get
from backends.mindspore.lower import LoopbackExchange
from compressors import exchange, make_keys
from compressors.powersgd import tolerance
from tests.compressors.test_powersgd import EF_AGREEMENT

J = get("jax")
SHAPES = [(24, 20), (9,)]
N = 2


def test_open_ended_slice_keeps_its_axis():
    ms = get("mindspore")
    x = ms.asarray(np.arange(12, dtype=np.float32).reshape(4, 3))
    for sl, want in ((slice(1, None), (3, 3)), (slice(3, None), (1, 3)), (slice(None, 1), (1, 3)),
                     (slice(1, 3), (2, 3)), (slice(None, None, 2), (2, 3))):
        got = x[sl]
        assert got.shape == want and np.array_equal(got.asnumpy(), np.asarray(x.asnumpy())[sl]), sl


@pytest.mark.parametrize("case", ["rank-deficient", "zero", "near-zero"])
@pytest.mark.parametrize("spec", ["powersgd(rank=4, ef=False)", "powersgd(rank=4)"])
def test_lowered_powersgd_matches_jax(spec, case):
    comp = compressors.parse(spec)
    rng = np.random.default_rng(5)
    scale = {"rank-deficient": 1.0, "zero": 0.0, "near-zero": 1e-20}[case]
    # left to itself with EF, p = g + e is full rank and e amplified round-off: the backends drift
    # apart, to at most EF_AGREEMENT dependency tolerances (docs/powersgd.md); step by step: 1e-5
    tol = EF_AGREEMENT * tolerance(0.0, np.float32) if "ef=False" not in spec and case != "zero" else 1e-5

    def grads():
        w = rng.standard_normal((24, 1)) @ rng.standard_normal((1, 20)) * scale  # rank 1 per worker
        return [w.astype(np.float32), rng.standard_normal(9).astype(np.float32)]

    lx = LoopbackExchange(comp, [(s, np.float32) for s in SHAPES], n=N, seed=1)
    first = grads()
    ms_states = lx.init([first] * N)
    j_states = [comp.init(J, tuple(jnp.asarray(x) for x in first)) for _ in range(N)]
    free = ms_states
    for step in range(3):
        per = [grads() for _ in range(N)]
        mean, ms_states = lx(per, [[np.asarray(a) for a in jtu.tree_leaves(s)] for s in j_states], step)
        free_mean, free = lx(per, free, step)
        jm, j_states, _ = exchange(J, comp, [tuple(jnp.asarray(x) for x in g) for g in per], j_states,
                                   [make_keys(J, 1, step, w) for w in range(N)])
        truth = np.mean([g[0] for g in per], axis=0)
        big = max(float(np.abs(truth).max()), 1e-30)
        np.testing.assert_allclose(np.asarray(mean[0]), np.asarray(jm[0]), rtol=1e-5, atol=1e-5 * big)
        np.testing.assert_allclose(np.asarray(free_mean[0]), np.asarray(jm[0]), rtol=tol, atol=tol * big)
        assert np.all(np.isfinite(np.asarray(mean[0]))) and np.all(np.isfinite(np.asarray(free_mean[0])))
        if "ef=False" in spec:  # rank 2 <= 4: the mean itself comes back
            np.testing.assert_allclose(np.asarray(free_mean[0]), truth, rtol=2e-5, atol=2e-5 * big)
        for w in range(N):
            for a, b in zip(ms_states[w], jtu.tree_leaves(j_states[w])):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5 * max(big, 1.0))
