"""Monte-Carlo helpers for the stochastic compressors' tests (JAX backend).

``draws(spec, x, K)`` compresses one tensor K times with independent keys in
one jitted, vmapped call, so a statistical test takes milliseconds.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import compressors as C
from tests.compressors.helpers import OPS


def draws(spec, x: np.ndarray, K: int, seed: int = 17, n: int = 1) -> np.ndarray:
    """K decoded estimates (float64, shape (K,) + x.shape) of the mean of n
    workers that all hold x; keys (seed, step=k, rank)."""
    comp = C.parse(spec)
    xs = [OPS.asarray(x)] * n

    def one(step):
        keys = [C.make_keys(OPS, seed, step, r) for r in range(n)]
        states = [comp.init(OPS, g) for g in xs]
        return C.exchange(OPS, comp, xs, states, keys)[0]

    out = jax.jit(jax.vmap(one))(jnp.arange(K, dtype=jnp.uint32))
    return np.asarray(out, np.float64)


def run(spec, grads: list, steps: int = 1, seed: int = 0):
    """``steps`` jitted exchanges among len(grads) workers (same grads every
    step); returns (last mean, states, compressor in force at the last step)."""
    comp = C.parse(spec)
    states = [comp.init(OPS, g) for g in grads]
    out = active = None
    for step in range(steps):
        active = comp.step(step)
        keys = [C.make_keys(OPS, seed, step, r) for r in range(len(grads))]
        out, states = _jitted(active)(grads, states, keys)
    return out, states, active


_CACHE: dict = {}


def _jitted(comp):
    if comp.spec not in _CACHE:
        _CACHE[comp.spec] = jax.jit(lambda g, s, k: C.exchange(OPS, comp, g, s, k)[:2])
    return _CACHE[comp.spec]


def assert_unbiased(samples: np.ndarray, x: np.ndarray, var_bound: np.ndarray, z: float = 5.0) -> None:
    """|mean - x| <= z * sqrt(var_bound / K) elementwise, with var_bound an
    analytic upper bound on the per-entry variance (so entries whose draws all
    agree are still judged fairly), plus float rounding slack 1e-6·|x|."""
    K = samples.shape[0]
    x = np.asarray(x, np.float64)
    err = np.abs(samples.mean(0) - x)
    tol = z * np.sqrt(np.asarray(var_bound, np.float64) / K) + 1e-6 * np.abs(x) + 1e-12
    worst = np.argmax(err / tol)
    assert np.all(err <= tol), f"entry {worst}: |mean - x| = {err.flat[worst]:.3g} > {tol.flat[worst]:.3g}"
    # the bound must really bound the variance: checked on the total over
    # entries (10% slack for sampling noise; single rare-event entries are too noisy)
    assert samples.var(0).sum() <= np.sum(var_bound) * 1.1 + 1e-12, "variance above its analytic bound"


def z_for(count: int, false_alarm: float = 1e-6) -> float:
    """A normal quantile so that ``count`` independent checks all pass with
    probability >= 1 - false_alarm (Bonferroni)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(1 - false_alarm / (2 * max(count, 1)))


