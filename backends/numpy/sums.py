"""The halving-order sum of ``Ops.sum`` on NumPy: a one-pass Numba kernel for
long float32/float64 vectors (threaded, with bits that do not depend on the
thread count) and a NumPy pass per level for everything else.
"""
from __future__ import annotations

import numba
import numpy as np

from backends.common import next_pow2
from backends.numpy.arrays import KERNEL_FLOATS

SUM_ROW = 1024  # the one-pass kernel takes vectors of at least 2 * SUM_ROW entries
SUM_PARALLEL_MIN = 1 << 20  # from this many entries the kernel runs on all cores
FOLD = 16  # rows folded per pass (four halving levels; a power of two)
FOLD_COLS = 512  # columns per task of a pass (L1-resident partial sums)


@numba.njit(cache=True, nogil=True)
def _fold_cols(x, m, B, c0, c1, absolute, out, part):
    """out[c] for c in [c0, c1): the first four halving levels of the
    zero-padded x seen as FOLD rows of B (row r + row r + 8, then the sums
    at distance 4, 2, 1), of |x| if ``absolute``; entries at m and past it
    are +0.0 and are really added (-0.0 + 0 is +0.0, as with the padding)."""
    half = FOLD // 2
    w = c1 - c0
    z = x.dtype.type(0)
    for r in range(half):  # level 1: row r (full: m > p / 2) + row r + half (maybe partial)
        a = x[r * B + c0:r * B + c1]
        lo = (r + half) * B + c0
        full = min(max(m - lo, 0), w)
        b = x[lo:lo + full]
        dst = part[r]
        if absolute:
            for c in range(full):
                dst[c] = abs(a[c]) + abs(b[c])
            for c in range(full, w):
                dst[c] = abs(a[c]) + z
        else:
            for c in range(full):
                dst[c] = a[c] + b[c]
            for c in range(full, w):
                dst[c] = a[c] + z
    h = half
    while h > 1:  # levels 2.. 4: rows at distance 4, 2, 1
        h //= 2
        for r in range(h):
            d = part[r]
            e = part[r + h]
            for c in range(w):
                d[c] = d[c] + e[c]
    o = out[c0:c1]
    p0 = part[0]
    for c in range(w):
        o[c] = p0[c]


@numba.njit(cache=True, parallel=True)
def _fold(x, m, p, absolute, out):
    """out (p / FOLD entries) = four halving levels of x (m <= p entries, m > p / 2), in column tasks."""
    B = p // FOLD
    tasks = (B + FOLD_COLS - 1) // FOLD_COLS
    for t in numba.prange(tasks):
        part = np.empty((FOLD // 2, FOLD_COLS), x.dtype)
        c0 = t * FOLD_COLS
        _fold_cols(x, m, B, c0, min(B, c0 + FOLD_COLS), absolute, out, part)


@numba.njit(cache=True, nogil=True)
def _fold_serial(x, m, p, absolute, out):
    B = p // FOLD
    part = np.empty((FOLD // 2, FOLD_COLS), x.dtype)
    for c0 in range(0, B, FOLD_COLS):
        _fold_cols(x, m, B, c0, min(B, c0 + FOLD_COLS), absolute, out, part)


@numba.njit(cache=True, nogil=True)
def _halve_in_place(y):
    """The halving order of y (a power-of-two length, all entries present)."""
    h = y.size
    while h > 1:
        h //= 2
        for c in range(h):
            y[c] = y[c] + y[c + h]
    return y[0]


@numba.njit(cache=True, nogil=True)
def halving_sum(x, parallel, absolute):
    """``Ops.sum`` of a 1-D float array (of ``|x|`` if ``absolute``), 2 <= x.size.

    The halving order on the zero-padded p = 2**P entries adds entry i to
    entry i + p/2, then those sums at distance p/4, ... Seen as FOLD rows of
    p / FOLD, its first four levels add whole rows elementwise, column by
    column: one pass reads x once as FOLD contiguous streams and writes a
    FOLD-times shorter vector that continues the same order. Passes repeat
    until the vector fits one task, which is halved in place (the padding's
    +0.0 really added). Each column's additions are fixed, so the bits do
    not depend on threads or tasks."""
    m = x.size
    p = 1
    while p < m:
        p <<= 1
    y = x
    absolute_now = absolute
    while p >= FOLD * FOLD_COLS:
        out = np.empty(p // FOLD, x.dtype)
        if parallel:
            _fold(y, m, p, absolute_now, out)
        else:
            _fold_serial(y, m, p, absolute_now, out)
        y = out
        m = p // FOLD
        p = m
        absolute_now = False
    tail = np.zeros(p, x.dtype)
    for i in range(m):
        tail[i] = abs(y[i]) if absolute_now else y[i]
    return _halve_in_place(tail)


def kernel_sum(x: np.ndarray, absolute: bool) -> np.ndarray:
    """The one-pass halving-sum kernel (of |x| if ``absolute``) of a 1-D
    float32/float64 array of at least 2 * SUM_ROW entries, threaded for long ones."""
    return np.asarray(halving_sum(np.ascontiguousarray(x), x.size >= SUM_PARALLEL_MIN, absolute), dtype=x.dtype)


def sum_halving(x: np.ndarray, axis) -> np.ndarray:
    """Sum with the halving order of ``Ops.sum``, without materialising the
    zero padding: the first level adds the upper part onto a copy of the
    lower one and adds +0.0 to the lanes that have no partner (so -0.0
    becomes +0.0 exactly as ``x + 0`` does in the padded version)."""
    if axis is None or (x.ndim == 1 and axis in (0, -1)):
        x = x.reshape(-1)
        axis = 0
        if x.size >= 2 * SUM_ROW and x.dtype in KERNEL_FLOATS:
            return kernel_sum(x, False)
    x = np.moveaxis(x, axis, -1)
    m = x.shape[-1]
    if m == 0:
        return np.zeros(x.shape[:-1], x.dtype)
    if m == 1:
        return np.array(x[..., 0])
    p = next_pow2(m)
    h = p // 2
    s = x[..., :h].copy()
    s[..., : m - h] += x[..., h:m]
    if m - h < h:
        s[..., m - h :] += np.zeros((), x.dtype)
    while h > 1:
        h //= 2
        s[..., :h] += s[..., h : 2 * h]
    return np.array(s[..., 0])
