"""``ops.clear_at`` lowered to a compiled MindSpore graph (through its defining
composition) against the JAX binding's one-scatter kernel and NumPy: the same
bits on NaN, +-inf and +-0 entries, with sentinel indices and on a
length-1 tensor. ``ef(topk)``, whose residual it is, runs lowered in
test_lowered_conformance.py."""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from backends import get
from backends.mindspore.lower import LoopbackExchange
from compressors import exchange, make_keys
from compressors.core import Compressor, Law, fixed, single_round

J = get("jax")
NP = get("numpy")


def clearing(k: int) -> Compressor:
    """Sends x with its k largest magnitudes and two sentinel positions cleared."""
    def compress(ops, x, state, keys):
        flat = ops.reshape(x, (-1,))
        idx = ops.top_k_abs(flat, min(k, flat.size))
        idx = ops.concatenate([idx, ops.asarray(np.array([flat.size, flat.size + 3], np.int32))])
        return ops.clear_at(x, idx), state  # x in its own shape: row-major positions

    leaf = single_round(law=Law.GATHER, bits=lambda shape, dtype: 32 * math.prod(shape), compress=compress,
                        decompress=lambda ops, payload, x: payload)
    return Compressor("clearing()", fixed(leaf))


def grads(rng, shapes):
    out = []
    for s in shapes:
        g = rng.standard_normal(s).astype(np.float32)
        flat = g.reshape(-1)
        if flat.size >= 8:
            flat[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e38]
        out.append(g)
    return out


def same(a, b, what):
    """Equal values, NaN where NaN, and the same sign on every other entry (+-0 included)."""
    assert np.array_equal(a, b, equal_nan=True), f"{what}: {a} != {b}"
    num = ~np.isnan(b)
    assert np.array_equal(np.signbit(a[num]), np.signbit(b[num])), f"{what}: signs of zeros differ"


@pytest.mark.parametrize("shapes", [[(6, 5), (17,)], [(1,)], [(2, 3, 4), ()]], ids=["matrix+vector", "length-1",
                                                                                "3-d+scalar"])
def test_lowered_clear_at_matches_jax_and_numpy(shapes):
    comp = clearing(k=9)
    lx = LoopbackExchange(comp, [(s, np.float32) for s in shapes], n=2, seed=5)
    per = [grads(np.random.default_rng(w), shapes) for w in range(2)]
    mean, _ = lx(per, lx.init(per), 0)
    keys = [make_keys(J, 5, 0, w) for w in range(2)]
    jm, _, _ = exchange(J, comp, [tuple(jnp.asarray(x) for x in g) for g in per],
                        [comp.init(J, tuple(per[0]))] * 2, keys)
    nm, _, _ = exchange(NP, comp, [tuple(per_w) for per_w in per], [comp.init(NP, tuple(per[0]))] * 2,
                        [make_keys(NP, 5, 0, w) for w in range(2)])
    for a, b, c in zip(mean, jm, nm):
        a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
        assert a.dtype == b.dtype == c.dtype and a.shape == b.shape == c.shape
        same(a, b, "lowered MindSpore vs JAX")
        same(c, b, "NumPy vs JAX")
    # the check can fail: the mean of two cleared tensors is not the mean of the inputs
    assert not np.array_equal(np.asarray(jm[0]), (per[0][0] + per[1][0]) / 2, equal_nan=True)
