"""Op semantics (see ``tests/backends/semantics.py``): ``astype`` (saturating
float -> int, wrapping int -> int, float -> float rounding to nearest even)
and ``bitcast``.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.backends.ops_backends import BF16, OPS_BACKENDS, assert_same_bits, get_ops, maybe_x64
from tests.backends.semantics import F16, F32, F64, FLOATS, HYP, INTS, covers, dt_id, normal_values, put


def saturate(v: float, dtype) -> int:
    info = np.iinfo(dtype)
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return int(info.max) if v > 0 else int(info.min)
    return min(max(math.trunc(v), int(info.min)), int(info.max))


CAST_CASES = [0.0, -0.0, 0.4, -0.4, 0.99, -0.99, 1.5, -1.5, 126.9, 127.0, 127.5, 128.0, -128.0, -128.7,
              -129.0, 255.0, 255.9, 256.0, 32767.0, 32768.0, -32768.5, -32769.0, 65535.0, 65536.0,
              2.0 ** 31, -(2.0 ** 31), 2.0 ** 31 + 2 ** 8, -(2.0 ** 31) - 2 ** 8, 1e10, -1e10,
              np.inf, -np.inf, np.nan]


@covers("astype")
@pytest.mark.parametrize("target", INTS + [np.dtype(np.uint32)], ids=dt_id)
@pytest.mark.parametrize("source", FLOATS, ids=dt_id)
def test_float_to_int_saturates(ops, source, target):
    x = np.array(CAST_CASES, np.float64).astype(source)
    want = np.array([saturate(float(v), target) for v in x], target)
    with maybe_x64(source):
        assert_same_bits(ops.astype(put(ops, x), target), want, f"{source}->{target}")


@covers("astype")
@pytest.mark.parametrize("backend", OPS_BACKENDS)
@HYP
@given(st.lists(st.floats(width=32, allow_subnormal=False), min_size=1, max_size=40),
       st.sampled_from(INTS + [np.dtype(np.uint32)]))
def test_float_to_int_saturates_hypothesis(backend, values, target):
    ops = get_ops(backend)
    x = np.array(values, np.float32)
    want = np.array([saturate(float(v), target) for v in x], target)
    assert_same_bits(ops.astype(put(ops, x), target), want, f"float32->{target}")


@covers("astype")
@pytest.mark.parametrize("backend", OPS_BACKENDS)
@HYP
@given(st.lists(st.integers(-(2 ** 31), 2 ** 31 - 1), min_size=1, max_size=40),
       st.sampled_from(INTS + [np.dtype(np.uint32)]))
def test_int_to_int_keeps_low_bits(backend, values, target):
    ops = get_ops(backend)
    x = np.array(values, np.int32)
    width = 8 * target.itemsize
    low = [v % (1 << width) for v in values]
    if target.kind == "i":
        low = [v - (1 << width) if v >= 1 << (width - 1) else v for v in low]
    assert_same_bits(ops.astype(put(ops, x), target), np.array(low, target), f"int32->{target}")


def _round_cases(source, target):
    """Values of ``source`` incl. exact halfway points of ``target`` (to test
    ties-to-even) and values beyond its range; none lands subnormal."""
    rng = np.random.default_rng(3)
    t32 = np.float32 if target == BF16 else target
    info = np.finfo(t32)
    base = normal_values(rng, 300, target, 30.0).astype(np.float64)
    eps = float(np.finfo(np.float32).eps * 128 if target == BF16 else info.eps)
    half = base * (1 + eps / 2)  # halfway between neighbours (for |mantissa| = 1.0) and near it elsewhere
    above = base * (1 + eps * 0.51)
    edge = np.array([float(ml_dtypes.finfo(target).max) * f for f in (1.0, 1.0001, 1.5, 2.0)] + [np.inf, -np.inf, np.nan])
    x = np.concatenate([base, half, above, edge, -edge]).astype(source)
    small = np.abs(x.astype(np.float64)) < float(ml_dtypes.finfo(target).tiny)
    return x[~small | (x == 0)]


@covers("astype")
@pytest.mark.parametrize("source,target", [(F32, F16), (F32, BF16), (F64, F32), (F64, F16), (F64, BF16),
                                           (F16, F32), (BF16, F32), (F16, BF16), (BF16, F16), (F32, F64)],
                         ids=lambda d: dt_id(d))
def test_float_to_float_rounds_to_nearest_even(ops, source, target):
    x = _round_cases(source, target)
    # NumPy/ml_dtypes casts round once, to nearest even (the IEEE reference)
    want = x.astype(np.float64).astype(target) if source != F64 else x.astype(target)
    with maybe_x64(F64 if F64 in (source, target) else F32):
        assert_same_bits(ops.astype(put(ops, x), target), want, f"{source}->{target}")


def test_float_to_float_ties_go_to_even():
    # hand-checked cases: 1 + 2**-11 is halfway between float16 1.0 and 1 + 2**-10
    x = np.array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 65519.0, 65520.0, -65520.0], np.float32)
    want = np.array([1.0, 1 + 2 ** -9, 65504.0, np.inf, -np.inf], np.float16)
    for backend in OPS_BACKENDS:
        ops = get_ops(backend)
        assert_same_bits(ops.astype(put(ops, x), F16), want, backend)


@covers("bitcast")
@pytest.mark.parametrize("pair", [(F32, np.uint32), (np.uint32, F32), (F32, np.int32), (F16, np.uint16),
                                  (BF16, np.uint16), (np.uint16, BF16), (np.int16, F16), (F64, np.uint64)],
                         ids=lambda p: f"{dt_id(p[0])}-{dt_id(p[1])}")
def test_bitcast(ops, pair):
    src, dst = (np.dtype(d) for d in pair)
    rng = np.random.default_rng(4)
    raw = rng.integers(0, 256, size=16 * src.itemsize, dtype=np.uint8)
    x = raw.view(src)
    with maybe_x64(F64 if F64 in (src, dst) else F32):
        assert_same_bits(ops.bitcast(put(ops, x), dst), x.view(dst), "bitcast")
