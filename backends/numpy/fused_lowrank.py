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
    if j == r:
        return
    while j < r:  # the last r mod 4 factors, one per pass
        w = a[i, j]
        tj = bt[j]
        if j == 0:
            for col in range(m):
                row[col] = w * tj[col]
        else:
            for col in range(m):
                row[col] += w * tj[col]
        j += 1
    if subtract:
        for col in range(m):
            row[col] = ci[col] - row[col]


@numba.njit(cache=True, parallel=True)
def _low_rank(c, a, bt, out, subtract):
    for i in numba.prange(out.shape[0]):
        _low_rank_row(c, a, bt, i, out[i], subtract)


@numba.njit(cache=True, nogil=True)
def _low_rank_serial(c, a, bt, out, subtract):
    for i in range(out.shape[0]):
        _low_rank_row(c, a, bt, i, out[i], subtract)


def low_rank(c: np.ndarray | None, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b.T`` (c None) or ``c - a @ b.T`` for a (n, r), b (m, r) and
    c (n, m), all contiguous and of one float dtype, r >= 1."""
    n, m = a.shape[0], b.shape[0]
    out = buffers.empty((n, m), a.dtype)
    bt = np.ascontiguousarray(b.T)
    run = _low_rank if n * m >= ROWS_PARALLEL_MIN else _low_rank_serial
    run(out if c is None else c, a, bt, out, c is not None)
    return out


# thin products for ``matmul`` (one factor at most THIN_MAX wide): rank-r
# projections of a full-size matrix, read once on all cores. Accumulation
# order is this kernel's (matmul promises agreement to rounding only) but
# fixed: it depends on neither the data nor the thread count.

THIN_MAX = 32
THIN_PARTS = 8  # row blocks of the transposed product, summed in this order


@numba.njit(cache=True, parallel=True, fastmath={"reassoc"})
def _rows_dot(a, bt, out):
    """out[i, j] = a[i] . bt[j] for a (n, m), bt (r, m)."""
    r = bt.shape[0]
    m = a.shape[1]
    for i in numba.prange(a.shape[0]):
        ai = a[i]
        for j in range(r):
            bj = bt[j]
            s = ai.dtype.type(0)
            for c in range(m):
                s += ai[c] * bj[c]
            out[i, j] = s


@numba.njit(cache=True, parallel=True)
def _cols_dot(a, b, parts):
    """a.T @ b for a (n, m), b (n, r), transposed: (r, m). Each of ``parts``
    row blocks adds b[i, j] * a[i] into its own (r, m) partial, four rows
    per pass over it; the partials are then summed in block order."""
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
            for j in range(r):
                w0 = b[i, j]
                w1 = b[i + 1, j]
                w2 = b[i + 2, j]
                w3 = b[i + 3, j]
                aj = acc[j]
                for c in range(m):
                    aj[c] += (w0 * a0[c] + w1 * a1[c]) + (w2 * a2[c] + w3 * a3[c])
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
        return np.ascontiguousarray(_cols_dot(a.T, np.ascontiguousarray(b), THIN_PARTS).T)
    return None
