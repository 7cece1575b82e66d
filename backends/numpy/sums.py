"""The halving-order sum of ``Ops.sum`` on NumPy: a one-pass Numba kernel for
long float32/float64 vectors (threaded, with bits that do not depend on the
thread count) and a NumPy pass per level for everything else. The kernel
also sums terms of x (|x|, and the five of ``Fused.sign_split_sums``, all
from one pass over memory) without writing them out, and can pack x's sign bits
from the same pass (the sign encoders of ``backends.numpy.sign_sums``)."""
from __future__ import annotations

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from backends.common import next_pow2
from backends.numpy.arrays import KERNEL_FLOATS
from backends.numpy.fused_sign import pack_signs_into, signs_block

SUM_ROW = 1024  # the one-pass kernel takes vectors of at least 2 * SUM_ROW entries
SUM_PARALLEL_MIN = 1 << 18  # from this many entries the kernel runs on all cores (2**20 until
# 2026-12-06: at 2**18-2**19 the threaded sign split sums ran 2x, at 1e6 1.5x the serial rate)
FOLD = 16  # rows folded per pass (four halving levels; a power of two)
FOLD_COLS = 4096  # columns per task of a pass (partial sums of 8 x 4096 entries, L2-resident)


# What the sum adds up, entry by entry (``mode``; ``s`` a power of two): x, |x|, and the
# terms of :meth:`compressors.fused.Fused.sign_split_sums`: where(x >= 0, x * s, 0),
# where(x >= 0, 1, 0), where(x >= 0, 0, -(x * s)), where(x >= 0, 0, 1), x * 0.
PLAIN, ABS, POS, NPOS, NEG, NNEG, ZERO = range(7)
SPLIT_MODES = (POS, NPOS, NEG, NNEG, ZERO)  # sign_split_sums' five sums, in its order


@numba.njit(cache=True, nogil=True)
def _level_one(a, b, full, w, mode, s, dst):
    """dst = term(a) + term(b) for the first ``full`` columns, term(a) + 0 for the rest
    (loops indexed from 0: a loop from ``full`` keeps Numba's negative-index
    check and runs 16x slower, unvectorized)."""
    z = a.dtype.type(0)
    one = a.dtype.type(1)
    at, dt = a[full:w], dst[full:w]
    if mode == PLAIN:
        for c in range(full):
            dst[c] = a[c] + b[c]
        for c in range(w - full):
            dt[c] = at[c] + z
    elif mode == ABS:  # |v * s|: s a power of two (1 for the plain |x|), so exact
        for c in range(full):
            dst[c] = abs(a[c] * s) + abs(b[c] * s)
        for c in range(w - full):
            dt[c] = abs(at[c] * s) + z
    else:
        for c in range(full):
            dst[c] = _split(a[c], mode, s, one, z) + _split(b[c], mode, s, one, z)
        for c in range(w - full):
            dt[c] = _split(at[c], mode, s, one, z) + z


@numba.njit(cache=True, nogil=True, inline="always")
def _split(v, mode, s, one, zero):
    """The term of a split mode, where's constants as +1.0 and +0.0 (a NaN term's sign
    bit is the compiler's choice: ``sign_sums.split_sums`` returns NaN sums as +NaN)."""
    if mode == ZERO:
        return v * zero
    pos = v >= 0
    if mode == POS:
        return v * s if pos else zero
    if mode == NPOS:
        return one if pos else zero
    if mode == NEG:
        return zero if pos else -(v * s)
    return zero if pos else one


@numba.njit(cache=True, nogil=True)
def _fold_cols(x, m, B, c0, c1, mode, s, out, part):
    """out[c] for c in [c0, c1): the first four halving levels of the
    zero-padded terms of x (``mode``) seen as FOLD rows of B (row r + row
    r + 8, then the sums at distance 4, 2, 1); entries at m and past it
    are +0.0 and are really added (-0.0 + 0 is +0.0, as with the padding)."""
    half = FOLD // 2
    w = c1 - c0
    for r in range(half):  # level 1: row r (full: m > p / 2) + row r + half (maybe partial)
        a = x[r * B + c0:r * B + c1]
        lo = (r + half) * B + c0
        full = min(max(m - lo, 0), w)
        _level_one(a, x[lo:lo + full], full, w, mode, s, part[r])
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


@numba.njit(cache=True, nogil=True)
def _split_terms(v, s, one, zero):
    """The terms of ``SPLIT_MODES`` but NNEG of v, as :func:`_split` gives them one by
    one; ``one``: what v counts (+0.0 for a padding row's zeros). Kept apart from
    ``_split``: deriving that one from this slowed the fold (bench_sums.py). NNEG's
    column sums are the kept rows' count less NPOS's (:func:`_fold_rows`)."""
    pos = v >= zero
    return (v * s if pos else zero, one if pos else zero, zero if pos else -(v * s), v * zero)


def _terms(kind, v, s, one, zero):
    """The terms of the sums of ``kind`` (PLAIN, ABS, or POS for the five of
    ``SPLIT_MODES``) of one entry v, chosen when Numba compiles (``kind`` a literal)."""


@overload(_terms, prefer_literal=True)
def _terms_of(kind, v, s, one, zero):
    if not isinstance(kind, types.IntegerLiteral):
        return None
    if kind.literal_value == PLAIN:
        return lambda kind, v, s, one, zero: v
    if kind.literal_value == ABS:
        return lambda kind, v, s, one, zero: abs(v * s)
    return lambda kind, v, s, one, zero: _split_terms(v, s, one, zero)


def _add(a, b):
    """a + b, term by term for tuples."""


@overload(_add, inline="always")
def _add_of(a, b):
    if isinstance(a, types.BaseTuple):
        return lambda a, b: (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3])
    return lambda a, b: a + b


def _store(r, c, o0, o1, o2, o3, o4):
    """o_j[c] = r[j], j = 0, 1, 2, 4 (the split terms but NNEG); o0[c] = r for a single sum."""


@overload(_store, inline="always")
def _store_of(r, c, o0, o1, o2, o3, o4):
    if isinstance(r, types.BaseTuple):
        def split(r, c, o0, o1, o2, o3, o4):
            o0[c], o1[c], o2[c], o4[c] = r[0], r[1], r[2], r[3]
        return split

    def single(r, c, o0, o1, o2, o3, o4):
        o0[c] = r
    return single


@numba.njit(cache=True, nogil=True, inline="always")
def _row(x, r, B, c0, c1, m, zeros):
    """Row r of x at columns [c0, c1), or zeros where the row is all padding."""
    return x[r * B + c0:r * B + c1] if r * B + c0 < m else zeros[:c1 - c0]


@numba.njit(cache=True, nogil=True, inline="always")
def _kept(r, B, c0, m, one):
    """What an entry of row r counts at columns from c0: 1, or +0.0 in a padding row."""
    return one if r * B + c0 < m else one - one  # one * 0 would be float64 (int 0)


@numba.njit(cache=True, nogil=True)
def _fold_rows(kind, x, m, B, c0, c1, s, outs, zeros):
    """outs[:, c] for c in [c0, c1) as :func:`_fold_cols` gives them, every
    sum of ``kind`` (:func:`_terms`) at once, with the sixteen rows' partial sums held in
    registers: one read of the block and no partial rows in memory. Each row
    is wholly entries or wholly padding at these columns (:func:`_whole_rows`);
    a padding row reads ``zeros`` and counts +0.0, so its terms are the
    padding's +0.0. The split kind's NNEG column is the count of kept rows less NPOS's
    column: each is a sum of 1.0s and +0.0s, exact (at most 16) whatever the order, and an
    entry counts in exactly one of them; a difference of 0 is +0.0, as a sum of +0.0s
    (25M float32, ad hoc, alternated in one process: sign_split_pack 6.36 -> 5.95 ms)."""
    numba.literally(kind)
    zero, one = x.dtype.type(0), x.dtype.type(1)
    w = c1 - c0
    r0, r1, r2, r3 = x[c0:c1], x[B + c0:B + c1], x[2 * B + c0:2 * B + c1], x[3 * B + c0:3 * B + c1]
    r4, r5, r6, r7 = x[4 * B + c0:4 * B + c1], x[5 * B + c0:5 * B + c1], x[6 * B + c0:6 * B + c1], \
        x[7 * B + c0:7 * B + c1]
    r8, r9, r10, r11 = _row(x, 8, B, c0, c1, m, zeros), _row(x, 9, B, c0, c1, m, zeros), \
        _row(x, 10, B, c0, c1, m, zeros), _row(x, 11, B, c0, c1, m, zeros)
    r12, r13, r14, r15 = _row(x, 12, B, c0, c1, m, zeros), _row(x, 13, B, c0, c1, m, zeros), \
        _row(x, 14, B, c0, c1, m, zeros), _row(x, 15, B, c0, c1, m, zeros)
    k8, k9, k10, k11 = _kept(8, B, c0, m, one), _kept(9, B, c0, m, one), _kept(10, B, c0, m, one), \
        _kept(11, B, c0, m, one)
    k12, k13, k14, k15 = _kept(12, B, c0, m, one), _kept(13, B, c0, m, one), _kept(14, B, c0, m, one), \
        _kept(15, B, c0, m, one)
    k = outs.shape[0]  # 1-D outputs: stores into the 2-D outs do not vectorize
    o0, o1, o2, o3, o4 = outs[0, c0:c1], outs[1 % k, c0:c1], outs[2 % k, c0:c1], outs[3 % k, c0:c1], \
        outs[4 % k, c0:c1]
    for c in range(w):
        a0 = _add(_terms(kind, r0[c], s, one, zero), _terms(kind, r8[c], s, k8, zero))
        a1 = _add(_terms(kind, r1[c], s, one, zero), _terms(kind, r9[c], s, k9, zero))
        a2 = _add(_terms(kind, r2[c], s, one, zero), _terms(kind, r10[c], s, k10, zero))
        a3 = _add(_terms(kind, r3[c], s, one, zero), _terms(kind, r11[c], s, k11, zero))
        a4 = _add(_terms(kind, r4[c], s, one, zero), _terms(kind, r12[c], s, k12, zero))
        a5 = _add(_terms(kind, r5[c], s, one, zero), _terms(kind, r13[c], s, k13, zero))
        a6 = _add(_terms(kind, r6[c], s, one, zero), _terms(kind, r14[c], s, k14, zero))
        a7 = _add(_terms(kind, r7[c], s, one, zero), _terms(kind, r15[c], s, k15, zero))
        _store(_add(_add(_add(a0, a4), _add(a2, a6)), _add(_add(a1, a5), _add(a3, a7))), c, o0, o1, o2, o3, o4)
    if k == len(SPLIT_MODES):
        kept = one * 8 + k8 + k9 + k10 + k11 + k12 + k13 + k14 + k15
        for c in range(w):
            o3[c] = kept - o1[c]


@numba.njit(cache=True, nogil=True)
def _whole_rows(m, B, c0, c1):
    """Whether every row is wholly entries or wholly padding at columns [c0, c1)."""
    for r in range(FOLD // 2, FOLD):
        if r * B + c0 < m < r * B + c1:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _fold_task(x, m, B, c0, c1, modes, s, outs, part, zeros):
    """Columns [c0, c1) of every mode: in registers (:func:`_fold_rows`) for
    the sums the kernels take (x, |x|, the split five), else a mode at a time."""
    k = modes.size
    if _whole_rows(m, B, c0, c1):
        if k == 1 and modes[0] == PLAIN:
            _fold_rows(PLAIN, x, m, B, c0, c1, s, outs, zeros)
            return
        if k == 1 and modes[0] == ABS:
            _fold_rows(ABS, x, m, B, c0, c1, s, outs, zeros)
            return
        if k == 5 and modes[0] == POS and modes[1] == NPOS and modes[2] == NEG and modes[3] == NNEG \
                and modes[4] == ZERO:
            _fold_rows(POS, x, m, B, c0, c1, s, outs, zeros)
            return
    for j in range(k):
        _fold_cols(x, m, B, c0, c1, modes[j], s, outs[j], part)


@numba.njit(cache=True, nogil=True)
def _pack_rows(x, m, B, c0, c1, words):
    """The sign bits (``Fused.pack_signs``) of the entries of every row at columns
    [c0, c1), read again while the task's block is in cache: row r's are
    entries [r B + c0, r B + c1), whole words (B and c0 multiples of 32)."""
    for r in range(FOLD):
        lo = r * B + c0
        if lo >= m:
            return
        signs_block(x, lo // 32, (min(r * B + c1, m) + 31) // 32, words)


@numba.njit(cache=True, parallel=True)
def _fold(x, m, p, modes, s, outs, words):
    """outs[j] (p / FOLD entries) = four halving levels of the terms ``modes[j]``
    of x (m <= p entries, m > p / 2), in column tasks: a task's block of x is
    read from memory once. ``words``, unless empty: x's sign bits too."""
    B = p // FOLD
    tasks = (B + FOLD_COLS - 1) // FOLD_COLS
    for t in numba.prange(tasks):
        part = np.empty((FOLD // 2, FOLD_COLS), x.dtype)
        c0 = t * FOLD_COLS
        c1 = min(B, c0 + FOLD_COLS)
        _fold_task(x, m, B, c0, c1, modes, s, outs, part, np.zeros(FOLD_COLS, x.dtype))
        if words.size:
            _pack_rows(x, m, B, c0, c1, words)


@numba.njit(cache=True, nogil=True)
def _fold_serial(x, m, p, modes, s, outs, words):
    B = p // FOLD
    part = np.empty((FOLD // 2, FOLD_COLS), x.dtype)
    zeros = np.zeros(FOLD_COLS, x.dtype)
    for c0 in range(0, B, FOLD_COLS):
        c1 = min(B, c0 + FOLD_COLS)
        _fold_task(x, m, B, c0, c1, modes, s, outs, part, zeros)
        if words.size:
            _pack_rows(x, m, B, c0, c1, words)


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
def halving_sum(x, parallel, absolute, scale=1.0):
    """``Ops.sum`` of a 1-D float array (of ``|x * scale|`` if ``absolute``), 2 <= x.size."""
    return term_sums(x, parallel, np.array([ABS if absolute else PLAIN]), x.dtype.type(scale),
                     np.empty(0, np.uint32))[0]


@numba.njit(cache=True, nogil=True)
def term_sums(x, parallel, modes, s, words):
    """``Ops.sum`` of the terms of a 1-D float array, one per mode (``modes``
    an int array), 2 <= x.size; and, unless ``words`` is empty, x's sign
    bits into it (``Fused.pack_signs``) from the same read of x.

    The halving order on the zero-padded p = 2**P entries adds entry i to
    entry i + p/2, then those sums at distance p/4, ... Seen as FOLD rows of
    p / FOLD, its first four levels add whole rows elementwise, column by
    column: one pass reads x once as FOLD contiguous streams and writes a
    FOLD-times shorter vector that continues the same order. Passes repeat
    until the vector fits one task, which is halved in place (the padding's
    +0.0 really added). Each column's additions are fixed, so the bits do
    not depend on threads or tasks."""
    k = modes.size
    result = np.empty(k, x.dtype)
    m = x.size
    p = 1
    while p < m:
        p <<= 1
    if p < FOLD * FOLD_COLS:
        for j in range(k):
            result[j] = _tail(x, m, p, modes[j], s)
        if words.size:
            pack_signs_into(x, words)
        return result
    outs = np.empty((k, p // FOLD), x.dtype)
    if parallel:
        _fold(x, m, p, modes, s, outs, words)
    else:
        _fold_serial(x, m, p, modes, s, outs, words)
    plain = np.array([PLAIN])
    nowords = words[:0]
    for j in range(k):
        y, n = outs[j], p // FOLD
        while n >= FOLD * FOLD_COLS:
            out = np.empty((1, n // FOLD), x.dtype)
            if parallel:
                _fold(y, n, n, plain, s, out, nowords)
            else:
                _fold_serial(y, n, n, plain, s, out, nowords)
            y, n = out[0], n // FOLD
        result[j] = _tail(y, n, n, PLAIN, s)
    return result


@numba.njit(cache=True, nogil=True)
def _tail(y, m, p, mode, s):
    """The halving sum of the terms of y's m entries zero-padded to p, in place in a copy."""
    tail = np.zeros(p, y.dtype)
    one, zero = y.dtype.type(1), y.dtype.type(0)
    for i in range(m):
        v = y[i]
        tail[i] = v if mode == PLAIN else abs(v * s) if mode == ABS else _split(v, mode, s, one, zero)
    return _halve_in_place(tail)


def kernel_sum(x: np.ndarray, absolute: bool, scale: float = 1.0) -> np.ndarray:
    """The one-pass halving-sum kernel (of |x * scale| if ``absolute``) of a 1-D
    float32/float64 array of at least 2 * SUM_ROW entries, threaded for long ones."""
    return np.asarray(halving_sum(np.ascontiguousarray(x), x.size >= SUM_PARALLEL_MIN, absolute, scale),
                      dtype=x.dtype)


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
