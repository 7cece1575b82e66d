"""Top-k of the ``top_k`` op: exact, by a sampled threshold where it pays,
else a full stable radix sort.

Floats are ranked by the *total order* of their bits (what XLA's TopK uses,
so results match ``lax.top_k``)::

    key(b) = ~b            if the sign bit of b is set
             b | signbit   otherwise

so -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN as unsigned keys; equal
keys go to the lowest index. The selection:

1. sample s keys, one at a hashed position in each of s equal strata
   (:func:`stratified_positions`); with m = k s / n pick the threshold
   t = the (m + 4 sqrt(m) + 2)-th largest sample key, so that
   ``#{key >= t}`` exceeds k with overwhelming probability;
2. one pass: G = {i : key_i > t} (kept in index order), and the first k
   indices with key_i == t (ties at t: only the lowest indices can win);
3. if |G| + |ties| >= k the answer is exact: every element outside G and
   the first ties has key <= t and a lower rank than at least k kept
   elements. Sort G by key descending (stable LSD radix sort, so equal keys
   stay in index order), append ties, keep k. Otherwise (threshold too
   high, a rare sampling failure, or G overflowed its buffer) fall back to
   a full stable radix sort of all n keys.

Step 1's positions and rank (:func:`stratified_positions`,
:func:`sample_rank`, ``SAMPLE``) also serve the fused ``top_k_abs``
(``backends.numpy.fused_topk``), which selects its threshold by radix.
"""
from __future__ import annotations

import math

import numba
import numpy as np

# ---------------------------------------------------------------------------
# keys
# ---------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True, inline="always")
def _key(b, sign, ones):
    k = np.uint64(b)
    if k & sign:
        return (~k) & ones
    return k | sign


@numba.njit(cache=True, nogil=True)
def _keys(bits, sign, ones):
    out = np.empty(bits.size, np.uint64)
    for i in range(bits.size):
        out[i] = _key(bits[i], sign, ones)
    return out


# ---------------------------------------------------------------------------
# stable LSD radix sort, descending by key (ties keep their order)
# ---------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _radix_desc(keys, idx, nbytes):
    """Sort (keys, idx) by key descending, stable; returns the sorted pair."""
    n = keys.size
    k = keys.copy()
    v = idx.copy()
    k2 = np.empty_like(k)
    v2 = np.empty_like(v)
    count = np.empty(256, np.int64)
    for p in range(nbytes):
        shift = np.uint64(8 * p)
        count[:] = 0
        for i in range(n):
            d = 255 - ((k[i] >> shift) & np.uint64(255))  # descending
            count[d] += 1
        if n == 0 or count.max() == n:
            continue  # every key has the same byte here: nothing moves
        total = 0
        for d in range(256):
            c = count[d]
            count[d] = total
            total += c
        for i in range(n):
            d = 255 - ((k[i] >> shift) & np.uint64(255))
            j = count[d]
            k2[j] = k[i]
            v2[j] = v[i]
            count[d] = j + 1
        k, k2 = k2, k
        v, v2 = v2, v
    return k, v


# ---------------------------------------------------------------------------
# top-k
# ---------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _topk_full(bits, k, sign, ones, nbytes):
    keys = _keys(bits, sign, ones)
    idx = np.arange(bits.size).astype(np.int32)
    _, order = _radix_desc(keys, idx, nbytes)
    return order[:k].copy()


@numba.njit(cache=True, nogil=True)
def stratified_positions(n, s):
    """s sample positions in [0, n): the j-th a hashed one inside the j-th of
    s equal strata [floor(j n / s), floor((j + 1) n / s)). A plain stride can
    alias with a tensor's rows (n / s = 64 reads 4 of a 784x256 layer's 256
    columns); a hash per stratum cannot. No division per sample (stratum
    widths by a running remainder, the hash scaled by a multiply-high):
    64-bit divisions were most of the time of the sampling they replace."""
    pos = np.empty(s, np.int64)
    q = n // s
    r = n % s
    lo = 0
    acc = 0
    for j in range(s):
        width = q
        acc += r
        if acc >= s:
            acc -= s
            width += 1
        h = (np.uint64(j) * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)  # Knuth's multiplicative hash
        pos[j] = lo + np.int64((h * np.uint64(width)) >> np.uint64(32))
        lo += width
    return pos


@numba.njit(cache=True, nogil=True)
def sample_rank(k, s, n):
    """rank = m + 4 sqrt(m) + 2 with m = k s / n (step 1 of the module doc):
    the threshold is the (rank + 1)-th largest of s sampled keys; -1 when
    the sample is too small to pick one."""
    m = k * s / n
    rank = int(m + 4.0 * math.sqrt(m) + 2.0)
    return rank if rank < s else -1


@numba.njit(cache=True, nogil=True)
def sampled_threshold(sample, k, n):
    """(t, rank) for step 1 of the module doc: t is the (rank + 1)-th largest
    of the sampled keys (a selection, not a sort), rank from :func:`sample_rank`."""
    s = sample.size
    rank = sample_rank(k, s, n)
    if rank < 0:
        return sample[0], -1
    return np.partition(sample, s - 1 - rank)[s - 1 - rank], rank


@numba.njit(cache=True, nogil=True)
def _topk_sampled(bits, k, sign, ones, nbytes, nsample):
    """Indices of the top k (see module doc); empty array if it must fall back."""
    n = bits.size
    s = min(n, nsample)
    pos = stratified_positions(n, s)
    sample = np.empty(s, np.uint64)
    for j in range(s):
        sample[j] = _key(bits[pos[j]], sign, ones)
    t, rank = sampled_threshold(sample, k, n)
    if rank < 0:
        return np.empty(0, np.int32)
    cap = int(1.5 * n * (rank + 1) / s) + 1024
    gk = np.empty(cap + 1, np.uint64)
    gi = np.empty(cap + 1, np.int32)
    ties = np.empty(k, np.int32)
    ng = 0
    ne = 0
    if nbytes == 4 and t >= sign:
        # float32, threshold >= +0: key > t  <=>  int32(bits) > int32(bits of t)
        # (negative floats are negative int32s), one signed compare per element
        tb = np.int32(np.int64(t ^ sign))
        sb = bits.view(np.int32)
        for i in range(n):
            v = sb[i]
            gi[ng] = i  # branch-free append (the slot is overwritten when not taken)
            ng += v > tb
            if v == tb and ne < k:
                ties[ne] = i
                ne += 1
            if ng == cap:
                return np.empty(0, np.int32)
        for j in range(ng):
            gk[j] = _key(bits[gi[j]], sign, ones)
    else:
        for i in range(n):
            key = _key(bits[i], sign, ones)
            gk[ng] = key
            gi[ng] = i
            ng += key > t
            if key == t and ne < k:
                ties[ne] = i
                ne += 1
            if ng == cap:
                return np.empty(0, np.int32)
    if ng + ne < k:
        return np.empty(0, np.int32)
    _, order = _radix_desc(gk[:ng], gi[:ng], nbytes)
    out = np.empty(k, np.int32)
    if ng >= k:
        out[:] = order[:k]
    else:
        out[:ng] = order
        out[ng:] = ties[:k - ng]
    return out


_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
SAMPLED_MIN_SIZE = 1 << 14  # below this a full radix sort is as fast
SAMPLE = 1 << 14


def top_k_indices(x: np.ndarray, k: int) -> np.ndarray:
    """int32 indices of the k largest elements of a 1-D float array by the
    total order of its bits, descending, lowest index first among equals."""
    width = x.dtype.itemsize
    bits = x.view(_UINT[width])
    sign = np.uint64(1 << (8 * width - 1))
    ones = np.uint64((1 << (8 * width)) - 1)
    n = x.size
    if n >= SAMPLED_MIN_SIZE and 4 * k <= n:
        idx = _topk_sampled(bits, k, sign, ones, width, SAMPLE)
        if idx.size == k:
            return idx
    return _topk_full(bits, k, sign, ones, width)


def top_k_indices_int(x: np.ndarray, k: int) -> np.ndarray:
    """Same for a 1-D integer array: its order key (two's complement: the sign bit flipped) is
    mapped to the bits whose float total-order key it is, so the sampled selection above serves
    it too (a full radix sort of n keys for one byte wide integers)."""
    width = x.dtype.itemsize
    if width not in _UINT:
        return _int_full(x, k)
    t = _UINT[width]
    flip = t(1 << (8 * width - 1)) if np.issubdtype(x.dtype, np.signedinteger) else t(0)
    bits = _float_order_bits(x.view(t), t(1 << (8 * width - 1)), flip)
    return top_k_indices(bits.view({2: np.float16, 4: np.float32, 8: np.float64}[width]), k)


@numba.njit(cache=True, nogil=True, parallel=True)
def _float_order_bits(u, sign, flip):
    """Per word: the bits b with _key(b) == u ^ flip (the inverse of the float total-order key)."""
    out = np.empty_like(u)
    for i in numba.prange(u.size):
        v = u[i] ^ flip
        out[i] = v & ~sign if v & sign else ~v
    return out


def _int_full(x: np.ndarray, k: int) -> np.ndarray:
    width = x.dtype.itemsize
    u = x.view(np.uint8).astype(np.uint64)
    if np.issubdtype(x.dtype, np.signedinteger):
        u ^= np.uint64(1 << (8 * width - 1))
    _, order = _radix_desc(u, np.arange(x.size, dtype=np.int32), width)
    return order[:k].copy()
