"""Numba kernels for the *fused* ops of the namespace (``compressors.ops.Fused``).

Each kernel computes, in one pass over memory and on all cores, exactly what
the fused op's reference composition computes through many primitive ops
(``tests/backends/test_fused.py`` checks the bits): per-bucket min/max, the
stochastic-rounding quantizer with its threefry uniforms and bit packing,
its dequantizer, sign-bit packing and unpacking, and top-k by magnitude.

Work is cut into blocks of whole 32-bit words (``WORDS`` words of codes), so
threads never share an output word; inside a block the per-bucket values are
loaded once per bucket segment, which keeps the inner loops free of integer
division so LLVM vectorizes them (the threefry rounds included). Arithmetic
is written in the array's own float type and in the order of the reference:
``(x - offset) * inv_scale`` and ``offset + code * scale`` round twice (no
fused multiply-add; Numba does not contract without ``fastmath``).
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from backends.numpy import buffers
from backends.numpy.kernels import SAMPLE, bits_f32, sampled_threshold
from backends.numpy.threefry import threefry_hash

_U = np.uint32
WORDS = 1024  # output words per block of the packing kernels
PIECE = 1 << 16  # elements per partial reduction of bucket_min_max
PARALLEL_MIN = 1 << 17  # below this many elements the serial kernels run


# ---------------------------------------------------------------------------
# per-bucket min / max
# ---------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _min_max_range(xi, s, e):
    """(min, max) of the total-order keys of x[s:e] (e > s), where xi is x's
    bits as a signed integer: key = b ^ ((b >> (w-1)) & (2**(w-1) - 1)) orders
    -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN as signed integers, and
    integer min/max reductions vectorize (float ones do not without fastmath)."""
    sh = xi.dtype.type(xi.itemsize * 8 - 1)
    low = xi.dtype.type(~(xi.dtype.type(1) << sh))
    b = xi[s]
    mn = b ^ ((b >> sh) & low)
    mx = mn
    seg = xi[s:e]
    for j in range(e - s):  # from 0 over a slice: no negative-index checks, so LLVM vectorizes
        b = seg[j]
        k = b ^ ((b >> sh) & low)
        mn = min(mn, k)
        mx = max(mx, k)
    return mn, mx


@numba.njit(cache=True, parallel=True)
def _min_max_pieces(xi, B, ppb, L, pmin, pmax):
    """Key partials of every bucket's ppb pieces of length L (the last shorter)."""
    n = xi.size
    for p in numba.prange(pmin.size):
        bk = p // ppb
        s = bk * B + (p % ppb) * L
        end = min(n, (bk + 1) * B)
        if min(end, s + L) > s:
            pmin[p], pmax[p] = _min_max_range(xi, s, min(end, s + L))
        else:  # an empty piece repeats the bucket's last entry
            pmin[p], pmax[p] = _min_max_range(xi, end - 1, end)


@numba.njit(cache=True, nogil=True)
def _min_max_combine(ppb, pmin, pmax, lo_nan, hi_nan, mins, maxs):
    """Per-bucket key min/max; NaN (both) where a key lies beyond +-inf's."""
    sh = mins.dtype.type(mins.itemsize * 8 - 1)
    low = mins.dtype.type(~(mins.dtype.type(1) << sh))
    for bk in range(mins.size):
        p = bk * ppb
        mn = pmin[p]
        mx = pmax[p]
        for q in range(p + 1, p + ppb):
            mn = min(mn, pmin[q])
            mx = max(mx, pmax[q])
        if mn < lo_nan or mx > hi_nan:
            mn = hi_nan + 1  # the key of +NaN (a quiet NaN's bits)
            mx = mn
        mins[bk] = mn ^ ((mn >> sh) & low)  # the key map is its own inverse
        maxs[bk] = mx ^ ((mx >> sh) & low)


_SIGNED = {np.dtype(np.float32): (np.int32, 0x7F800000, -0x7F800001),
           np.dtype(np.float64): (np.int64, 0x7FF0000000000000, -0x7FF0000000000001)}


def bucket_min_max(x: np.ndarray, bucket: int) -> tuple[np.ndarray, np.ndarray]:
    """``Fused.bucket_min_max`` of a contiguous 1-D float32/float64 array (size >= 1)."""
    n = x.size
    B = bucket or n
    nb = -(-n // B)
    ppb = -(-B // PIECE)
    L = -(-B // ppb)
    signed, inf_key, neg_inf_key = _SIGNED[x.dtype]
    xi = x.view(signed)
    pmin = np.empty(nb * ppb, signed)
    pmax = np.empty(nb * ppb, signed)
    _min_max_pieces(xi, B, ppb, L, pmin, pmax)
    mins = np.empty(nb, signed)
    maxs = np.empty(nb, signed)
    _min_max_combine(ppb, pmin, pmax, signed(neg_inf_key), signed(inf_key), mins, maxs)
    return mins.view(x.dtype), maxs.view(x.dtype)


# ---------------------------------------------------------------------------
# packing with a constant code width: a branch per width in the dispatchers
# below, each an inlined loop whose trip count LLVM sees (and vectorizes)
# ---------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True, inline="always")
def _pack_width(codes, m, bits, per, out, w0):
    """out[w0 + w] = codes[w*per : (w+1)*per] packed, for the m codes."""
    full = m // per
    ow = out[w0:]
    for w in range(full):
        acc = _U(0)
        for t in range(per):
            acc |= _U(codes[w * per + t] << _U(t * bits))
        ow[w] = acc
    if full * per < m:
        acc = _U(0)
        for t in range(m - full * per):
            acc |= _U(codes[full * per + t] << _U(t * bits))
        ow[full] = acc


@numba.njit(cache=True, nogil=True)
def _pack(codes, m, bits, out, w0):
    if bits == 8:
        _pack_width(codes, m, 8, 4, out, w0)
    elif bits == 4:
        _pack_width(codes, m, 4, 8, out, w0)
    elif bits == 1:
        _pack_width(codes, m, 1, 32, out, w0)
    elif bits == 2:
        _pack_width(codes, m, 2, 16, out, w0)
    elif bits == 16:
        _pack_width(codes, m, 16, 2, out, w0)
    else:
        _pack_width(codes, m, bits, 32 // bits, out, w0)


@numba.njit(cache=True, nogil=True, inline="always")
def _unpack_width(words, w0, w1, bits, per, codes):
    """codes[(w - w0)*per + t] = code t of words[w], as codes' dtype."""
    mask = _U(0xFFFFFFFF) if bits == 32 else _U((1 << bits) - 1)
    ws = words[w0:w1]
    for w in range(w1 - w0):
        v = ws[w]
        for t in range(per):
            codes[w * per + t] = np.int64(_U(v >> _U(t * bits)) & mask)


@numba.njit(cache=True, nogil=True)
def _unpack(words, w0, w1, bits, codes):
    if bits == 8:
        _unpack_width(words, w0, w1, 8, 4, codes)
    elif bits == 4:
        _unpack_width(words, w0, w1, 4, 8, codes)
    elif bits == 1:
        _unpack_width(words, w0, w1, 1, 32, codes)
    elif bits == 2:
        _unpack_width(words, w0, w1, 2, 16, codes)
    elif bits == 16:
        _unpack_width(words, w0, w1, 16, 2, codes)
    else:
        _unpack_width(words, w0, w1, bits, 32 // bits, codes)


# ---------------------------------------------------------------------------
# stochastic-rounding quantizer -> packed words, and back
# ---------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _uniform16(a, b, c, m0, m1, u):
    """u[2(m - m0) + h] = (half h of random_bits[m] + 0.5) / 2**16, h = 0 (low) or 1 (high)."""
    scale = np.float32(1.0 / 65536.0)
    base = _U(_U(m0) + b)
    for m in range(m1 - m0):
        h = threefry_hash(a, b, c, _U(_U(m) + base))
        u[2 * m] = (np.float32(np.int32(h & _U(0xFFFF))) + np.float32(0.5)) * scale
        u[2 * m + 1] = (np.float32(np.int32(h >> _U(16))) + np.float32(0.5)) * scale


@numba.njit(cache=True, nogil=True)
def _quantize_block(x, off, inv, B, top, bits, a, b, c, w0, w1, out, codes, u):
    per = 32 // bits
    i0 = w0 * per
    i1 = min(x.size, w1 * per)
    m0 = i0 >> 1
    _uniform16(a, b, c, m0, (i1 + 1) >> 1, u)
    ub = 2 * m0
    zero = top - top
    one = _U(1)
    nil = _U(0)
    i = i0
    while i < i1:
        bk = i // B
        e = min(i1, (bk + 1) * B)
        o = off[bk]
        s = inv[bk]
        xs = x[i:e]
        cs = codes[i - i0:e - i0]
        us = u[i - ub:e - ub]
        for t in range(e - i):
            y = (xs[t] - o) * s
            y = y if y > zero else zero  # NaN -> 0
            y = top if y > top else y
            f = np.floor(y)
            cs[t] = _U(np.int32(f)) + (one if us[t] < y - f else nil)  # int32: vectorizes
        i = e
    _pack(codes, i1 - i0, bits, out, w0)


@numba.njit(cache=True, parallel=True)
def _quantize_parallel(x, off, inv, B, top, bits, k0, k1, out):
    a = _U(k0)
    b = _U(k1)
    c = _U(a ^ b ^ _U(0x1BD11BDA))
    per = 32 // bits
    nblk = (out.size + WORDS - 1) // WORDS
    for blk in numba.prange(nblk):
        codes = np.empty(WORDS * per, np.uint32)
        u = np.empty(WORDS * per + 2, np.float32)
        w0 = blk * WORDS
        _quantize_block(x, off, inv, B, top, bits, a, b, c, w0, min(out.size, w0 + WORDS), out, codes, u)


@numba.njit(cache=True, nogil=True)
def _quantize_serial(x, off, inv, B, top, bits, k0, k1, out):
    a = _U(k0)
    b = _U(k1)
    c = _U(a ^ b ^ _U(0x1BD11BDA))
    codes = np.empty(out.size * (32 // bits), np.uint32)
    u = np.empty(out.size * (32 // bits) + 2, np.float32)
    _quantize_block(x, off, inv, B, top, bits, a, b, c, 0, out.size, out, codes, u)


def quantize_pack(x, offset, inv_scale, bucket: int, top, bits: int, key) -> np.ndarray:
    """``Fused.quantize_pack``: x contiguous 1-D float32/float64; offset and
    inv_scale per bucket in x's dtype; key uint32[2]."""
    n = x.size
    per = 32 // bits
    out = buffers.empty(-(-n // per), np.uint32)
    if n:
        run = _quantize_parallel if n >= PARALLEL_MIN else _quantize_serial
        run(x, offset, inv_scale, bucket or n, x.dtype.type(top), bits, _U(key[0]), _U(key[1]), out)
    return out


@numba.njit(cache=True, nogil=True)
def _dequantize_block(words, bits, off, sc, B, w0, w1, out, codes):
    per = 32 // bits
    i0 = w0 * per
    i1 = min(out.size, w1 * per)
    _unpack(words, w0, w1, bits, codes)
    i = i0
    while i < i1:
        bk = i // B
        e = min(i1, (bk + 1) * B)
        o = off[bk]
        s = sc[bk]
        os = out[i:e]
        cs = codes[i - i0:e - i0]
        for t in range(e - i):
            os[t] = o + cs[t] * s
        i = e


@numba.njit(cache=True, parallel=True)
def _dequantize_parallel(words, bits, off, sc, B, out):
    per = 32 // bits
    nw = (out.size + per - 1) // per
    nblk = (nw + WORDS - 1) // WORDS
    for blk in numba.prange(nblk):
        codes = np.empty(WORDS * per, out.dtype)
        w0 = blk * WORDS
        _dequantize_block(words, bits, off, sc, B, w0, min(nw, w0 + WORDS), out, codes)


@numba.njit(cache=True, nogil=True)
def _dequantize_serial(words, bits, off, sc, B, out):
    per = 32 // bits
    nw = (out.size + per - 1) // per
    codes = np.empty(nw * per, out.dtype)
    _dequantize_block(words, bits, off, sc, B, 0, nw, out, codes)


def dequantize(words, bits: int, count: int, offset, scale, bucket: int) -> np.ndarray:
    """``Fused.dequantize`` (offset, scale: float32/float64 per bucket)."""
    out = buffers.empty(count, offset.dtype)
    if count:
        run = _dequantize_parallel if count >= PARALLEL_MIN else _dequantize_serial
        run(words, bits, offset, scale, bucket or count, out)
    return out


# ---------------------------------------------------------------------------
# sign bits
# ---------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _signs_block(x, w0, w1, out):
    zero = x.dtype.type(0)
    xs = x[w0 * 32:w1 * 32]
    os = out[w0:w1]
    full = xs.size // 32
    for w in range(full):
        acc = _U(0)
        for t in range(32):
            acc |= _U(_U(1) << _U(t)) if xs[w * 32 + t] < zero else _U(0)
        os[w] = acc
    if full < os.size:
        acc = _U(0)
        for t in range(xs.size - full * 32):
            acc |= _U(_U(1) << _U(t)) if xs[full * 32 + t] < zero else _U(0)
        os[full] = acc


@numba.njit(cache=True, parallel=True)
def _signs_parallel(x, out):
    nblk = (out.size + WORDS - 1) // WORDS
    for blk in numba.prange(nblk):
        _signs_block(x, blk * WORDS, min(out.size, (blk + 1) * WORDS), out)


def pack_signs(x: np.ndarray) -> np.ndarray:
    """``Fused.pack_signs`` of a contiguous 1-D float array (float32/float64)."""
    out = np.empty(-(-x.size // 32), np.uint32)
    if x.size >= PARALLEL_MIN:
        _signs_parallel(x, out)
    elif x.size:
        _signs_block(x, 0, out.size, out)
    return out


@numba.njit(cache=True, nogil=True)
def _unsigns_block(words, table, w0, w1, out):
    os = out[w0 * 32:w1 * 32]
    ws = words[w0:w1]
    full = os.size // 32
    for w in range(full):
        v = ws[w]
        for q in range(4):
            row = table[(v >> _U(8 * q)) & _U(255)]
            for t in range(8):
                os[w * 32 + 8 * q + t] = row[t]
    for t in range(os.size - full * 32):
        os[full * 32 + t] = table[(ws[full] >> _U(t)) & _U(1), 0]


@numba.njit(cache=True, parallel=True)
def _unsigns_parallel(words, table, out):
    nw = (out.size + 31) // 32
    nblk = (nw + WORDS - 1) // WORDS
    for blk in numba.prange(nblk):
        _unsigns_block(words, table, blk * WORDS, min(nw, (blk + 1) * WORDS), out)


def unpack_signs(words, count: int, pos, neg) -> np.ndarray:
    """``Fused.unpack_signs``: pos and neg are 0-d arrays of one raw-bit-copyable dtype."""
    out = buffers.empty(count, pos.dtype)
    width = {2: np.uint16, 4: np.uint32, 8: np.uint64}[pos.dtype.itemsize]
    o = out.view(width)
    p, q = pos.reshape(1).view(width)[0], neg.reshape(1).view(width)[0]
    table = np.empty((256, 8), width)
    table[:] = p
    table[_BYTE_BITS] = q
    if count >= PARALLEL_MIN:
        _unsigns_parallel(words, table, o)
    else:
        _unsigns_block(words, table, 0, -(-count // 32), o)
    return out


_BYTE_BITS = ((np.arange(256)[:, None] >> np.arange(8)) & 1).astype(bool)


# ---------------------------------------------------------------------------
# top-k by magnitude
# ---------------------------------------------------------------------------


@intrinsic
def _ctz(typingctx, v):
    """Count of trailing zero bits of a nonzero uint64 (LLVM cttz)."""
    if v != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))

    return types.uint64(types.uint64), codegen


@numba.njit(cache=True, nogil=True)
def _collect(bits, mask, t, s, e, k, gi, gk, ties):
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
            j = b0 + np.int64(_ctz(hit))
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
def _kth_largest(gk, ng, k, nbits):
    """The k-th largest (1-based) of the keys gk[p, :ng[p]] (all >= 0, below
    2**nbits), by radix selection: DIGIT-bit digits from the top, each pass
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
    return prefix


@numba.njit(cache=True, parallel=True)
def _top_k_abs_sampled(bits, k, mask, nbits, nsample, parts):
    """Indices of the k largest |x|, ascending (see numba_kernels' module doc
    for the sampled threshold t, here on magnitude keys ``bits & mask``);
    empty when the caller must fall back to the reference composition.

    The survivors (keys > t, collected in index order) hold the top k when
    there are at least k of them; their exact k-th largest key T comes from
    a radix selection, and one walk in index order keeps keys > T and the
    first keys == T (lowest index first), so no sort is needed."""
    n = bits.size
    s = min(n, nsample)
    sample = np.empty(s, bits.dtype)
    for j in range(s):
        sample[j] = bits[(j * n) // s] & mask
    t, rank = sampled_threshold(sample, k, n)
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
            ng[p], ne[p] = _collect(bits, mask, t, lo, hi, k, gi[p], gk[p], ties[p])
    if ng.min() < 0:
        return np.empty(0, np.int32)
    total = ng.sum()
    out = np.empty(k, np.int32)
    at = 0
    if total >= k:
        big = _kth_largest(gk, ng, k, nbits)
        above = 0
        for p in range(parts):
            for j in range(ng[p]):
                above += gk[p, j] > big
        equal = k - above  # keys == big to keep, lowest index first
        for p in range(parts):
            for j in range(ng[p]):
                v = gk[p, j]
                if v > big or (v == big and equal > 0):
                    equal -= v == big
                    out[at] = gi[p, j]
                    at += 1
        return out
    need = k - total  # every survivor, and this many keys == t, lowest index first
    if ne.sum() < need:
        return np.empty(0, np.int32)
    for p in range(parts):
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
    return out


def sample_size(n: int) -> int:
    return min(SAMPLE, max(1024, n // 64))  # reading the sample stays a small part of the pass


def _magnitude_keys(x: np.ndarray):
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
    bits, mask, nbits = _magnitude_keys(x)
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
    bits, mask, nbits = _magnitude_keys(x)
    out = np.empty((rows, k), np.int32)
    ok = np.empty(rows, np.bool_)
    _top_k_abs_rows(bits, k, mask, nbits, sample_size(n), out, ok)
    return out, ok


# ---------------------------------------------------------------------------
# error feedback's sums and low-rank products
# ---------------------------------------------------------------------------

ROWS_PARALLEL_MIN = 1 << 20  # entries from which the kernels below run on all cores


@numba.njit(cache=True, parallel=True)
def _add_parallel(a, b, out, parts):
    m = out.size
    for p in numba.prange(parts):
        s = (m * p) // parts
        e = (m * (p + 1)) // parts
        xa = a[s:e]
        xb = b[s:e]
        o = out[s:e]
        for i in range(e - s):
            o[i] = xa[i] + xb[i]


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` of two contiguous arrays of one shape and float dtype, on all cores."""
    out = buffers.empty(a.shape, a.dtype)
    _add_parallel(a.reshape(-1), b.reshape(-1), out.reshape(-1), 4 * numba.get_num_threads())
    return out


@numba.njit(cache=True, nogil=True)
def _low_rank_row(c, a, bt, i, row, subtract):
    """row = c[i] - a[i] @ bt (or a[i] @ bt): r axpy passes over one row held
    in L1, summed in order j = 0, 1, ..., r - 1."""
    m = row.size
    r = a.shape[1]
    w = a[i, 0]
    t0 = bt[0]
    for col in range(m):
        row[col] = w * t0[col]
    for j in range(1, r):
        w = a[i, j]
        tj = bt[j]
        for col in range(m):
            row[col] += w * tj[col]
    if subtract:
        ci = c[i]
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
