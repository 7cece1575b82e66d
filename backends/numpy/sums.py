"""The halving-order sum of ``Ops.sum`` on NumPy: a one-pass Numba kernel for
long float32/float64 vectors (threaded, with bits that do not depend on the
thread count) and a NumPy pass per level for everything else.
"""
from __future__ import annotations

import numba
import numpy as np

from backends.common import next_pow2
from backends.numpy.arrays import KERNEL_FLOATS

SUM_ROW = 1024  # row length of the one-pass kernel (a power of two)
SUM_PARTS = 8  # subtrees summed in parallel (a power of two; the bits do not depend on it)
SUM_PARALLEL_MIN = 1 << 20  # from this many entries the kernel runs SUM_PARTS threads


@numba.njit(cache=True, nogil=True, inline="always")
def _bitrev(u, bits):
    r = 0
    for _ in range(bits):
        r = (r << 1) | (u & 1)
        u >>= 1
    return r


@numba.njit(cache=True, nogil=True)
def _pair_rows(x, r0, r1, B, absolute, out):
    """out = row r0 + row r1 of x seen as rows of B (zero-padded past x.size),
    of |x| if ``absolute``."""
    m = x.size
    a = r0 * B
    b = r1 * B
    z = x.dtype.type(0)
    if b + B <= m:
        xa = x[a:a + B]
        xb = x[b:b + B]
        if absolute:
            for c in range(B):
                out[c] = abs(xa[c]) + abs(xb[c])
        else:
            for c in range(B):
                out[c] = xa[c] + xb[c]
    else:
        for c in range(B):
            va = x[a + c] if a + c < m else z
            vb = x[b + c] if b + c < m else z
            out[c] = (abs(va) + abs(vb)) if absolute else (va + vb)


@numba.njit(cache=True, nogil=True)
def _counter_sum(x, B, L, u0, count, absolute, out):
    """out = the halving-order sum of the row pairs u0 .. u0 + count - 1 (count
    a power of two, u0 a multiple of it): a complete subtree of the order.

    Row pair u is rows (r, r + R/2) with r = bitrev(u, L - 1). In bit-reversed
    order the halving order's pairs are neighbours, so a binary-counter stack
    of rows produces the same additions, in the same association."""
    half = 1 << (L - 1)
    stack = np.empty((L + 1, B), x.dtype)
    used = np.zeros(L + 1, np.bool_)
    cur = np.empty(B, x.dtype)
    top = 0
    for u in range(u0, u0 + count):
        r0 = _bitrev(u, L - 1)
        _pair_rows(x, r0, r0 + half, B, absolute, cur)
        level = 1
        while used[level]:
            prev = stack[level]
            for c in range(B):
                cur[c] = prev[c] + cur[c]
            used[level] = False
            level += 1
        stack[level, :] = cur
        used[level] = True
        top = level
    out[:] = stack[top]


@numba.njit(cache=True, parallel=True)
def halving_sum(x, B, parts, absolute):
    """``Ops.sum`` of a 1-D float array (of ``|x|`` if ``absolute``) with
    2B <= x.size, B a power of two, in ``parts`` threads (a power of two).

    Zero-pad to p = 2**P and view as R = p / B rows of B. The halving order
    adds row t to row t + R/2, then those sums at distance R/4, ... until one
    row is left, then halves that row. The row pairs split into ``parts``
    complete subtrees (:func:`_counter_sum`), summed in parallel and then
    combined pairwise in the same order, so the bits do not depend on
    ``parts``. x is read once."""
    m = x.size
    p = 1
    while p < m:
        p <<= 1
    R = p // B
    L = 0
    while (1 << L) < R:
        L += 1
    half = R // 2
    parts = min(parts, half)
    count = half // parts
    rows = np.empty((parts, B), x.dtype)
    for j in numba.prange(parts):
        _counter_sum(x, B, L, j * count, count, absolute, rows[j])
    while parts > 1:
        parts //= 2
        for j in range(parts):
            for c in range(B):
                rows[j, c] = rows[2 * j, c] + rows[2 * j + 1, c]
    row = rows[0]
    h = B
    while h > 1:
        h //= 2
        for c in range(h):
            row[c] = row[c] + row[c + h]
    return row[0]


def kernel_sum(x: np.ndarray, absolute: bool) -> np.ndarray:
    """The one-pass halving-sum kernel (of |x| if ``absolute``) of a 1-D
    float32/float64 array of at least 2 * SUM_ROW entries, threaded for long ones."""
    parts = SUM_PARTS if x.size >= SUM_PARALLEL_MIN else 1
    return np.asarray(halving_sum(np.ascontiguousarray(x), SUM_ROW, parts, absolute), dtype=x.dtype)


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
