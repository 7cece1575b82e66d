"""Indexed reads and writes of the NumPy binding: ``gather`` on raw bits
(out-of-range indices read zero) and ``scatter_add`` in index order
(out-of-range indices drop).

Data-dependent reads are latency-bound: a read of x[idx[i]] that misses the
caches waits for memory. ``gather`` therefore prefetches the element
``AHEAD`` indices on while it reads this one, and from ``PARALLEL_MIN``
indices splits them over all cores (``benchmarks/bench_gather.py``: 5M
random indices into 25M float32, 1.7x to 2.2x faster than ``numpy.take``).
``scatter_add`` stays one ordered pass: splitting the output between
threads (each scanning every index) keeps the order of the additions but
gained nothing at 25M indices in an ad hoc comparison. ``clear_at`` (top-k's
EF residual) copies x and clears the sent entries in the same cached block
when the indices ascend, as top-k's do.
"""
from __future__ import annotations

import numba
import numpy as np

from backends.numpy.intrinsics import prefetch

PARALLEL_MIN = 1 << 16  # indices from which gather runs on all cores
AHEAD = 16  # how many indices ahead the element to come is prefetched
CLEAR_PARALLEL_MIN = 1 << 18  # entries of x from which clear_at runs on all cores (2**20 until
# 2026-12-06: threaded 0.048 against 0.061 ms at 2**18, 0.17 against 0.23 at 1e6, a tenth cleared)
CLEAR_BLOCK = 1 << 14  # entries copied (and their points cleared) at a time, for ascending indices


@numba.njit(cache=True, nogil=True)
def _gather_span(x, idx, out, s, e):
    """out[i] = x[idx[i]] for s <= i < e; an index outside [0, x.size) reads 0."""
    n = x.size
    for i in range(s, e):
        if i + AHEAD < e:
            prefetch(x, min(max(np.int64(idx[i + AHEAD]), 0), n - 1))
        j = idx[i]
        if 0 <= j < n:
            out[i] = x[j]
        else:
            out[i] = 0  # (not a conditional expression: uint64 vs int would unify to float64)


@numba.njit(cache=True, parallel=True)
def _gather_parallel(x, idx, out, parts):
    m = idx.size
    for p in numba.prange(parts):
        _gather_span(x, idx, out, (m * p) // parts, (m * (p + 1)) // parts)


@numba.njit(cache=True, nogil=True)
def _gather_serial(x, idx, out):
    _gather_span(x, idx, out, 0, idx.size)


def gather_bits(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """x[idx] on raw bits (1-D x, 1-D contiguous integer idx); an index
    outside [0, x.size) reads 0 (all-zero bits)."""
    out = np.empty(idx.size, x.dtype)
    if x.size == 0:
        out[:] = 0
    elif idx.size >= PARALLEL_MIN:
        _gather_parallel(x, idx, out, 4 * numba.get_num_threads())
    elif idx.size:
        _gather_serial(x, idx, out)
    return out


@numba.njit(cache=True, nogil=True)
def scatter_add_into(out, idx, vals):
    """out[idx[i]] += vals[i] in order of i; indices outside [0, out.size) drop."""
    n = out.size
    for i in range(idx.size):
        j = idx[i]
        if 0 <= j < n:
            out[j] += vals[i]
    return out


@numba.njit(cache=True, nogil=True)
def _copy_span(x, out, s, e):
    """out[s:e] = x[s:e] (a loop over slices from 0: one from s keeps Numba's
    negative-index check and does not vectorize, 5x slower)."""
    xs = x[s:e]
    os_ = out[s:e]
    for c in range(e - s):
        os_[c] = xs[c]


@numba.njit(cache=True, nogil=True)
def _clear_points(x, idx, out, s, e):
    """out[j] = x[j] - (0 + x[j]) for j = idx[i], s <= i < e, inside [0, x.size) (read
    from x, so repeated indices write one value and spans may run at once)."""
    n = x.size
    zero = x.dtype.type(0)
    for i in range(s, e):
        j = idx[i]
        if 0 <= j < n:
            v = x[j]
            out[j] = v - (zero + v)


@numba.njit(cache=True, nogil=True)
def _clear_sorted_span(x, idx, out, cs, ce):
    """out[cs:ce] from x with the points of an ascending idx that fall in it, in
    blocks of CLEAR_BLOCK entries: each block is copied and its points written
    while it is in the cache (the two-pass way misses on every point of a large x)."""
    i = np.searchsorted(idx, cs)
    m = idx.size
    zero = x.dtype.type(0)
    c = cs
    while c < ce:
        e = min(ce, c + CLEAR_BLOCK)
        _copy_span(x, out, c, e)
        while i < m and idx[i] < e:
            j = idx[i]
            v = x[j]
            out[j] = v - (zero + v)
            i += 1
        c = e


@numba.njit(cache=True, nogil=True)
def _ascending(idx):
    """Whether idx never decreases (counted without an early exit, which vectorizes)."""
    if idx.size < 2:
        return True
    a = idx[1:]
    b = idx[:-1]
    down = 0
    for i in range(a.size):
        down += a[i] < b[i]
    return down == 0


@numba.njit(cache=True, parallel=True)
def _clear_parallel(x, idx, out, parts):
    n = x.size
    m = idx.size
    if _ascending(idx):  # top-k's and nonzero's positions: one pass
        for p in numba.prange(parts):
            _clear_sorted_span(x, idx, out, (n * p) // parts, (n * (p + 1)) // parts)
        return
    for p in numba.prange(parts):  # the copy, then (after the loop's barrier) the k writes
        _copy_span(x, out, (n * p) // parts, (n * (p + 1)) // parts)
    for p in numba.prange(parts):
        _clear_points(x, idx, out, (m * p) // parts, (m * (p + 1)) // parts)


@numba.njit(cache=True, nogil=True)
def _clear_serial(x, idx, out):
    if _ascending(idx):
        _clear_sorted_span(x, idx, out, 0, x.size)
    else:
        _copy_span(x, out, 0, x.size)
        _clear_points(x, idx, out, 0, idx.size)


def clear_at(x: np.ndarray, idx: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``Fused.clear_at`` of a 1-D contiguous float x into ``out`` (1-D, x's
    size and dtype, not x): a copy of x, then entry j = idx[i] becomes
    ``x_j - (0 + x_j)`` (the composition's bits); indices outside [0, x.size)
    drop. Threaded from ``CLEAR_PARALLEL_MIN`` entries (one pass for the copy,
    then the k writes split over the cores; for ascending indices, one
    blocked pass)."""
    if x.size >= CLEAR_PARALLEL_MIN:
        _clear_parallel(x, idx, out, 4 * numba.get_num_threads())
    elif x.size:
        _clear_serial(x, idx, out)
    return out

