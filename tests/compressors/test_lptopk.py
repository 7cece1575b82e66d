"""Low-precision top-k: top-k's selection, fp16/bf16 values (fp16 clipped
where finite), the delta (Elias-Fano) index code round-trips and is small,
exact wire bits, error feedback, parameters. JAX unless a test says
otherwise (the index code on every backend)."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import compressors as C
from compressors.lptopk import code_size, decode_indices, encode_indices, index_bits
from compressors.core import words
from tests.backends.ops_backends import OPS_BACKENDS, get_ops, to_numpy
from tests.compressors.helpers import OPS, check_plan_bits, leaf_state


def topk_reference(x, k, wire):
    """Top-k of |x| (ties: lowest index), values rounded to the wire dtype."""
    flat = x.reshape(-1)
    idx = np.argsort(-np.abs(flat.astype(np.float64)), kind="stable")[:k]
    out = np.zeros_like(flat)
    out[idx] = flat[idx].astype(wire).astype(flat.dtype)
    return out.reshape(x.shape)


@pytest.mark.parametrize("values,wire", [("fp16", np.float16), ("bf16", ml_dtypes.bfloat16)])
@pytest.mark.parametrize("indices", ["int32", "delta"])
def test_decodes_to_topk_with_rounded_values(values, wire, indices):
    comp = C.parse(f"lptopk(ratio=0.07, values={values!r}, indices={indices!r})")
    rng = np.random.default_rng(0)
    per = [{"w": OPS.asarray(np.round(rng.normal(size=(30, 11)), 1).astype(np.float32))} for _ in range(3)]
    mean, _, bits = C.exchange(OPS, comp, per, [comp.init(OPS, g) for g in per],
                               [C.make_keys(OPS, 0, 0, w) for w in range(3)])
    k = math.ceil(0.07 * 330)
    want = np.mean([topk_reference(np.asarray(g["w"]), k, wire).astype(np.float64) for g in per], axis=0)
    np.testing.assert_allclose(np.asarray(mean["w"], np.float64), want, rtol=1e-6, atol=1e-7)
    assert bits == [k * 16 + index_bits(330, k, indices)]
    assert comp.plan((30, 11))[0].law is C.Law.GATHER


@pytest.mark.parametrize("name", OPS_BACKENDS)
def test_delta_code_round_trips_for_n_workers(name):
    ops = get_ops(name)
    rng = np.random.default_rng(1)
    cases = [(1, 1), (2, 2), (5, 1), (64, 64), (100, 7), (1000, 10), (70_000, 3), (2**20, 5)]
    for d, k in cases:
        sets = [np.sort(rng.choice(d, size=k, replace=False)) for _ in range(3)]
        sets[0] = np.arange(d - k, d) if k < d else sets[0]  # a run at the end
        codes = [encode_indices(ops, ops.asarray(s.astype(np.int32)), d, k) for s in sets]
        for s, (lo, hi) in zip(sets, codes):
            back = to_numpy(decode_indices(ops, lo, hi, d, k))
            assert np.array_equal(back, s), (d, k)
        lows = ops.concatenate([c[0] for c in codes])
        highs = ops.concatenate([c[1] for c in codes])
        both = to_numpy(decode_indices(ops, lows, highs, d, k, n=3))
        assert np.array_equal(both, np.concatenate(sets)), (d, k)


def test_delta_code_is_near_two_plus_log2_d_over_k_bits():
    for d, k in [(10**6, 10**4), (10**6, 10**3), (4096, 512), (10**7, 10**5), (1000, 1000)]:
        bits = index_bits(d, k, "delta")
        low, m = code_size(d, k)
        assert bits == 32 * (words(k, low) + words(m, 1))
        ideal = k * (2 + max(0.0, math.log2(d / k)))
        assert bits <= 1.35 * ideal + 64, (d, k, bits / k)
        assert bits < index_bits(d, k, "int32") or d == k


def test_fp16_values_are_clipped_where_finite_and_nonfinite_stays():
    x = np.array([1e6, -2e5, 3.0, np.inf, 0.5, -1.0, np.nan, 0.25], np.float32)
    comp = C.parse("lptopk(ratio=0.75, values='fp16')")
    g = {"x": OPS.asarray(x)}
    out, _ = C.roundtrip(OPS, comp, g, comp.init(OPS, g), C.make_keys(OPS, 0, 0))
    got = np.asarray(out["x"])
    assert got[0] == 65504.0 and got[1] == -65504.0 and got[2] == 3.0 and got[3] == np.inf
    assert np.isnan(got[6]) and got[-1] == 0.0  # the 6 largest |x| (NaN, inf first) are sent


def test_error_feedback_keeps_the_rounding_error():
    comp = C.parse("ef(lptopk(ratio=0.1, values='bf16'))")
    rng = np.random.default_rng(2)
    g0 = {"x": OPS.asarray(rng.normal(size=200).astype(np.float32))}
    state = comp.init(OPS, g0)
    total_g = total_sent = 0.0
    for t in range(5):
        g = {"x": OPS.asarray(rng.normal(size=200).astype(np.float32))}
        out, state = C.roundtrip(OPS, comp, g, state, C.make_keys(OPS, 0, t))
        total_g = total_g + np.asarray(g["x"], np.float64)
        total_sent = total_sent + np.asarray(out["x"], np.float64)
    residual = np.asarray(leaf_state(state, g, "x").residual, np.float64)
    np.testing.assert_allclose(total_sent + residual, total_g, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", ["lptopk(ratio=0.3)", "lptopk(ratio=0.5, values='fp16', indices='int32')"])
def test_plan_bits_equal_payload_bits_for_every_shape_and_dtype(spec):
    check_plan_bits(spec, {"scalar": (), "one": (1,), "odd": (7,), "cube": (2, 3, 40)})


@pytest.mark.parametrize("bad", ["lptopk(ratio=0)", "lptopk(ratio=2)", "lptopk(values='fp8')",
                                 "lptopk(values=16)", "lptopk(indices='varint')", "lptopk(indices=('int32',))"])
def test_bad_parameters_raise_value_error(bad):
    with pytest.raises(ValueError):
        C.parse(bad)
