"""Low-rank products on all cores: ``matmul_nt`` / ``sub_matmul_nt`` of
two thin factors (``a @ b.T``, ``c - a @ b.T``: a low-rank payload decoded,
and what is left of c after it is sent) and thin ``matmul`` projections
(``a @ q``, ``a.T @ p`` with q, p at most ``THIN_MAX`` wide), each reading
the full-size matrix once.
"""
from __future__ import annotations

import numba
import numpy as np

from backends.numpy import buffers
from backends.numpy.arrays import KERNEL_FLOATS
from backends.numpy.blocks import ROWS_PARALLEL_MIN

LOW_RANK_MAX = 32  # widest factors the row kernel takes (BLAS is faster beyond)


def low_rank_applies(a, b, c) -> bool:
    """Whether :func:`low_rank` takes ``c - a @ b.T`` (c None: ``a @ b.T``);
    else the composition runs, and reports any shape error itself."""
    ok = a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[1] and 1 <= a.shape[1] <= LOW_RANK_MAX \
        and a.dtype in KERNEL_FLOATS and a.dtype == b.dtype
    if c is not None:
        ok = ok and c.shape == (a.shape[0], b.shape[0]) and c.dtype == a.dtype
    return ok


@numba.njit(cache=True, nogil=True)
def _low_rank_row(c, a, bt, i, row, subtract):
    """row = c[i] - a[i] @ bt (or a[i] @ bt), summed in order j = 0, 1, ...,
    r - 1 (((w0 t0 + w1 t1) + w2 t2) + w3 t3 + ...). Four factors per pass
    over the row (held in L1), the subtraction folded into the last pass: a
    rank-4 row is one pass, with the bits of one factor per pass."""
    m = row.size
    r = a.shape[1]
    ci = c[i]
    j = 0
    while j + 4 <= r:
        w0, w1, w2, w3 = a[i, j], a[i, j + 1], a[i, j + 2], a[i, j + 3]
        t0, t1, t2, t3 = bt[j], bt[j + 1], bt[j + 2], bt[j + 3]
        last = subtract and j + 4 == r
        if j == 0 and last:
            for col in range(m):
                row[col] = ci[col] - (((w0 * t0[col] + w1 * t1[col]) + w2 * t2[col]) + w3 * t3[col])
        elif j == 0:
            for col in range(m):
                row[col] = ((w0 * t0[col] + w1 * t1[col]) + w2 * t2[col]) + w3 * t3[col]
        elif last:
            for col in range(m):
                row[col] = ci[col] - ((((row[col] + w0 * t0[col]) + w1 * t1[col]) + w2 * t2[col]) + w3 * t3[col])
        else:
            for col in range(m):
                row[col] = (((row[col] + w0 * t0[col]) + w1 * t1[col]) + w2 * t2[col]) + w3 * t3[col]
        j += 4
    _low_rank_tail(c, a, bt, i, row, j, subtract)


@numba.njit(cache=True, nogil=True, inline="always")
def _low_rank_tail(c, a, bt, i, row, j, subtract):
    """The factors j.. of row i (fewer than four), one per pass, then the
    subtraction unless a four-factor pass folded it in (j == r)."""
    m = row.size
    r = a.shape[1]
    if j < r:
        for k in range(j, r):
            w = a[i, k]
            tk = bt[k]
            if k == 0:
                for col in range(m):
                    row[col] = w * tk[col]
            else:
                for col in range(m):
                    row[col] += w * tk[col]
        if subtract:
            ci = c[i]
            for col in range(m):
                row[col] = ci[col] - row[col]


@numba.njit(cache=True, nogil=True, inline="always")
def _sum4(s, w0, w1, w2, w3, x0, x1, x2, x3):
    return (((s + w0 * x0) + w1 * x1) + w2 * x2) + w3 * x3


@numba.njit(cache=True, nogil=True, inline="always")
def _dot4(w0, w1, w2, w3, x0, x1, x2, x3):
    return ((w0 * x0 + w1 * x1) + w2 * x2) + w3 * x3


@numba.njit(cache=True, nogil=True)
def _low_rank_rows4(c, a, bt, i, out, subtract):
    """Rows i..i+3 of :func:`_low_rank_row` at once, with its bits: each
    factor element is loaded once for four rows (one row at a time is bound
    by those loads)."""
    m = out.shape[1]
    r = a.shape[1]
    o0, o1, o2, o3 = out[i], out[i + 1], out[i + 2], out[i + 3]
    c0, c1, c2, c3 = c[i], c[i + 1], c[i + 2], c[i + 3]
    j = 0
    while j + 4 <= r:
        t0, t1, t2, t3 = bt[j], bt[j + 1], bt[j + 2], bt[j + 3]
        u00, u01, u02, u03 = a[i, j], a[i, j + 1], a[i, j + 2], a[i, j + 3]
        u10, u11, u12, u13 = a[i + 1, j], a[i + 1, j + 1], a[i + 1, j + 2], a[i + 1, j + 3]
        u20, u21, u22, u23 = a[i + 2, j], a[i + 2, j + 1], a[i + 2, j + 2], a[i + 2, j + 3]
        u30, u31, u32, u33 = a[i + 3, j], a[i + 3, j + 1], a[i + 3, j + 2], a[i + 3, j + 3]
        last = subtract and j + 4 == r
        if j == 0 and last:
            for col in range(m):
                x0, x1, x2, x3 = t0[col], t1[col], t2[col], t3[col]
                o0[col] = c0[col] - _dot4(u00, u01, u02, u03, x0, x1, x2, x3)
                o1[col] = c1[col] - _dot4(u10, u11, u12, u13, x0, x1, x2, x3)
                o2[col] = c2[col] - _dot4(u20, u21, u22, u23, x0, x1, x2, x3)
                o3[col] = c3[col] - _dot4(u30, u31, u32, u33, x0, x1, x2, x3)
        elif j == 0:
            for col in range(m):
                x0, x1, x2, x3 = t0[col], t1[col], t2[col], t3[col]
                o0[col] = _dot4(u00, u01, u02, u03, x0, x1, x2, x3)
                o1[col] = _dot4(u10, u11, u12, u13, x0, x1, x2, x3)
                o2[col] = _dot4(u20, u21, u22, u23, x0, x1, x2, x3)
                o3[col] = _dot4(u30, u31, u32, u33, x0, x1, x2, x3)
        elif last:
            for col in range(m):
                x0, x1, x2, x3 = t0[col], t1[col], t2[col], t3[col]
                o0[col] = c0[col] - _sum4(o0[col], u00, u01, u02, u03, x0, x1, x2, x3)
                o1[col] = c1[col] - _sum4(o1[col], u10, u11, u12, u13, x0, x1, x2, x3)
                o2[col] = c2[col] - _sum4(o2[col], u20, u21, u22, u23, x0, x1, x2, x3)
                o3[col] = c3[col] - _sum4(o3[col], u30, u31, u32, u33, x0, x1, x2, x3)
        else:
            for col in range(m):
                x0, x1, x2, x3 = t0[col], t1[col], t2[col], t3[col]
                o0[col] = _sum4(o0[col], u00, u01, u02, u03, x0, x1, x2, x3)
                o1[col] = _sum4(o1[col], u10, u11, u12, u13, x0, x1, x2, x3)
                o2[col] = _sum4(o2[col], u20, u21, u22, u23, x0, x1, x2, x3)
                o3[col] = _sum4(o3[col], u30, u31, u32, u33, x0, x1, x2, x3)
        j += 4
    for k in range(4):
        _low_rank_tail(c, a, bt, i + k, out[i + k], j, subtract)


@numba.njit(cache=True, nogil=True, inline="always")
def _low_rank_block(c, a, bt, out, h, subtract):
    """Rows 4h..4h+3 (those that exist) of the product."""
    i = 4 * h
    if i + 4 <= out.shape[0]:
        _low_rank_rows4(c, a, bt, i, out, subtract)
    else:
        for k in range(i, out.shape[0]):
            _low_rank_row(c, a, bt, k, out[k], subtract)


@numba.njit(cache=True, parallel=True)
def _low_rank(c, a, bt, out, subtract):
    for h in numba.prange((out.shape[0] + 3) // 4):
        _low_rank_block(c, a, bt, out, h, subtract)


@numba.njit(cache=True, nogil=True)
def _low_rank_serial(c, a, bt, out, subtract):
    for h in range((out.shape[0] + 3) // 4):
        _low_rank_block(c, a, bt, out, h, subtract)


@numba.njit(cache=True, nogil=True)
def low_rank_into(c, a, bt, out, subtract):
    """out = c - a @ bt (subtract) or a @ bt, row-parallel from ROWS_PARALLEL_MIN entries."""
    if out.size >= ROWS_PARALLEL_MIN:
        _low_rank(c, a, bt, out, subtract)
    else:
        _low_rank_serial(c, a, bt, out, subtract)


def low_rank(c: np.ndarray | None, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b.T`` (c None) or ``c - a @ b.T`` for a (n, r), b (m, r) and
    c (n, m), all contiguous and of one float dtype, r >= 1."""
    n, m = a.shape[0], b.shape[0]
    out = buffers.empty((n, m), a.dtype)
    bt = np.ascontiguousarray(b.T)
    low_rank_into(out if c is None else c, a, bt, out, c is not None)
    return out


# thin products for ``matmul`` (one factor at most THIN_MAX wide): rank-r
# projections of a full-size matrix, read once on all cores. Accumulation
# order is this kernel's (matmul promises agreement to rounding only) but
# fixed: it depends on neither the data nor the thread count.

THIN_MAX = 32
THIN_PARTS = 8  # row blocks of the transposed product, summed in this order
# The kernels take every thin product from ROWS_PARALLEL_MIN entries, where the binding's other
# row kernels run threaded: OpenBLAS's threads and Numba's (OpenMP) spin while the other's run,
# and alternating them on two cores made a 1000 x 1000 gemv take 4.4 ms instead of 0.03
# (powersgd(rank=1) at 1e6: 0.6 -> 4-7 ms when c - a @ b.T went threaded there). Alone, in
# their own processes, at 1000 x 1000: OpenBLAS 114-120 / 98-104 GB/s (a @ b / a.T @ b) at
# one column and 28-30 / 23 at two, the kernels 111-131 / 49-62 and 67 / 32-38.


@numba.njit(cache=True, nogil=True, inline="always", fastmath={"reassoc", "contract"})
def _dot4x4(a, bt, out, i, j):
    """out[i:i+4, j:j+4] = a[i:i+4] @ bt[j:j+4].T: four rows against four
    factors in one pass, 16 sums, each loaded element used four times (one
    row against one factor at a time is bound by its loads, two per
    multiply-add)."""
    a0, a1, a2, a3 = a[i], a[i + 1], a[i + 2], a[i + 3]
    b0, b1, b2, b3 = bt[j], bt[j + 1], bt[j + 2], bt[j + 3]
    z = a.dtype.type(0)
    s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = z
    s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = z
    for c in range(a.shape[1]):
        x0, x1, x2, x3 = b0[c], b1[c], b2[c], b3[c]
        u = a0[c]
        s00 += u * x0; s01 += u * x1; s02 += u * x2; s03 += u * x3
        u = a1[c]
        s10 += u * x0; s11 += u * x1; s12 += u * x2; s13 += u * x3
        u = a2[c]
        s20 += u * x0; s21 += u * x1; s22 += u * x2; s23 += u * x3
        u = a3[c]
        s30 += u * x0; s31 += u * x1; s32 += u * x2; s33 += u * x3
    out[i, j], out[i, j + 1], out[i, j + 2], out[i, j + 3] = s00, s01, s02, s03
    out[i + 1, j], out[i + 1, j + 1], out[i + 1, j + 2], out[i + 1, j + 3] = s10, s11, s12, s13
    out[i + 2, j], out[i + 2, j + 1], out[i + 2, j + 2], out[i + 2, j + 3] = s20, s21, s22, s23
    out[i + 3, j], out[i + 3, j + 1], out[i + 3, j + 2], out[i + 3, j + 3] = s30, s31, s32, s33


@numba.njit(cache=True, nogil=True, inline="always", fastmath={"reassoc", "contract"})
def _dot4x1(a, bj, out, i, j):
    """out[i:i+4, j] = a[i:i+4] @ bj: four rows against one factor."""
    a0, a1, a2, a3 = a[i], a[i + 1], a[i + 2], a[i + 3]
    z = a.dtype.type(0)
    s0 = s1 = s2 = s3 = z
    for c in range(a.shape[1]):
        x = bj[c]
        s0 += a0[c] * x; s1 += a1[c] * x; s2 += a2[c] * x; s3 += a3[c] * x
    out[i, j], out[i + 1, j], out[i + 2, j], out[i + 3, j] = s0, s1, s2, s3


@numba.njit(cache=True, parallel=True, fastmath={"reassoc", "contract"})
def _rows_dot(a, bt, out):
    """out[i, j] = a[i] . bt[j] for a (n, m), bt (r, m): blocks of four
    rows against four factors (then one factor at a time), and the last
    n mod 4 rows one dot at a time."""
    n, m = a.shape
    r = bt.shape[0]
    for h in numba.prange((n + 3) // 4):
        i = 4 * h
        if i + 4 <= n:
            j = 0
            while j + 4 <= r:
                _dot4x4(a, bt, out, i, j)
                j += 4
            while j < r:
                _dot4x1(a, bt[j], out, i, j)
                j += 1
        else:
            for k in range(i, n):
                ak = a[k]
                for j in range(r):
                    bj = bt[j]
                    s = a.dtype.type(0)
                    for c in range(m):
                        s += ak[c] * bj[c]
                    out[k, j] = s


@numba.njit(cache=True, nogil=True, inline="always")
def _axpy4x4(acc, j, b, i, a0, a1, a2, a3):
    """acc[j + k] += (b[i, j+k] a0 + b[i+1, j+k] a1) + (b[i+2, j+k] a2 + b[i+3, j+k] a3)
    for k = 0..3 in one pass: each row element loaded once for four factors."""
    g0, g1, g2, g3 = acc[j], acc[j + 1], acc[j + 2], acc[j + 3]
    w00, w01, w02, w03 = b[i, j], b[i + 1, j], b[i + 2, j], b[i + 3, j]
    w10, w11, w12, w13 = b[i, j + 1], b[i + 1, j + 1], b[i + 2, j + 1], b[i + 3, j + 1]
    w20, w21, w22, w23 = b[i, j + 2], b[i + 1, j + 2], b[i + 2, j + 2], b[i + 3, j + 2]
    w30, w31, w32, w33 = b[i, j + 3], b[i + 1, j + 3], b[i + 2, j + 3], b[i + 3, j + 3]
    for c in range(a0.size):
        u0, u1, u2, u3 = a0[c], a1[c], a2[c], a3[c]
        g0[c] += (w00 * u0 + w01 * u1) + (w02 * u2 + w03 * u3)
        g1[c] += (w10 * u0 + w11 * u1) + (w12 * u2 + w13 * u3)
        g2[c] += (w20 * u0 + w21 * u1) + (w22 * u2 + w23 * u3)
        g3[c] += (w30 * u0 + w31 * u1) + (w32 * u2 + w33 * u3)


@numba.njit(cache=True, parallel=True)
def cols_dot(a, b, parts):
    """a.T @ b for a (n, m), b (n, r), transposed: (r, m). Each of ``parts``
    row blocks adds b[i, j] * a[i] into its own (r, m) partial, four rows
    (and four factors) per pass over it; the partials are then summed in
    block order."""
    n, m = a.shape
    r = b.shape[1]
    part = np.zeros((parts, r, m), a.dtype)
    for p in numba.prange(parts):
        acc = part[p]
        i = (n * p) // parts
        e = (n * (p + 1)) // parts
        while i + 4 <= e:
            a0 = a[i]
            a1 = a[i + 1]
            a2 = a[i + 2]
            a3 = a[i + 3]
            j = 0
            while j + 4 <= r:  # four factors per pass over the four rows
                _axpy4x4(acc, j, b, i, a0, a1, a2, a3)
                j += 4
            while j < r:
                w0 = b[i, j]
                w1 = b[i + 1, j]
                w2 = b[i + 2, j]
                w3 = b[i + 3, j]
                aj = acc[j]
                for c in range(m):
                    aj[c] += (w0 * a0[c] + w1 * a1[c]) + (w2 * a2[c] + w3 * a3[c])
                j += 1
            i += 4
        while i < e:
            ai = a[i]
            for j in range(r):
                w = b[i, j]
                aj = acc[j]
                for c in range(m):
                    aj[c] += w * ai[c]
            i += 1
    total = part[0].copy()
    for p in range(1, parts):
        total += part[p]
    return total


def thin_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``a @ b`` when b is thin (r <= THIN_MAX columns) and a is C-ordered
    or the transpose of a C-ordered matrix, both of one float dtype, large
    enough to pay; None otherwise (the caller uses BLAS)."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or not 1 <= b.shape[1] <= THIN_MAX \
            or a.dtype != b.dtype or a.size < ROWS_PARALLEL_MIN:
        return None
    if a.flags.c_contiguous:
        out = np.empty((a.shape[0], b.shape[1]), a.dtype)
        _rows_dot(a, np.ascontiguousarray(b.T), out)
        return out
    if a.T.flags.c_contiguous:
        return np.ascontiguousarray(cols_dot(a.T, np.ascontiguousarray(b), THIN_PARTS).T)
    return None
