"""Threshold sparsification: selection, capacity overflow, padding, EF."""
from __future__ import annotations

import numpy as np

import compressors as C
from tests.compressors.helpers import OPS, leaf_state
from tests.compressors.mc import run


def encode(spec, x):
    comp = C.parse(spec)
    return comp.for_leaf(x.shape, x.dtype).encode(OPS, OPS.asarray(x), (), C.make_keys(OPS, 0, 0), (), 0)[0]


def test_sends_every_entry_at_or_above_tau_padded_to_capacity():
    x = np.array([0.1, -0.6, 0.5, 0.2, -0.49, 2.0, 0.0, 0.3, 0.0, 0.0], np.float32)
    values, idx = encode("threshold(tau=0.5, capacity=0.5)", x)
    np.testing.assert_array_equal(idx, [1, 2, 5, 10, 10])  # sentinel d = 10
    np.testing.assert_array_equal(values, np.array([-0.6, 0.5, 2.0, 0.0, 0.0], np.float32))
    out, _, _ = run("threshold(tau=0.5, capacity=0.5)", [{"x": OPS.asarray(x)}])
    np.testing.assert_array_equal(np.asarray(out["x"]), np.where(np.abs(x) >= 0.5, x, 0))
    assert C.parse("threshold(tau=0.5, capacity=0.5)").wire_bits((10,)) == 5 * 64


def test_beyond_capacity_the_first_by_index_are_sent():
    x = np.array([1.0, 0.0, 2.0, 3.0, 0.0, 4.0, 5.0, 0.0], np.float32)
    values, idx = encode("threshold(tau=0.5, capacity=0.25)", x)
    np.testing.assert_array_equal(idx, [0, 2])
    np.testing.assert_array_equal(values, [1.0, 2.0])


def test_error_feedback_keeps_the_overflow_and_sends_it_later():
    comp = C.parse("ef(threshold(tau=0.5, capacity=0.25))")
    x = {"x": OPS.asarray(np.array([1.0, 0.0, 2.0, 3.0, 0.0, 4.0, 5.0, 0.0], np.float32))}
    zero = {"x": OPS.asarray(np.zeros(8, np.float32))}
    state = comp.init(OPS, x)
    sent = []
    for t, g in enumerate([x, zero, zero]):
        out, state = C.roundtrip(OPS, comp, g, state, C.make_keys(OPS, 0, t))
        sent.append(np.asarray(out["x"]))
        np.testing.assert_array_equal(sum(sent) + np.asarray(leaf_state(state, x, "x").residual), np.asarray(x["x"]))
    np.testing.assert_array_equal(np.flatnonzero(sent[1]), [3, 5])
    np.testing.assert_array_equal(np.flatnonzero(sent[2]), [6])


def test_error_feedback_conserves_random_gradients():
    comp = C.parse("ef(threshold(tau=1.0, capacity=0.1))")
    rng = np.random.default_rng(0)
    g0 = {"x": OPS.asarray(rng.normal(size=(8, 8)).astype(np.float32))}
    state, total_g, total_sent = comp.init(OPS, g0), 0.0, 0.0
    for t in range(6):
        g = {"x": OPS.asarray(rng.normal(size=(8, 8)).astype(np.float32))}
        out, state = C.roundtrip(OPS, comp, g, state, C.make_keys(OPS, 0, t))
        total_g = total_g + np.asarray(g["x"], np.float64)
        total_sent = total_sent + np.asarray(out["x"], np.float64)
    np.testing.assert_allclose(total_sent + np.asarray(leaf_state(state, g0, "x").residual, np.float64), total_g, atol=1e-5)


def test_nonfinite_entries_are_selected_and_poison_the_payload():
    x = np.array([0.0, 0.1, np.inf, 0.9, 0.0, 0.0], np.float32)
    values, idx = encode("threshold(tau=0.5, capacity=0.5)", x)
    np.testing.assert_array_equal(idx, [2, 3, 6])
    assert np.all(np.isnan(values))
