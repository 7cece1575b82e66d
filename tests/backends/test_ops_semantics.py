"""Every op of ``compressors.ops.Ops`` against its documented semantics, on
every backend in ``OPS_BACKENDS``.

Each test computes the expected result with a small, independent NumPy /
pure-Python oracle written from the docstring, and requires the backend's
result to have the same dtype, shape and bits (any NaN equals any NaN), so
two backends passing a test agree bit for bit. Exceptions: ``matmul``
(accumulation order: tolerance) and subnormal float32/float64/bf16 values,
which are kept out of arithmetic inputs and results because XLA:CPU flushes
them to zero while NumPy keeps IEEE subnormals.

float64 runs JAX with ``jax_enable_x64`` switched on for that test only
(``maybe_x64``), so the rest of the session keeps JAX's default 32-bit mode.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends.numpy import threefry
from compressors.ops import OP_NAMES
from tests.backends.ops_backends import (BF16, OPS_BACKENDS, assert_same_bits, get_ops, is_float,
                                         maybe_x64, to_numpy)

F32, F16, F64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)
FLOATS = [F32, F16, BF16, F64]
INTS = [np.dtype(d) for d in (np.int8, np.int16, np.int32, np.uint8)]
HYP = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TESTED: set[str] = set()


def covers(*names):
    """Record which ops a test covers (``test_every_op_is_tested`` checks)."""
    TESTED.update(names)
    return lambda f: f


def dt_id(d):
    return np.dtype(d).name


def put(ops, a, dtype=None):
    a = np.asarray(a) if dtype is None else np.asarray(a, dtype=dtype)
    return ops.asarray(a)


def normal_values(rng, n, dtype, scale=1.0):
    """Random values of ``dtype`` that are normal numbers (no subnormals)."""
    v = (rng.standard_normal(n) * scale).astype(dtype)
    tiny = np.finfo(np.float32 if dtype == BF16 else dtype).tiny
    v[np.abs(v.astype(np.float64)) < float(tiny) * 4] = 1
    return v


# ---------------------------------------------------------------------------
# creation and shape
# ---------------------------------------------------------------------------

@covers("asarray", "zeros", "full", "arange")
@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=dt_id)
def test_creation(ops, dtype):
    with maybe_x64(dtype):
        assert_same_bits(ops.asarray(np.arange(5).astype(dtype)), np.arange(5).astype(dtype), "asarray")
        assert_same_bits(ops.asarray([1, 2, 3], dtype), np.array([1, 2, 3], dtype), "asarray dtype")
        assert_same_bits(ops.zeros((2, 3), dtype), np.zeros((2, 3), dtype), "zeros")
        assert_same_bits(ops.zeros((0,), dtype), np.zeros((0,), dtype), "zeros empty")
        assert_same_bits(ops.full((4,), 3, dtype), np.full((4,), 3, dtype), "full")
    assert_same_bits(ops.arange(7), np.arange(7, dtype=np.int32), "arange")
    assert_same_bits(ops.arange(0), np.zeros(0, np.int32), "arange empty")


@covers("asarray")
def test_asarray_python_scalars_use_32_bit_defaults(ops):
    assert to_numpy(ops.asarray(1.5)).dtype == np.float32
    assert to_numpy(ops.asarray([1, 2])).dtype == np.int32
    assert to_numpy(ops.asarray(True)).dtype == np.bool_


@covers("reshape", "concatenate", "stack", "pad", "transpose")
@pytest.mark.parametrize("dtype", [F32, BF16, np.dtype(np.int32), np.dtype(np.uint32)], ids=dt_id)
def test_shape_ops(ops, dtype):
    a = np.arange(12).astype(dtype)
    m = a.reshape(3, 4)
    assert_same_bits(ops.reshape(put(ops, a), (3, 4)), m, "reshape")
    assert_same_bits(ops.reshape(put(ops, m), (12,)), a, "reshape back")
    assert_same_bits(ops.concatenate([put(ops, a[:5]), put(ops, a[5:])]), a, "concatenate")
    assert_same_bits(ops.concatenate([put(ops, m[:1]), put(ops, m[1:])], axis=0), m, "concat 2-D")
    assert_same_bits(ops.concatenate([put(ops, m[:, :1]), put(ops, m[:, 1:])], axis=1), m, "concat axis 1")
    assert_same_bits(ops.stack([put(ops, a[:4]), put(ops, a[4:8])]), a[:8].reshape(2, 4), "stack")
    assert_same_bits(ops.pad(put(ops, a), 3), np.concatenate([a, np.zeros(3, dtype)]), "pad")
    assert_same_bits(ops.pad(put(ops, a), 0), a, "pad 0")
    assert_same_bits(ops.transpose(put(ops, m)), m.T.copy(), "transpose")


# ---------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# casts
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------

def halving_sum_oracle(x: np.ndarray, axis=None) -> np.ndarray:
    """The docstring, literally: zero-pad to a power of two and halve."""
    if axis is None:
        x, axis = x.reshape(-1), 0
    x = np.moveaxis(x, axis, -1)
    m = x.shape[-1]
    if m == 0:
        return np.zeros(x.shape[:-1], x.dtype)
    p = 1 << (m - 1).bit_length()
    s = np.concatenate([x, np.zeros(x.shape[:-1] + (p - m,), x.dtype)], axis=-1)
    while s.shape[-1] > 1:
        h = s.shape[-1] // 2
        s = s[..., :h] + s[..., h:]
    return s[..., 0]


@covers("sum")
@pytest.mark.parametrize("dtype", FLOATS + [np.dtype(np.uint32)], ids=dt_id)
@pytest.mark.parametrize("n", [1, 3, 8, 13, 100, 4097])
def test_sum_halving_order(ops, dtype, n):
    rng = np.random.default_rng(n)
    if is_float(dtype):
        x = normal_values(rng, n, dtype, 1e3)
        x[rng.random(n) < 0.2] = -0.0  # -0 + 0 = +0 shows the padding is really added
    else:
        x = rng.integers(0, 2 ** 31, size=n).astype(dtype)
    with maybe_x64(dtype):
        assert_same_bits(ops.sum(put(ops, x)), halving_sum_oracle(x), "sum")
        m = np.stack([x, x[::-1], -x if is_float(dtype) else x])
        assert_same_bits(ops.sum(put(ops, m), axis=1), halving_sum_oracle(m, 1), "sum axis 1")
        assert_same_bits(ops.sum(put(ops, m), axis=0), halving_sum_oracle(m, 0), "sum axis 0")
        assert_same_bits(ops.sum(put(ops, m)), halving_sum_oracle(m), "sum 2-D flat")


def test_sum_is_not_sequential():
    """The halving order differs from a left-to-right sum (so the test above
    really checks the order): 1e8 + 1 + ... in float32."""
    x = np.array([1e8] + [1.0] * 7, np.float32)
    assert halving_sum_oracle(x) != np.float32(sum(float(np.float32(v)) for v in x))
    assert halving_sum_oracle(x) == np.float32(1e8 + 4)  # 1e8+1 -> 1e8 per pair, 1+1 survive
    for backend in OPS_BACKENDS:
        ops = get_ops(backend)
        assert_same_bits(ops.sum(put(ops, x)), halving_sum_oracle(x), backend)


@covers("sum")
@pytest.mark.parametrize("backend", OPS_BACKENDS)
@HYP
@given(st.lists(st.floats(-(2.0 ** 100), 2.0 ** 100, width=32, allow_subnormal=False), min_size=1, max_size=70))
def test_sum_hypothesis(backend, values):
    ops = get_ops(backend)
    x = np.array(values, np.float32)
    with np.errstate(over="ignore"):
        want = halving_sum_oracle(x)
    if abs(float(want)) < float(np.finfo(np.float32).tiny) * 8 and want != 0:
        return  # a subnormal result: outside the bit-identity contract
    assert_same_bits(ops.sum(put(ops, x)), want, "sum")


def test_sum_identical_across_backends_large():
    rng = np.random.default_rng(5)
    x = normal_values(rng, 300_001, F32)
    results = [to_numpy(get_ops(b).sum(put(get_ops(b), x))) for b in OPS_BACKENDS]
    for b, r in zip(OPS_BACKENDS, results):
        assert_same_bits(r, results[0], b)


@covers("max")
@pytest.mark.parametrize("dtype", FLOATS + [np.dtype(np.int32)], ids=dt_id)
def test_max(ops, dtype):
    rng = np.random.default_rng(6)
    m = (rng.standard_normal((4, 9)) * 100).astype(dtype)
    with maybe_x64(dtype):
        assert_same_bits(ops.max(put(ops, m)), np.max(m.astype(np.float64)).astype(dtype), "max")
        assert_same_bits(ops.max(put(ops, m), axis=0), m.astype(np.float64).max(0).astype(dtype), "max axis 0")
        assert_same_bits(ops.max(put(ops, m), axis=1), m.astype(np.float64).max(1).astype(dtype), "max axis 1")
        if is_float(dtype):
            m[2, 3] = np.nan
            assert np.isnan(to_numpy(ops.max(put(ops, m))).astype(np.float64))
            got = to_numpy(ops.max(put(ops, m), axis=1)).astype(np.float64)
            assert np.isnan(got[2]) and not np.isnan(got[[0, 1, 3]]).any()
            # long rows too (XLA:CPU's vectorized reduction once dropped the NaN)
            long = rng.standard_normal((2, 4099)).astype(dtype)
            long[1, 100] = np.nan
            got = to_numpy(ops.max(put(ops, long), axis=1)).astype(np.float64)
            assert np.isnan(got[1]) and not np.isnan(got[0])
            assert np.isnan(to_numpy(ops.max(put(ops, long[1]))).astype(np.float64))


# ---------------------------------------------------------------------------
# linear algebra
# ---------------------------------------------------------------------------

@covers("matmul")
@pytest.mark.parametrize("dtype", [F32, F64], ids=dt_id)
def test_matmul(ops, dtype):
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((30, 17)).astype(dtype), rng.standard_normal((17, 4)).astype(dtype)
    with maybe_x64(dtype):
        got = to_numpy(ops.matmul(put(ops, a), put(ops, b)))
    assert got.dtype == dtype and got.shape == (30, 4)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-5 if dtype == F32 else 1e-12, atol=1e-5 if dtype == F32 else 1e-12)


# ---------------------------------------------------------------------------
# selection
# ---------------------------------------------------------------------------

def total_order_key(v) -> int:
    """IEEE 754 totalOrder as an unsigned key: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN."""
    a = np.asarray(v)
    width = 8 * a.dtype.itemsize
    b = int(a.reshape(1).view({16: np.uint16, 32: np.uint32, 64: np.uint64}[width])[0])
    sign = 1 << (width - 1)
    return ((1 << width) - 1) ^ b if b & sign else b | sign


def top_k_oracle(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    if is_float(x.dtype):
        keys = [total_order_key(v) for v in x]
    else:
        keys = [int(v) for v in x]
    order = sorted(range(x.size), key=lambda i: (-keys[i], i))[:k]
    idx = np.array(order, np.int32)
    return x[idx], idx


def check_top_k(ops, x, k, what=""):
    v, i = ops.top_k(put(ops, x), k)
    wv, wi = top_k_oracle(x, k)
    assert_same_bits(i, wi, f"top_k indices {what}")
    assert_same_bits(v, wv, f"top_k values {what}")


@covers("top_k")
@pytest.mark.parametrize("dtype", FLOATS, ids=dt_id)
def test_top_k_ties_and_nan(ops, dtype):
    x = np.array([1, 0.0, 0.0, np.inf, 2, 2, np.nan, -np.inf, 0, 1, np.nan, -3], np.float64).astype(dtype)
    with maybe_x64(dtype):
        for k in range(1, x.size + 1):
            check_top_k(ops, x, k, f"k={k}")
        # NaN first (lowest index first among NaNs), then +inf, ties by index
        _, i = ops.top_k(put(ops, x), 6)
        assert to_numpy(i).tolist() == [6, 10, 3, 4, 5, 0]


@covers("top_k")
def test_top_k_total_order_of_zeros_and_negative_nan(ops):
    """Beyond the docstring: backends rank by IEEE totalOrder, as XLA's
    TopK does (+0 above -0; a NaN with the sign bit set ranks lowest)."""
    neg_nan = np.array([0xFFC00000], np.uint32).view(np.float32)[0]
    x = np.array([-0.0, 0.0, neg_nan, -np.inf, -0.0, np.nan], np.float32)
    check_top_k(ops, x, x.size, "totalOrder")


@covers("top_k")
@pytest.mark.parametrize("n,k", [(50_000, 1), (50_000, 500), (50_000, 5_000), (50_000, 12_500), (50_000, 30_000),
                                 (70_001, 701), (20_000, 20_000)])
@pytest.mark.parametrize("kind", ["normal", "abs", "few_values", "mostly_zero", "sorted", "nan_inf"])
def test_top_k_large_inputs(ops, n, k, kind):
    """Large inputs exercise the NumPy backend's sampled-threshold path and
    its fall-backs (heavy ties at the threshold, adversarial orders)."""
    rng = np.random.default_rng(n + k)
    x = rng.standard_normal(n).astype(np.float32)
    if kind == "abs":
        x = np.abs(x)
    elif kind == "few_values":
        x = rng.integers(0, 4, size=n).astype(np.float32)
    elif kind == "mostly_zero":
        x = np.where(rng.random(n) < 0.995, 0.0, x).astype(np.float32)
    elif kind == "sorted":
        x = np.sort(x)
    elif kind == "nan_inf":
        x[rng.random(n) < 0.001] = np.nan
        x[rng.random(n) < 0.001] = np.inf
    v, i = ops.top_k(put(ops, x), k)
    # fast oracle for large n: stable argsort of the totalOrder keys
    u = x.view(np.uint32).astype(np.uint64)
    keys = np.where(u >= 2 ** 31, (2 ** 32 - 1) ^ u, u | 2 ** 31)
    want = np.argsort(-keys.astype(np.int64), kind="stable")[:k].astype(np.int32)
    assert_same_bits(i, want, "top_k indices")
    assert_same_bits(v, x[want], "top_k values")


@covers("top_k")
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dt_id)
def test_top_k_large_half_precision(ops, dtype):
    rng = np.random.default_rng(8)
    x = np.abs(rng.standard_normal(40_000)).astype(dtype)  # many exact ties in 16-bit types
    k = 400
    v, i = ops.top_k(put(ops, x), k)
    keys = x.astype(np.float64)
    want = np.argsort(-keys, kind="stable")[:k].astype(np.int32)
    assert_same_bits(i, want, "indices")
    assert_same_bits(v, x[want], "values")


@covers("top_k")
@pytest.mark.parametrize("backend", OPS_BACKENDS)
@HYP
@given(st.lists(st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan, 7.0]) | st.floats(width=32),
                min_size=1, max_size=50), st.data())
def test_top_k_hypothesis(backend, values, data):
    ops = get_ops(backend)
    x = np.array(values, np.float32)
    k = data.draw(st.integers(1, x.size))
    check_top_k(ops, x, k)


@covers("top_k")
def test_top_k_int(ops):
    x = np.array([3, -1, 3, 7, -8, 7, 0], np.int32)
    for k in range(1, 8):
        check_top_k(ops, x, k, f"k={k}")


@covers("gather")
@pytest.mark.parametrize("dtype", FLOATS + [np.dtype(np.int32), np.dtype(np.uint32), np.dtype(np.uint8)], ids=dt_id)
def test_gather_sentinel_reads_zero(ops, dtype):
    rng = np.random.default_rng(10)
    raw = rng.integers(0, 256, size=10 * dtype.itemsize, dtype=np.uint8).view(dtype)  # every bit in use
    x = np.where(np.isnan(raw.astype(np.float64)), 1, raw).astype(dtype) if is_float(dtype) else raw
    idx = np.array([0, 9, 3, 3, 10, 11, 2 ** 31 - 1, 5], np.int32)
    want = np.array([x[i] if 0 <= i < 10 else 0 for i in idx], dtype)
    with maybe_x64(dtype):
        assert_same_bits(ops.gather(put(ops, x), put(ops, idx)), want, "gather")
        assert_same_bits(ops.gather(put(ops, x), put(ops, idx.reshape(2, 4))), want.reshape(2, 4), "gather 2-D idx")
        assert_same_bits(ops.gather(put(ops, x), put(ops, np.zeros(0, np.int32))), np.zeros(0, dtype), "empty")


@covers("gather")
def test_gather_negative_index_reads_zero(ops):
    x = np.arange(1, 6).astype(np.float32)
    idx = np.array([-1, -5, -6, 2], np.int32)
    assert_same_bits(ops.gather(put(ops, x), put(ops, idx)), np.array([0, 0, 0, 3], np.float32), "gather")


@covers("scatter_add")
@pytest.mark.parametrize("dtype", FLOATS + [np.dtype(np.int32)], ids=dt_id)
def test_scatter_add_drop_and_duplicates(ops, dtype):
    rng = np.random.default_rng(9)
    size = 20
    idx = rng.integers(0, size + 6, size=200).astype(np.int32)  # duplicates and sentinels >= size
    vals = normal_values(rng, 200, dtype, 100.0) if is_float(dtype) else rng.integers(-50, 50, 200).astype(dtype)
    want = np.zeros(size, dtype)
    for i, v in zip(idx, vals):  # in index order of i, rounding after every add
        if 0 <= i < size:
            want[i] = want[i] + v
    with maybe_x64(dtype):
        assert_same_bits(ops.scatter_add(size, put(ops, idx), put(ops, vals)), want, "scatter_add")


@covers("scatter_add")
@pytest.mark.parametrize("dtype,big", [(F16, 2048.0), (BF16, 256.0), (F32, 2.0 ** 24)], ids=lambda v: str(v))
def test_scatter_add_accumulates_in_index_order(ops, dtype, big):
    """big + 1 rounds back to big in this dtype, 1 + 1 + big does not."""
    idx = put(ops, np.zeros(3, np.int32))
    first = ops.scatter_add(1, idx, put(ops, np.array([big, 1, 1], dtype)))
    last = ops.scatter_add(1, idx, put(ops, np.array([1, 1, big], dtype)))
    assert_same_bits(first, np.array([big], dtype), "big first")
    assert_same_bits(last, np.array([big + 2], dtype), "big last")


@covers("scatter_add")
def test_scatter_add_negative_index_dropped(ops):
    out = ops.scatter_add(4, put(ops, np.array([-1, -4, 1], np.int32)), put(ops, np.array([5.0, 6.0, 7.0], np.float32)))
    assert_same_bits(out, np.array([0, 7, 0, 0], np.float32), "scatter_add")


@covers("nonzero")
@pytest.mark.parametrize("capacity", [0, 1, 3, 7, 12, 20])
def test_nonzero_padding(ops, capacity):
    mask = np.array([0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0], bool)
    pos = [i for i in range(mask.size) if mask[i]][:capacity]
    want = np.array(pos + [mask.size] * (capacity - len(pos)), np.int32)
    assert_same_bits(ops.nonzero(put(ops, mask), capacity), want, "nonzero")


# ---------------------------------------------------------------------------
# randomness
# ---------------------------------------------------------------------------

def test_threefry_known_answers():
    """Random123's known-answer vectors for threefry2x32 with 20 rounds."""
    cases = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
             ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
             ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]
    for key, ctr, want in cases:
        y0, y1 = threefry.threefry2x32(key[0], key[1], np.uint32(ctr[0]), np.uint32(ctr[1]))
        assert (int(y0), int(y1)) == want


@covers("key", "fold_in")
@pytest.mark.parametrize("seed", [0, 1, 42, 2 ** 31 - 1, 2 ** 32 - 1, -1, -7])
def test_key_and_fold_in_match_jax(ops, seed):
    want = np.asarray(jax.random.PRNGKey(seed))
    k = ops.key(seed)
    assert_same_bits(k, want, "key")
    for data in [0, 1, 17, 2 ** 31, 2 ** 32 - 1]:
        assert_same_bits(ops.fold_in(k, data), np.asarray(jax.random.fold_in(jnp.asarray(want), data)), "fold_in")
    # a uint32 array datum, as compressors fold in traced values
    assert_same_bits(ops.fold_in(k, put(ops, np.uint32(5))), np.asarray(jax.random.fold_in(jnp.asarray(want), 5)),
                     "fold_in array")


@covers("random_bits", "uniform")
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (2, 3, 4), (1000,), (300_001,)])
def test_random_bits_and_uniform_match_jax(ops, shape):
    key = jax.random.fold_in(jax.random.PRNGKey(3), 11)
    k = ops.asarray(np.asarray(key))
    want = np.asarray(jax.random.bits(key, shape, jnp.uint32))
    assert_same_bits(ops.random_bits(k, shape), want, "random_bits")
    u = np.asarray(jax.random.uniform(key, shape, jnp.float32))
    assert_same_bits(ops.uniform(k, shape), u, "uniform")
    formula = ((want >> 9) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)
    assert_same_bits(u, formula, "uniform formula")


def test_random_bits_reference_matches_kernel():
    key = threefry.fold_in(threefry.key(9), 4)
    assert_same_bits(threefry.random_bits(key, (4099,)), threefry.random_bits_reference(key, (4099,)), "kernel")


# ---------------------------------------------------------------------------
# bit packing
# ---------------------------------------------------------------------------

def pack_oracle(codes, bits):
    per = 32 // bits
    words = []
    for w in range(-(-len(codes) // per)):
        acc = 0
        for j, c in enumerate(codes[w * per:(w + 1) * per]):
            acc |= int(c) << (j * bits)
        words.append(acc)
    return np.array(words, np.uint32)


@covers("pack_bits", "unpack_bits")
@pytest.mark.parametrize("bits", list(range(1, 17)) + [32])
@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 100])
def test_pack_unpack_round_trip(ops, bits, n):
    rng = np.random.default_rng(bits * 1000 + n)
    codes = rng.integers(0, 2 ** bits, size=n, dtype=np.uint64).astype(np.uint32)
    words = ops.pack_bits(put(ops, codes), bits)
    assert_same_bits(words, pack_oracle(codes, bits), "pack_bits")
    assert to_numpy(words).size == -(-n // (32 // bits))
    assert_same_bits(ops.unpack_bits(words, bits, n), codes, "unpack_bits")
    if n:
        assert_same_bits(ops.unpack_bits(words, bits, n - 1), codes[:-1], "unpack prefix")


@covers("pack_bits", "unpack_bits")
@pytest.mark.parametrize("backend", OPS_BACKENDS)
@HYP
@given(st.integers(1, 32).filter(lambda b: b <= 16 or b == 32), st.data())
def test_pack_unpack_hypothesis(backend, bits, data):
    ops = get_ops(backend)
    codes = np.array(data.draw(st.lists(st.integers(0, 2 ** bits - 1), max_size=80)), np.uint32)
    words = ops.pack_bits(put(ops, codes), bits)
    assert_same_bits(words, pack_oracle(codes, bits), "pack_bits")
    assert_same_bits(ops.unpack_bits(words, bits, codes.size), codes, "unpack_bits")


def test_pack_bits_rejects_bad_width():
    for backend in OPS_BACKENDS:
        ops = get_ops(backend)
        with pytest.raises(ValueError):
            ops.pack_bits(put(ops, np.zeros(3, np.uint32)), 0)
        with pytest.raises(ValueError):
            ops.unpack_bits(put(ops, np.zeros(3, np.uint32)), 33, 3)


# ---------------------------------------------------------------------------

def test_every_op_is_tested():
    missing = sorted(set(OP_NAMES) - TESTED)
    assert not missing, f"ops without a semantics test: {missing}"


def test_backend_names():
    for backend in OPS_BACKENDS:
        assert get_ops(backend).name == backend
