"""The NumPy binding's low-rank row kernel (``a @ b.T``, ``c - a @ b.T``) against
the composition it promises: one factor at a time, in order j = 0, 1, ..., r - 1,
bit for bit, at every rank mod 4 (four factors a pass), serial and parallel."""
from __future__ import annotations

import numpy as np
import pytest

from backends.numpy.blocks import ROWS_PARALLEL_MIN
from backends.numpy.fused_lowrank import low_rank


def in_order(a, b):
    out = a[:, :1] * b[:, 0][None, :]
    for j in range(1, a.shape[1]):
        out = out + a[:, j:j + 1] * b[:, j][None, :]
    return out


@pytest.mark.parametrize("r", [1, 2, 3, 4, 5, 7, 8, 9, 12])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("big", [False, True])
def test_low_rank_sums_factors_in_order(r, dtype, big):
    rng = np.random.default_rng(r)
    n, m = (ROWS_PARALLEL_MIN // 300 + 7, 301) if big else (9, 13)
    a, b, c = (rng.standard_normal(s).astype(dtype) for s in ((n, r), (m, r), (n, m)))
    a[0] *= 1e30  # large and tiny rows: rounding differs if the order does
    a[1] *= 1e-30
    want = in_order(a, b)
    assert np.array_equal(low_rank(None, a, b), want)
    assert np.array_equal(low_rank(c, a, b), c - want)


def test_low_rank_keeps_nan_and_inf():
    a = np.array([[np.inf, 1.0, 0.0, 2.0], [np.nan, 0.0, 0.0, 0.0]], np.float32)
    b = np.ones((3, 4), np.float32)
    c = np.zeros((2, 3), np.float32)
    got = low_rank(c, a, b)
    assert np.all(got[0] == -np.inf) and np.all(np.isnan(got[1]))
