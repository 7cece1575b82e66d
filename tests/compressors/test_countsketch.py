"""Count sketch (sketched SGD / FetchSGD): summable sketches with fixed
hashes, heavy hitters recovered from the summed sketch, error feedback in
sketch space, exact wire bits, zeros, non-finite input, parameters. JAX."""
from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest

import compressors as C
from compressors.countsketch import Geometry, hashes, unsketch
from compressors import protocol
from tests.compressors.helpers import OPS, check_plan_bits, leaf_state


def spiky(seed, shape=(40, 25), spikes=((3, 4, 40.0), (17, 0, -30.0), (39, 24, 25.0))):
    """Small noise plus a few large entries (the heavy hitters)."""
    x = np.random.default_rng(seed).normal(size=shape).astype(np.float32) * 0.1
    for i, j, v in spikes:
        x[i, j] = v
    return x


def leaf_sketch(comp, x, step=0):
    """Round 0's payload (the sketch) of one tensor."""
    leaf = comp.for_leaf(x.shape, x.dtype)
    pay, _ = leaf.encode(OPS, OPS.asarray(x), leaf.init(OPS, OPS.asarray(x)), C.make_keys(OPS, 0, step, 0), (), 0)
    return np.asarray(pay, np.float64)


@pytest.mark.parametrize("exact", [False, True])
def test_sketches_are_linear_and_fixed_across_steps_and_workers(exact):
    comp = C.parse(f"countsketch(ratio=0.01, rows=3, width=4.0, exact={exact})")
    xs = [spiky(w) for w in range(3)]
    total = sum(leaf_sketch(comp, x) for x in xs)
    np.testing.assert_allclose(total, leaf_sketch(comp, sum(xs)), rtol=1e-5, atol=1e-5)
    assert np.array_equal(leaf_sketch(comp, xs[0], step=0), leaf_sketch(comp, xs[0], step=9))
    assert comp.plan(xs[0].shape)[0].law is C.Law.SUM


def test_exact_recovers_the_heavy_hitters_of_the_sum_with_exact_values():
    comp = C.parse("countsketch(ratio=0.01, rows=3, width=4.0, exact=True)")
    per = [{"x": OPS.asarray(spiky(w))} for w in range(4)]
    mean, states, bits = C.exchange(OPS, comp, per, [comp.init(OPS, g) for g in per],
                                    [C.make_keys(OPS, 0, 0, w) for w in range(4)])
    want = np.mean([np.asarray(g["x"], np.float64) for g in per], axis=0)
    got = np.asarray(mean["x"], np.float64)
    k = 10  # ceil(0.01 * 1000)
    assert np.count_nonzero(got) == k
    for i, j in ((3, 4), (17, 0), (39, 24)):
        assert got[i, j] == pytest.approx(want[i, j], rel=1e-6)
    nz = got != 0
    np.testing.assert_allclose(got[nz], want[nz], rtol=1e-5)
    assert bits == [3 * 40 * 32, k * 32]  # per round: the sketch, then k exact values
    idx = np.asarray(leaf_state(states[0], per[0], "x").indices)
    assert np.array_equal(np.flatnonzero(nz), np.sort(idx))


def test_fetchsgd_error_sketch_accumulates_and_zeroes_the_applied_buckets():
    """E_t = E_{t-1} + S_t / n, then 0 in every bucket of an applied entry;
    identical on every worker, with the same hash seeds at every step."""
    comp = C.parse("countsketch(ratio=0.01, rows=3, width=4.0)")
    g = Geometry.of((40, 25), 0.01, 3, 4.0)
    states = [comp.init(OPS, {"x": OPS.asarray(spiky(0))}) for _ in range(2)]
    seeds = None
    for t in range(4):
        per = [{"x": OPS.asarray(spiky(10 * t + w))} for w in range(2)]
        before = np.asarray(leaf_state(states[0], per[0], "x").error)
        res = protocol.run(OPS, comp, per, states, [C.make_keys(OPS, 0, t, w) for w in range(2)], record=True)
        states = list(res.states)
        st = leaf_state(states[0], per[0], "x")
        assert np.array_equal(np.asarray(st.error), np.asarray(leaf_state(states[1], per[1], "x").error))
        seeds = np.asarray(st.seeds) if seeds is None else seeds
        assert np.array_equal(np.asarray(st.seeds), seeds)
        applied = np.flatnonzero(np.asarray(res.mean["x"]))
        assert applied.size == g.k
        hit = np.zeros(g.size, bool)
        for p, _ in hashes(OPS, st.seeds, OPS.asarray(applied.astype(np.int32)), g, np.float32):
            hit[np.asarray(p)] = True
        summed = np.asarray(res.log[0].received[0], np.float32)
        want = np.where(hit, 0.0, before + summed * np.float32(0.5)).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(st.error), want)
        # the applied values are the estimates of the accumulated sketch
        est = np.asarray(unsketch(OPS, OPS.asarray(before + summed * np.float32(0.5)),
                                  hashes(OPS, st.seeds, OPS.arange(g.d), g, np.float32)))
        np.testing.assert_array_equal(np.asarray(res.mean["x"]).reshape(-1)[applied], est[applied])
    assert comp.for_leaf((40, 25), np.float32).plan((40, 25), np.float32) == (C.Round(C.Law.SUM, 3 * 40 * 32),)


def test_fetchsgd_running_sum_tracks_the_heavy_entries():
    """A constant gradient of 15 heavy entries over small noise, k = 20 of 400
    entries a step: the applied running sum tracks t * x on the heavy entries
    (one not applied in a step stays in E and comes later). The noise is not
    recovered entry by entry: zeroed buckets drop it, and a bucket's
    accumulated noise is applied to whichever entry it is attributed to."""
    import jax

    comp = C.parse("countsketch(ratio=0.05, rows=5, width=4.0)")
    rng = np.random.default_rng(0)
    x = (rng.normal(size=400) * 0.05).astype(np.float32)
    heavy = rng.choice(400, 15, replace=False)
    x[heavy] = rng.normal(size=15) * 3
    g = {"x": OPS.asarray(x)}
    state = comp.init(OPS, g)
    step = jax.jit(lambda g, s, k: C.roundtrip(OPS, comp, g, s, k))
    total = 0.0
    for t in range(1, 41):
        out, state = step(g, state, C.make_keys(OPS, 0, t))
        total = total + np.asarray(out["x"], np.float64)
        err = np.linalg.norm(total[heavy] - t * x[heavy]) / np.linalg.norm(t * x[heavy])
        assert err < 0.06, (t, err)
    assert np.all(total[heavy] != 0)


def test_error_feedback_around_exact_conserves_the_sum():
    comp = C.parse("ef(countsketch(ratio=0.02, rows=3, exact=True))")
    g0 = {"x": OPS.asarray(spiky(0))}
    state = comp.init(OPS, g0)
    total_g = total_sent = 0.0
    for t in range(4):
        g = {"x": OPS.asarray(spiky(t + 1))}
        out, state = C.roundtrip(OPS, comp, g, state, C.make_keys(OPS, 0, t))
        total_g = total_g + np.asarray(g["x"], np.float64)
        total_sent = total_sent + np.asarray(out["x"], np.float64)
    residual = np.asarray(leaf_state(state, g, "x").residual, np.float64)
    np.testing.assert_allclose(total_sent + residual, total_g, rtol=1e-5, atol=1e-5)


SPECS = ["countsketch(ratio=0.2)", "countsketch(ratio=0.1, rows=2, width=1.5, exact=True)"]
SHAPES = {"scalar": (), "one": (1,), "odd": (7,), "cube": (2, 3, 10)}


@pytest.mark.parametrize("spec", SPECS)
def test_plan_bits_shapes_dtypes_and_zeros(spec):
    check_plan_bits(spec, SHAPES)
    comp = C.parse(spec)
    with jax.enable_x64(True):
        for dt in (np.float32, np.float16, ml_dtypes.bfloat16, np.float64):
            zero = {n: OPS.asarray(np.zeros(s, dt)) for n, s in SHAPES.items()}
            out, _ = C.roundtrip(OPS, comp, zero, comp.init(OPS, zero), C.make_keys(OPS, 0, 0))
            assert all(np.all(np.asarray(v, np.float64) == 0) for v in out.values())


@pytest.mark.parametrize("spec", SPECS)
def test_a_nonfinite_entry_decodes_non_finite(spec):
    for bad in (np.nan, np.inf, -np.inf):
        x = spiky(0)
        x[5, 5] = bad
        g = {"x": OPS.asarray(x), "y": OPS.asarray(spiky(1))}
        comp = C.parse(spec)
        out, _ = C.roundtrip(OPS, comp, g, comp.init(OPS, g), C.make_keys(OPS, 0, 0))
        assert not np.all(np.isfinite(np.asarray(out["x"]))), bad
        assert np.all(np.isfinite(np.asarray(out["y"]))), bad


@pytest.mark.parametrize("bad", ["countsketch(ratio=0)", "countsketch(ratio=1.5)", "countsketch(rows=0)",
                                 "countsketch(rows=16)", "countsketch(rows=2.0)", "countsketch(width=0.5)",
                                 "countsketch(width=True)", "countsketch(exact=1)", "countsketch(ratio='a')"])
def test_bad_parameters_raise_value_error(bad):
    with pytest.raises(ValueError):
        C.parse(bad)


def test_spec_round_trips():
    for spec in SPECS:
        comp = C.parse(spec)
        assert C.parse(comp.spec).spec == comp.spec and comp.doc and not comp.unbiased
