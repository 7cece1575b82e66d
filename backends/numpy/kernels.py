"""Numba kernels behind the NumPy binding, where a plain NumPy pass costs more:
top-k, the one-pass halving sum, float16/bf16 casts, saturating float -> int
casts, gather, scatter-add and bit packing (threefry lives in ``threefry``).

Top-k by sampled threshold (exact). Floats are ranked by the *total order*
of their bits (what XLA's TopK uses, so results match ``lax.top_k``)::

    key(b) = ~b            if the sign bit of b is set
             b | signbit   otherwise

so -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN as unsigned keys; equal
keys go to the lowest index. The selection:

1. sample s keys at evenly spaced positions; with m = k s / n pick the
   threshold t = the (m + 4 sqrt(m) + 2)-th largest sample key, so that
   ``#{key >= t}`` exceeds k with overwhelming probability;
2. one pass: G = {i : key_i > t} (kept in index order), and the first k
   indices with key_i == t (ties at t: only the lowest indices can win);
3. if |G| + |ties| >= k the answer is exact: every element outside G and
   the first ties has key <= t and a lower rank than at least k kept
   elements. Sort G by key descending (stable LSD radix sort, so equal keys
   stay in index order), append ties, keep k. Otherwise (threshold too
   high, a rare sampling failure, or G overflowed its buffer) fall back to
   a full stable radix sort of all n keys.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

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
def sampled_threshold(sample, k, n):
    """(t, rank) for step 1 of the module doc: t is the (rank + 1)-th largest
    of the sampled keys (a selection, not a sort), rank = m + 4 sqrt(m) + 2 with
    m = k s / n; rank = -1 when the sample is too small to pick one."""
    s = sample.size
    m = k * s / n
    rank = int(m + 4.0 * math.sqrt(m) + 2.0)
    if rank >= s:
        return sample[0], -1
    return np.partition(sample, s - 1 - rank)[s - 1 - rank], rank


@numba.njit(cache=True, nogil=True)
def _topk_sampled(bits, k, sign, ones, nbytes, nsample):
    """Indices of the top k (see module doc); empty array if it must fall back."""
    n = bits.size
    s = min(n, nsample)
    sample = np.empty(s, np.uint64)
    for j in range(s):
        sample[j] = _key(bits[(j * n) // s], sign, ones)
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
    """Same for a 1-D integer array (two's complement: flip the sign bit)."""
    width = x.dtype.itemsize
    u = x.view(_UINT[width]).astype(np.uint64)
    if np.issubdtype(x.dtype, np.signedinteger):
        u ^= np.uint64(1 << (8 * width - 1))
    _, order = _radix_desc(u, np.arange(x.size, dtype=np.int32), width)
    return order[:k].copy()


# ---------------------------------------------------------------------------
# halving-order sum in one streaming pass
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# sign, select
# ---------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _sign_range(x, out):
    one = x.dtype.type(1)
    zero = x.dtype.type(0)
    for i in range(x.size):
        v = x[i]
        r = one if v > zero else v
        out[i] = -one if v < zero else r


@numba.njit(cache=True, parallel=True)
def sign_into(x, out):
    """out = +1 / -1 for positive / negative x; zeros (either sign) and NaN
    are copied (``Ops.sign``): branch-free selects (LLVM vectorizes them) on
    all cores, in chunks of 2**16."""
    chunk = 1 << 16
    for j in numba.prange((x.size + chunk - 1) // chunk):
        _sign_range(x[j * chunk:(j + 1) * chunk], out[j * chunk:(j + 1) * chunk])
    return out


@numba.njit(cache=True, nogil=True)
def select(cond, a, b, out):
    """out = a where cond else b, elementwise on equal-length raw-bit arrays
    (a branch-free select; NumPy's where branches on random masks)."""
    for i in range(out.size):
        out[i] = a[i] if cond[i] else b[i]
    return out


# ---------------------------------------------------------------------------
# gather / scatter-add
# ---------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def gather_bits(x, idx):
    """x[idx] on raw bits; an index outside [0, x.size) reads 0 (all-zero bits)."""
    n = x.size
    out = np.empty(idx.size, x.dtype)
    for i in range(idx.size):
        j = idx[i]
        if 0 <= j < n:
            out[i] = x[j]
        else:
            out[i] = 0  # (not a conditional expression: uint64 vs int would unify to float64)
    return out


@numba.njit(cache=True, parallel=True)
def fault_in_zeros(buf, parts):
    """Write 0 to one byte per 4 KiB page of the all-zero byte array ``buf``
    from all cores: a fresh allocation's pages are faulted in (and zeroed
    by the kernel) in parallel instead of one by one by the next writer."""
    m = buf.size
    for p in numba.prange(parts):
        for i in range(((m * p) // parts) & ~4095, (m * (p + 1)) // parts, 4096):
            buf[i] = 0


@numba.njit(cache=True, nogil=True)
def scatter_add_into(out, idx, vals):
    """out[idx[i]] += vals[i] in order of i; indices outside [0, out.size) drop."""
    n = out.size
    for i in range(idx.size):
        j = idx[i]
        if 0 <= j < n:
            out[j] += vals[i]
    return out


# ---------------------------------------------------------------------------
# float32 <-> float16 / bfloat16 on raw bits (NumPy's half casts run a slow
# scalar loop). Rounding is to nearest even; NaN stays NaN (payload not kept).
# ---------------------------------------------------------------------------


@intrinsic
def _f32_bits(typingctx, x):
    """Bit pattern of a float32 as uint32 (a register move, vectorizable)."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@intrinsic
def bits_f32(typingctx, x):
    """float32 with the bit pattern of the low 32 bits of an integer."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        v = args[0]
        if x.bitwidth > 32:
            v = builder.trunc(v, ir.IntType(32))
        elif x.bitwidth < 32:
            v = builder.zext(v, ir.IntType(32))
        return builder.bitcast(v, ir.FloatType())

    return types.float32(x), codegen


@numba.njit(cache=True, nogil=True)
def f32_to_f16(x, out):
    """IEEE binary32 -> binary16 bits, round to nearest even, overflow to inf,
    gradual underflow (rint of |x| * 2**24, which is exact, is the code).
    Branch-free selects so LLVM vectorizes the loop."""
    for i in range(x.size):
        b = _f32_bits(x[i])
        sign = (b >> np.uint32(16)) & np.uint32(0x8000)
        a = b & np.uint32(0x7FFFFFFF)
        odd = (a >> np.uint32(13)) & np.uint32(1)
        normal = np.uint32(a + np.uint32(0xC8000FFF) + odd) >> np.uint32(13)  # rebias by -112, round
        tiny = min(bits_f32(a), np.float32(6.103515625e-05))  # clamp keeps the unused lane finite
        sub = np.uint32(np.rint(tiny * np.float32(16777216.0)))
        special = np.uint32(0x7E00) if a > np.uint32(0x7F800000) else np.uint32(0x7C00)
        h = sub if a < np.uint32(113 << 23) else normal
        h = special if a >= np.uint32(143 << 23) else h
        out[i] = np.uint16(h | sign)
    return out


@numba.njit(cache=True, nogil=True)
def f16_to_f32(h, out):
    """binary16 bits -> binary32 (exact): exponent/mantissa shifted into place
    and scaled by 2**112 in float32, which also normalises subnormals."""
    for i in range(h.size):
        b = np.uint32(h[i])
        sign = (b & np.uint32(0x8000)) << np.uint32(16)
        em = b & np.uint32(0x7FFF)
        scaled = _f32_bits(bits_f32(em << np.uint32(13)) * np.float32(5.192296858534828e+33))
        special = np.uint32(0x7F800000) | ((em & np.uint32(0x3FF)) << np.uint32(13))
        out[i] = bits_f32((special if em >= np.uint32(0x7C00) else scaled) | sign)
    return out


@numba.njit(cache=True, nogil=True)
def f32_to_bf16(x, out):
    """binary32 -> bfloat16 bits, round to nearest even; NaN stays NaN (quiet)."""
    for i in range(x.size):
        b = _f32_bits(x[i])
        rounded = np.uint32(b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
        quiet = (b >> np.uint32(16)) | np.uint32(0x40)
        out[i] = np.uint16(quiet if (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000) else rounded)
    return out


@numba.njit(cache=True, nogil=True)
def bf16_to_f32(h, out):
    for i in range(h.size):
        out[i] = bits_f32(np.uint32(h[i]) << np.uint32(16))
    return out


# ---------------------------------------------------------------------------
# saturating float -> integer cast
# ---------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def saturating_cast(x, out, lo, hi_excl, out_min, out_max):
    """out = trunc(x) clamped to [out_min, out_max]; NaN -> 0. ``lo`` and
    ``hi_excl`` (= out_max + 1) are exact in x's float type."""
    for i in range(x.size):
        v = x[i]
        if v != v:
            out[i] = 0
        elif v >= hi_excl:
            out[i] = out_max
        elif v <= lo:
            out[i] = out_min
        else:
            out[i] = int(v)  # in range: C conversion truncates toward zero
    return out


# ---------------------------------------------------------------------------
# bit packing
# ---------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def pack_bits(codes, bits):
    """Words of ``32 // bits`` codes each, code j at bit j*bits (added, as
    the JAX binding does, so codes >= 2**bits carry the same way)."""
    per = 32 // bits
    n = codes.size
    nw = (n + per - 1) // per
    out = np.empty(nw, np.uint32)
    full = n // per
    for w in range(full):
        acc = np.uint32(0)
        base = w * per
        for j in range(per):
            acc = np.uint32(acc + np.uint32(np.uint32(codes[base + j]) << np.uint32(j * bits)))
        out[w] = acc
    if full < nw:
        acc = np.uint32(0)
        base = full * per
        for j in range(n - base):
            acc = np.uint32(acc + np.uint32(np.uint32(codes[base + j]) << np.uint32(j * bits)))
        out[full] = acc
    return out


@numba.njit(cache=True, nogil=True)
def unpack_bits(words, bits, count):
    per = 32 // bits
    mask = np.uint32(0xFFFFFFFF) if bits == 32 else np.uint32((1 << bits) - 1)
    out = np.empty(count, np.uint32)
    full = count // per
    for w in range(full):
        v = words[w]
        base = w * per
        for j in range(per):
            out[base + j] = np.uint32(v >> np.uint32(j * bits)) & mask
    base = full * per
    for j in range(count - base):
        out[base + j] = np.uint32(words[full] >> np.uint32(j * bits)) & mask
    return out
