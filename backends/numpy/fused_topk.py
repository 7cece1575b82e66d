"""Top-k by magnitude (``Fused.top_k_abs``): the indices of the k largest
``|x|`` in ascending index order, by the sampled threshold of
``backends.numpy.topk`` on magnitude keys (the float's bits without the
sign bit), one collecting pass on all cores and a radix selection of the
survivors; no sort. ``top_k_abs_rows`` runs it on every row of a matrix in
one parallel region (the JAX binding's host route for a batch of rows).
None or a row with ``ok`` False means the caller runs the reference
composition instead.
"""
from __future__ import annotations

import numba
import numpy as np

from backends.numpy.blocks import PARALLEL_MIN
from backends.numpy.intrinsics import ctz
from backends.numpy.topk import SAMPLE, sample_rank, stratified_positions


@numba.njit(cache=True, nogil=True)
def collect(bits, mask, t, s, e, k, gi, gk, ties):
    """Indices i in [s, e) with key_i > t into gi and their keys into gk (in
    index order), the first k with key_i == t into ties, key = bits & mask
    (signed, >= 0); (#G, #ties), or #G = -1 when gi overflows. Each block of
    64 becomes a bit mask of its keys >= t (vectorized compares, no branch),
    and only the mask's set bits are visited."""
    ng = 0
    ne = 0
    cap = gi.size - 64
    seg = bits[s:e]
    nblk = (e - s) // 64
    for blk in range(nblk):
        b0 = blk * 64
        hit = np.uint64(0)
        for j in range(64):  # (index seg directly: a slice per block stops vectorization)
            hit |= np.uint64((seg[b0 + j] & mask) >= t) << np.uint64(j)
        while hit:
            j = b0 + np.int64(ctz(hit))
            hit &= hit - np.uint64(1)
            v = seg[j] & mask
            if v > t:
                gi[ng] = s + j
                gk[ng] = v
                ng += 1
            elif ne < k:
                ties[ne] = s + j
                ne += 1
        if ng >= cap:
            return -1, ne
    for i in range(nblk * 64, e - s):
        v = seg[i] & mask
        if v > t:
            gi[ng] = s + i
            gk[ng] = v
            ng += 1
        elif v == t and ne < k:
            ties[ne] = s + i
            ne += 1
    return ng, ne


DIGIT = 11  # bits per radix-selection pass (a 16 KiB histogram stays in L1)


@numba.njit(cache=True, nogil=True)
def kth_largest(gk, ng, k, nbits):
    """(K, e): K the k-th largest (1-based) of the keys gk[p, :ng[p]] (all
    >= 0, below 2**nbits), e how many keys == K the top k hold (k minus the
    keys > K), by radix selection: DIGIT-bit digits from the top, each pass
    histogramming only the keys that share the prefix chosen so far."""
    hist = np.zeros(1 << DIGIT, np.int64)
    prefix = 0
    rest = k  # rank still to find among keys with this prefix
    shift = nbits
    while shift > 0:
        width = min(DIGIT, shift)
        shift -= width
        hist[:1 << width] = 0
        dmask = (1 << width) - 1
        for p in range(ng.size):
            for j in range(ng[p]):
                v = np.int64(gk[p, j])
                if (v >> (shift + width)) == prefix:
                    hist[(v >> shift) & dmask] += 1
        d = dmask
        while hist[d] < rest:
            rest -= hist[d]
            d -= 1
        prefix = (prefix << width) | d
    return prefix, rest


@numba.njit(cache=True, nogil=True)
def magnitude_threshold(bits, k, mask, nbits, s):
    """(t, rank): the sampled threshold of ``backends.numpy.topk`` on the
    magnitude keys ``bits & mask`` of s stratified positions, t in bits'
    dtype; rank = -1 when the sample is too small. The (rank + 1)-th largest
    sample is found by :func:`kth_largest` (a radix selection: the same key
    as ``np.partition``, in fewer passes over a few thousand keys)."""
    n = bits.size
    pos = stratified_positions(n, s)
    sample = np.empty((1, s), bits.dtype)
    for j in range(s):
        sample[0, j] = bits[pos[j]] & mask
    rank = sample_rank(k, s, n)
    if rank >= 0:
        sample[0, 0] = kth_largest(sample, np.full(1, s, np.int64), rank + 1, nbits)[0]
    return sample[0, 0], rank


@numba.njit(cache=True, nogil=True)
def keep_top(gi, gk, ng, ties, ne, k, nbits, out):
    """``out`` = the indices of the k largest of the survivors of
    :func:`collect` in index order: part p's keys > t (gi[p, :ng[p]],
    keys gk) and its first keys == t (ties[p, :ne[p]]), parts in index
    order; False when they fall short of k. With at least k keys > t their
    exact k-th largest K comes from a radix selection, and one walk keeps
    keys > K and the first keys == K (lowest index first), so no sort is
    needed; else every key > t and the lowest-indexed ties fill up to k."""
    at = 0
    if ng.sum() >= k:
        big, equal = kth_largest(gk, ng, k, nbits)  # equal: keys == big to keep
        for p in range(ng.size):
            for j in range(ng[p]):
                v = gk[p, j]
                if v > big or (v == big and equal > 0):
                    equal -= v == big
                    out[at] = gi[p, j]
                    at += 1
        return True
    need = k - ng.sum()  # every survivor, and this many keys == t, lowest index first
    if ne.sum() < need:
        return False
    for p in range(ng.size):
        a = 0
        b = 0
        while a < ng[p] or (b < ne[p] and need > 0):
            if b < ne[p] and need > 0 and (a == ng[p] or ties[p, b] < gi[p, a]):
                out[at] = ties[p, b]
                b += 1
                need -= 1
            else:
                out[at] = gi[p, a]
                a += 1
            at += 1
    return True


@numba.njit(cache=True, parallel=True)
def _top_k_abs_sampled(bits, k, mask, nbits, nsample, parts):
    """Indices of the k largest |x|, ascending (see ``backends.numpy.topk``'s
    module doc for the sampled threshold t, here on magnitude keys ``bits &
    mask``); empty when the caller must fall back to the reference
    composition. Each of ``parts`` index ranges is collected on its own core,
    and :func:`keep_top` picks the k."""
    n = bits.size
    s = min(n, nsample)
    t, rank = magnitude_threshold(bits, k, mask, nbits, s)
    if rank < 0:
        return np.empty(0, np.int32)
    chunk = (n + parts - 1) // parts
    cap = int(2.0 * chunk * (rank + 1) / s) + 1024 + 64
    gi = np.empty((parts, cap + 1), np.int32)
    gk = np.empty((parts, cap + 1), bits.dtype)
    ties = np.empty((parts, k), np.int32)
    ng = np.zeros(parts, np.int64)
    ne = np.zeros(parts, np.int64)
    for p in numba.prange(parts):
        lo = p * chunk
        hi = min(n, lo + chunk)
        if hi > lo:
            ng[p], ne[p] = collect(bits, mask, t, lo, hi, k, gi[p], gk[p], ties[p])
    out = np.empty(k, np.int32)
    if ng.min() < 0 or not keep_top(gi, gk, ng, ties, ne, k, nbits, out):
        return np.empty(0, np.int32)
    return out


def sample_size(n: int) -> int:
    return min(SAMPLE, max(1024, n // 64))  # reading the sample stays a small part of the pass


def magnitude_keys(x: np.ndarray):
    """(signed bit view of float32/float64 x, the mask whose AND gives |x|'s
    key, the key's bit count); signed so the max reductions vectorize."""
    width = x.dtype.itemsize
    bits = x.view(np.int32 if width == 4 else np.int64)
    return bits, bits.dtype.type((1 << (8 * width - 1)) - 1), 8 * width - 1


def top_k_abs(x: np.ndarray, k: int) -> np.ndarray | None:
    """``Fused.top_k_abs`` of a contiguous 1-D float32/float64 array, or None
    when the sampled selection does not apply (the caller uses the reference
    composition instead)."""
    if x.size < TOPK_MIN or 4 * k > x.size:
        return None
    parts = numba.get_num_threads() if x.size >= PARALLEL_MIN else 1
    bits, mask, nbits = magnitude_keys(x)
    idx = _top_k_abs_sampled(bits, k, mask, nbits, sample_size(x.size), parts)
    return idx if idx.size == k else None


TOPK_MIN = 1 << 14  # below this the reference composition is as fast

_top_k_abs_row = numba.njit(cache=True, nogil=True)(_top_k_abs_sampled.py_func)  # one thread (prange = range)


@numba.njit(cache=True, parallel=True)
def _top_k_abs_rows(bits, k, mask, nbits, nsample, out, ok):
    for i in numba.prange(bits.shape[0]):
        idx = _top_k_abs_row(bits[i], k, mask, nbits, nsample, 1)
        ok[i] = idx.size == k
        if ok[i]:
            out[i] = idx


def top_k_abs_rows(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`top_k_abs` of every row of a C-ordered 2-D array, the rows
    spread over the cores (one parallel region for all of them): (indices
    (rows, k), ok per row; a row with ok False needs the reference), or
    None when the sampled selection does not apply at all."""
    rows, n = x.shape
    if n < TOPK_MIN or 4 * k > n:
        return None
    bits, mask, nbits = magnitude_keys(x)
    out = np.empty((rows, k), np.int32)
    ok = np.empty(rows, np.bool_)
    _top_k_abs_rows(bits, k, mask, nbits, sample_size(n), out, ok)
    return out, ok
