"""Random-k: shared indices, summable payloads, scaling, uniform marginals, EF."""
from __future__ import annotations

import numpy as np

import compressors as C
from tests.compressors.helpers import OPS, leaf_state
from tests.compressors.mc import draws, run


def grads(n, shape=(6, 9), seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [{"x": OPS.asarray(rng.normal(size=shape).astype(dtype))} for _ in range(n)]


def test_summed_payloads_equal_the_mean_of_each_workers_decompression():
    comp = C.parse("randomk(ratio=0.25)")
    gs = grads(4)
    assert comp.plan((6, 9))[0].law is C.Law.SUM
    joint, _, _ = run(comp, gs)
    singles = [np.asarray(C.roundtrip(OPS, comp, g, comp.init(OPS, g), C.make_keys(OPS, 0, 0, w))[0]["x"])
               for w, g in enumerate(gs)]
    np.testing.assert_allclose(np.asarray(joint["x"]), np.mean(singles, axis=0), rtol=1e-6, atol=1e-6)
    support = [set(np.flatnonzero(s)) for s in singles]
    assert all(s == support[0] for s in support) and len(support[0]) == 14  # ceil(0.25 * 54), same on all


def test_scaled_and_unscaled_values():
    x = np.arange(1, 41, dtype=np.float32)
    for scale, factor in ((True, 40 / 4), (False, 1.0)):
        y = draws(f"randomk(ratio=0.1, scale={scale})", x, 3)
        for row in y:
            idx = np.flatnonzero(row)
            assert idx.size == 4
            np.testing.assert_allclose(row[idx], x[idx] * factor, rtol=1e-6)


def test_every_index_is_equally_likely():
    d, k, K = 50, 5, 6000
    hits = (draws("randomk(ratio=0.1, scale=False)", np.ones(d, np.float32), K) != 0).sum(0)
    expected = K * k / d
    assert np.all(np.abs(hits - expected) <= 5 * np.sqrt(expected * (1 - k / d)))
    assert np.all(hits > 0)


def test_the_wire_keeps_fp16_values_unscaled():
    x = np.full(100, 30000.0, np.float16)  # * d/k = 100 would overflow fp16 on the wire
    comp = C.parse("randomk(ratio=0.5)")
    payload, _ = comp.for_leaf(x.shape, x.dtype).encode(OPS, OPS.asarray(x), (), C.make_keys(OPS, 0, 0), (), 0)
    assert payload.dtype == np.float16 and np.all(np.asarray(payload) == 30000.0)
    assert comp.wire_bits((100,), np.float16) == 50 * 16


def test_nonfinite_anywhere_makes_the_sent_values_nan():
    x = np.ones(20, np.float32)
    x[7] = np.nan
    y = draws("randomk(ratio=0.1)", x, 5)
    for row in y:
        assert np.sum(np.isnan(row)) == 2 and np.sum(row == 0) == 18


def test_error_feedback_conserves_the_sum():
    comp = C.parse("ef(randomk(ratio=0.1, scale=False))")
    state = comp.init(OPS, grads(1)[0])
    total_g = total_sent = 0.0
    for t in range(5):
        g = grads(1, seed=t + 1)[0]
        out, state = C.roundtrip(OPS, comp, g, state, C.make_keys(OPS, 0, t))
        total_g = total_g + np.asarray(g["x"], np.float64)
        total_sent = total_sent + np.asarray(out["x"], np.float64)
    residual = np.asarray(leaf_state(state, g, "x").residual, np.float64)
    np.testing.assert_allclose(total_sent + residual, total_g, rtol=1e-6, atol=1e-6)
