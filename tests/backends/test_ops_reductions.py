"""Op semantics (see ``tests/backends/semantics.py``): ``sum`` in the halving
order, ``max`` (NaN propagates), ``matmul`` (to rounding).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.backends.ops_backends import OPS_BACKENDS, assert_same_bits, get_ops, is_float, maybe_x64, to_numpy
from tests.backends.semantics import F32, F64, FLOATS, HYP, covers, dt_id, normal_values, put


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
