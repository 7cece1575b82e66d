"""Op semantics (see ``tests/backends/semantics.py``): ``gather`` (out-of-range
indices read 0), ``scatter_add`` (in index order, out-of-range indices drop)
and ``nonzero`` (padded to capacity).
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.backends.ops_backends import BF16, assert_same_bits, is_float, maybe_x64
from tests.backends.semantics import F16, F32, FLOATS, covers, dt_id, normal_values, put


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


@covers("gather")
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.uint8)], ids=dt_id)
def test_gather_on_all_cores_reads_what_one_core_does(ops, dtype):
    """From PARALLEL_MIN indices the NumPy kernel splits them over threads and
    prefetches ahead: random and sorted indices, out of range at the ends of
    every thread's span and within the look-ahead, give NumPy's x[idx] (0 out of range)."""
    from backends.numpy.indexing import AHEAD, PARALLEL_MIN
    rng = np.random.default_rng(11)
    n = 3 * PARALLEL_MIN + 5
    x = rng.integers(1, 200, n).astype(dtype)
    for idx in (rng.integers(-3, n + 3, n + 7), np.sort(rng.integers(0, n, PARALLEL_MIN))):
        idx = idx.astype(np.int32)
        idx[:AHEAD + 2] = np.resize(np.array([-1, n, 2 ** 31 - 1, -(2 ** 31)], np.int64), AHEAD + 2)
        idx[-3:] = [n, -7, n - 1]
        want = np.where((idx >= 0) & (idx < n), x[np.clip(idx, 0, n - 1)], 0).astype(dtype)
        with maybe_x64(dtype):
            assert_same_bits(ops.gather(put(ops, x), put(ops, idx)), want, "gather")


def test_numpy_gather_takes_every_integer_index_type():
    from backends.numpy.indexing import PARALLEL_MIN, gather_bits
    x = np.arange(1, PARALLEL_MIN + 11, dtype=np.uint32)
    base = np.arange(-2, PARALLEL_MIN + 12)
    want = np.where((base >= 0) & (base < x.size), x[np.clip(base, 0, x.size - 1)], 0).astype(np.uint32)
    for t in (np.int32, np.int64, np.int16):
        idx = base.astype(t) if t != np.int16 else (base % 30000).astype(t)
        w = want if t != np.int16 else x[idx]
        assert np.array_equal(gather_bits(x, idx), w), t
    big = np.array([0, 2 ** 63 + 5, x.size], np.uint64).repeat(PARALLEL_MIN // 3 + 1)
    assert np.array_equal(gather_bits(x, big), np.where(big == 0, x[0], 0).astype(np.uint32))
    assert np.array_equal(gather_bits(np.zeros(0, np.uint32), big), np.zeros(big.size, np.uint32))


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
