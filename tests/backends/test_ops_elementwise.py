"""Op semantics (see ``tests/backends/semantics.py``): elementwise ops, incl.
signed zeros, infinities and NaN, 0-d arrays, frexp / ldexp.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.backends.ops_backends import BF16, assert_same_bits, maybe_x64, to_numpy
from tests.backends.semantics import F64, FLOATS, covers, dt_id, normal_values, put

SPECIALS = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.75, -0.75, 1e3, -1e3, np.inf, -np.inf, np.nan]


def special_values(dtype, rng):
    v = np.concatenate([np.array(SPECIALS, np.float64), rng.standard_normal(40) * 10])
    return v.astype(dtype)


@covers("abs", "sign", "floor", "isfinite", "sqrt")
@pytest.mark.parametrize("dtype", FLOATS, ids=dt_id)
def test_unary(ops, dtype):
    rng = np.random.default_rng(0)
    x = special_values(dtype, rng)
    x64 = x.astype(np.float64)
    with maybe_x64(dtype):
        xs = put(ops, x)
        assert_same_bits(ops.abs(xs), np.abs(x64).astype(dtype), "abs")
        # sign: -1/0/+1 in x's dtype, zeros keep their sign, NaN -> NaN
        sign = np.where(x64 > 0, 1.0, np.where(x64 < 0, -1.0, x64))
        assert_same_bits(ops.sign(xs), sign.astype(dtype), "sign")
        assert_same_bits(ops.floor(xs), np.floor(x64).astype(dtype), "floor")
        assert_same_bits(ops.isfinite(xs), np.isfinite(x64), "isfinite")
        pos = np.abs(x)
        # sqrt correctly rounded: float64 sqrt rounds once more to a narrower
        # type without double-rounding error (53 >= 2 * 24 + 2)
        want = np.sqrt(pos.astype(np.float64)).astype(dtype) if dtype != F64 else np.sqrt(pos)
        assert_same_bits(ops.sqrt(put(ops, pos)), want, "sqrt")


@covers("abs", "sign", "sqrt", "floor", "isfinite", "astype", "maximum")
@pytest.mark.parametrize("dtype", FLOATS, ids=dt_id)
def test_zero_d_arrays(ops, dtype):
    """Scalar leaves: 0-d in, 0-d arrays of the right dtype out."""
    with maybe_x64(dtype):
        for v in (-0.0, 2.25, -3.5):
            x = np.asarray(v, dtype)
            X = put(ops, x)
            assert_same_bits(ops.abs(X), np.asarray(abs(v), dtype), "abs")
            assert_same_bits(ops.sign(X), np.asarray(math.copysign(1.0, v) if v else v, dtype), "sign")
            assert_same_bits(ops.sqrt(ops.abs(X)), np.asarray(math.sqrt(abs(v)), dtype), "sqrt")
            assert_same_bits(ops.floor(X), np.asarray(math.floor(v), dtype) if v else x, "floor")
            assert_same_bits(ops.isfinite(X), np.asarray(True), "isfinite")
            assert_same_bits(ops.astype(X, np.int8), np.asarray(math.trunc(v), np.int8), "astype")
            assert_same_bits(ops.maximum(X, X), x, "maximum")


@covers("maximum", "minimum", "where")
@pytest.mark.parametrize("dtype", FLOATS, ids=dt_id)
def test_binary(ops, dtype):
    rng = np.random.default_rng(1)
    a = special_values(dtype, rng)
    b = np.roll(a, 3)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    nan = np.isnan(a64) | np.isnan(b64)
    # keep +0/-0 pairs out: which zero max(+0, -0) returns is not specified
    zeros = (a64 == 0) & (b64 == 0)
    a, b = a[~zeros], b[~zeros]
    a64, b64, nan = a64[~zeros], b64[~zeros], nan[~zeros]
    with maybe_x64(dtype):
        A, B = put(ops, a), put(ops, b)
        assert_same_bits(ops.maximum(A, B), np.where(nan, np.nan, np.where(a64 > b64, a64, b64)).astype(dtype), "maximum")
        assert_same_bits(ops.minimum(A, B), np.where(nan, np.nan, np.where(a64 < b64, a64, b64)).astype(dtype), "minimum")
        cond = a64 > 0
        assert_same_bits(ops.where(put(ops, cond), A, B), np.where(cond, a, b), "where")
        # broadcasting a scalar branch
        assert_same_bits(ops.where(put(ops, cond), A, ops.zeros((), dtype)), np.where(cond, a, np.zeros((), dtype)),
                         "where broadcast")


@covers("frexp", "ldexp")
@pytest.mark.parametrize("dtype", FLOATS, ids=dt_id)
def test_frexp_ldexp(ops, dtype):
    rng = np.random.default_rng(2)
    x = np.concatenate([normal_values(rng, 200, dtype, 100.0), np.array([0.0, -0.0, 1.0, -0.5, 3.0], dtype)])
    with maybe_x64(dtype):
        m, e = ops.frexp(put(ops, x))
        m, e = to_numpy(m), to_numpy(e)
        assert m.dtype == x.dtype and e.dtype == np.int32
        want = [math.frexp(float(v)) for v in x]
        assert_same_bits(m, np.array([w[0] for w in want], dtype), "frexp mantissa")
        assert_same_bits(e, np.array([w[1] for w in want], np.int32), "frexp exponent")
        # non-finite: mantissa is x itself
        nf = np.array([np.inf, -np.inf, np.nan], dtype)
        assert_same_bits(to_numpy(ops.frexp(put(ops, nf))[0]), nf, "frexp non-finite")
        # ldexp inverts frexp exactly, and scales exactly inside the normal range
        assert_same_bits(ops.ldexp(put(ops, m), put(ops, e)), x, "ldexp(frexp)")
        shift = rng.integers(-5, 6, size=x.size).astype(np.int32)
        want = np.array([math.ldexp(float(v), int(s)) for v, s in zip(x, shift)]).astype(dtype)
        assert_same_bits(ops.ldexp(put(ops, x), put(ops, shift)), want, "ldexp shift")
        big = np.array([1.0, -1.0], dtype)
        emax = np.finfo(np.float32 if dtype == BF16 else dtype).maxexp
        assert_same_bits(ops.ldexp(put(ops, big), put(ops, np.array([emax, emax], np.int32))),
                         np.array([np.inf, -np.inf], dtype), "ldexp overflow")
