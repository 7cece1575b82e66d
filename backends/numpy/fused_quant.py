"""The fused quantizer (``Fused.quantize_pack``) and its inverse
(``Fused.dequantize``) as one Numba pass each, on all cores from
``PARALLEL_MIN`` entries.

Work is cut into blocks of ``WORDS`` whole 32-bit words of codes, so
threads never share an output word; inside a block the per-bucket values
are loaded once per bucket segment, which keeps the inner loops free of
integer division so LLVM vectorizes them (the threefry rounds included).
Arithmetic is written in the array's own float type and in the order of the
reference: ``(x - offset) * inv_scale`` and ``offset + code * scale`` round
twice (no fused multiply-add; Numba does not contract without ``fastmath``).

The threefry words of a block (``random_words``: both output words of each
block, ``threefry.fill_words``) are stored as they come and read back as
uint16, which is the uniforms' order (entry 2m + h takes half h of word m),
so neither loop shuffles; 8- and 16-bit codes go straight into the output's
bytes or half-words (and are read back from them), 4-bit codes are decoded
from their bytes, 1- and 2-bit ones by a look-up of their bucket's 2 or 4
values (dequantize on 25M: 4.8-5.0 -> 3.6 ms; 2-bit codes pick theirs by selects,
3.65 -> 2.1 ms), other widths go through a codes buffer (uint16: half the
scratch traffic of uint32; 4-bit quantize_pack on 25M 8.5 -> 7.9 ms, 3-bit in
buckets of 50 14.2 -> 11.9 ms). A block is drawn, rounded and packed ``SUB``
entries at a time, so its words, codes and entries stay in L1 from one loop to the
next (25M float32, best of 15, old and new code run alternately: 1-bit 6.5 -> 6.1 ms,
2-bit 6.25 -> 5.95, 4-bit 7.0 -> 6.1, 8-bit signed 6.5 -> 6.2); it replaced drawing a
whole block's words with its entries prefetched between steps. Codes of {0, 1}
(top = 1: terngrad's signed 2-bit ones, 1-bit) round without clamp or floor: with the
chunks, terngrad's quantize_pack 7.8 -> 5.95 ms; compared as h + 1/2 < |v|·(s·2^16) in 16-bit
codes (:func:`_round_bits`), 5.55 -> 5.12 ms, and signed codes of other widths in 16 bits (4-bit
signed 7.15 -> 6.75 ms; ad hoc, the old and new kernels alternated in one process, best of 30).
1-bit unsigned codes are written a word at a time from 32 compares and a mask move
(``intrinsics.round_bits32``) where every bucket starts a word: 1-bit quantize_pack on 25M
float32 5.43-5.54 -> 4.33-4.40 ms (three runs, alternated, best of 20-30). Signed 2-bit codes
stay in the codes buffer: read off two masks and interleaved (BMI2's pdep, or shift-or-mask
steps) they took 5.17-6.08 ms against 5.13-5.34.
A thread allocates its buffers once per ``CHUNK`` blocks:
with one glibc arena (``backends.memory``) the threads would otherwise meet
on the allocator's lock twice per block.
"""
from __future__ import annotations

import numba
import numpy as np

from backends.numpy import buffers
from backends.numpy.blocks import PARALLEL_MIN, SUB, WORDS
from backends.numpy.intrinsics import round_bits32
from backends.numpy.packing import pack_codes, unpack_codes
from backends.numpy.threefry import fill_words, key_schedule

_U = np.uint32


@numba.njit(cache=True, nogil=True, inline="always")
def _bucket_run(i, i1, B, off, scale):
    """(e, off[b], scale[b]) for the entries [i, e) of bucket b = i // B that
    lie before i1: one bucket segment of a block, its values loaded once."""
    b = i // B
    return min(i1, (b + 1) * B), off[b], scale[b]


@numba.njit(cache=True, nogil=True, inline="always")
def _round_bits(xs, o, s, bits, signed, hs, cs):
    """cs[t] = [u_t < y_t] + 2**(bits - 1)·[v_t < 0] (the second term when ``signed``), v_t = xs[t] - o,
    y_t = |v_t|·s (v_t·s unsigned), u_t = (hs[t] + 1/2) / 2**16: :func:`round_codes`' codes {0, 1}.

    u_t < y_t is compared as hs[t] + 1/2 < |v_t|·(s·2**16): the same decision while s·2**16 is
    finite (scaling by 2**16 is exact, and where |v_t|·s is subnormal both sides say no, since
    u_t >= 2**-17), one multiply fewer; else as written. Both loops are branch-free, their codes
    16-bit (uint32 sums widen to 64-bit lanes in Numba: 2-bit codes of 25M float32, ad hoc:
    the rounding 2.1 -> 1.7 ms of quantize_pack's 5.6)."""
    zero = xs.dtype.type(0)
    half = np.float32(0.5)
    one = np.uint16(1)
    nil = np.uint16(0)
    neg = np.uint16(1 << (bits - 1)) if signed and s == s else nil   # a NaN scale: every code 0
    s16 = s * np.float32(65536.0)
    if s16 != np.inf:
        for t in range(xs.size):
            v = xs[t] - o
            y = (abs(v) if signed else v) * s16
            cs[t] = np.uint16((one if np.float32(hs[t]) + half < y else nil) | (neg if v < zero else nil))
    else:
        res = np.float32(1.0 / 65536.0)
        for t in range(xs.size):
            v = xs[t] - o
            y = (abs(v) if signed else v) * s
            u = (np.float32(hs[t]) + half) * res
            cs[t] = np.uint16((one if u < y else nil) | (neg if v < zero else nil))


@numba.njit(cache=True, nogil=True, inline="always")
def round_codes(xs, o, s, top, bits, signed, hs, cs):
    """cs[t] = code of xs[t] (offset o, inv_scale s) with the uniform (hs[t] + 0.5) / 2**16."""
    zero = top - top
    one = np.uint16(1)
    nil = np.uint16(0)
    high = np.uint16(1 << (bits - 1))
    half = np.float32(0.5)
    res = np.float32(1.0 / 65536.0)
    if top == np.float32(1.0):  # codes {0, 1}: f + [u < y - f] is [u < y] for every y (u < 1; NaN: false),
        _round_bits(xs, o, s, bits, signed, hs, cs)  # so neither clamp nor floor
    elif signed:  # sign and magnitude: the top bit marks x - offset < 0
        high = high if s == s else nil   # a NaN scale: every code 0, as the reference's (NaN -> code 0)
        for t in range(xs.size):
            v = xs[t] - o
            y = abs(v) * s
            y = y if y > zero else zero  # NaN -> 0
            y = top if y > top else y
            f = np.floor(y)
            u = (np.float32(hs[t]) + half) * res
            cs[t] = np.uint16(np.uint16(f) + (one if u < y - f else nil) + (high if v < zero else nil))
    else:
        for t in range(xs.size):
            y = (xs[t] - o) * s
            y = y if y > zero else zero  # NaN -> 0
            y = top if y > top else y
            f = np.floor(y)
            u = (np.float32(hs[t]) + half) * res
            cs[t] = _U(np.int32(f)) + (_U(1) if u < y - f else _U(0))  # int32: vectorizes


@numba.njit(cache=True, nogil=True)
def _quantize_block(x, off, inv, B, top, bits, signed, a, b, c, w0, w1, out, codes, hw):
    """Words [w0, w1) of the packed codes. 8- and 16-bit codes are stored
    straight into out's bytes or half-words (code j of a word at bit 8j or
    16j is, little-endian, its byte or half-word j); other widths go through
    the ``codes`` buffer and :func:`pack_codes`."""
    per = 32 // bits
    i0 = w0 * per
    i1 = min(x.size, w1 * per)
    h16 = hw.view(np.uint16)
    # 1-bit codes {0, 1} a word at a time from compare masks, where every bucket starts a word
    masks = top == 1 and bits == 1 and not signed and (B % per == 0 or B >= x.size)
    if bits == 8:
        narrow8 = out.view(np.uint8)
    if bits == 16:
        narrow16 = out.view(np.uint16)
    sub = max(1, SUB // (4 * per)) * 4 * per   # whole threefry blocks and whole code words
    for s0 in range(i0, i1, sub):   # a share of the block's words drawn, its entries rounded and packed
        s1 = min(i1, s0 + sub)
        m0 = s0 >> 1
        fill_words(a, b, c, m0, (s1 + 1) >> 1, hw)   # from word 2·(m0 // 2)
        ub = 4 * (m0 >> 1)
        i = s0
        while i < s1:
            e, o, s = _bucket_run(i, s1, B, off, inv)
            hs = h16[i - ub:e - ub]
            s16 = s * np.float32(65536.0)
            if masks and s16 != np.inf:   # as _round_bits: s·2^16 finite, or NaN
                nw = (e - i) // 32
                for w in range(nw):
                    out[i // 32 + w] = round_bits32(x, i + 32 * w, h16, i - ub + 32 * w, o, s16)
                if i + nw * 32 < e:   # x's last, partial word
                    t0 = i + nw * 32
                    round_codes(x[t0:e], o, s, top, bits, signed, h16[t0 - ub:e - ub], codes)
                    pack_codes(codes, e - t0, bits, out, t0 // 32)
            elif bits == 8:
                round_codes(x[i:e], o, s, top, bits, signed, hs, narrow8[i:e])
            elif bits == 16:
                round_codes(x[i:e], o, s, top, bits, signed, hs, narrow16[i:e])
            else:
                round_codes(x[i:e], o, s, top, bits, signed, hs, codes[i - s0:e - s0])
                if masks:   # segments start whole words here: pack each as it comes
                    pack_codes(codes[i - s0:e - s0], e - i, bits, out, i // per)
            i = e
        if bits != 8 and bits != 16 and not masks:
            pack_codes(codes, s1 - s0, bits, out, s0 // per)
    if bits == 8:
        narrow8[i1:w1 * per] = 0  # the unused fields of a last partial word
    elif bits == 16:
        narrow16[i1:w1 * per] = 0


CHUNK = 16  # blocks per thread-loop iteration (its scratch buffers are allocated once)


@numba.njit(cache=True, parallel=True)
def _quantize_parallel(x, off, inv, B, top, bits, signed, k0, k1, out):
    a, b, c = key_schedule(k0, k1)
    per = 32 // bits
    nblk = (out.size + WORDS - 1) // WORDS
    for ch in numba.prange((nblk + CHUNK - 1) // CHUNK):
        codes = np.empty(SUB, np.uint16)   # a share of a block at a time
        hw = np.empty(SUB // 2 + 3, np.uint32)
        for blk in range(ch * CHUNK, min(nblk, ch * CHUNK + CHUNK)):
            w0 = blk * WORDS
            _quantize_block(x, off, inv, B, top, bits, signed, a, b, c, w0, min(out.size, w0 + WORDS), out,
                            codes, hw)


@numba.njit(cache=True, nogil=True)
def _quantize_serial(x, off, inv, B, top, bits, signed, k0, k1, out):
    a, b, c = key_schedule(k0, k1)
    codes = np.empty(SUB, np.uint16)
    hw = np.empty(SUB // 2 + 3, np.uint32)
    _quantize_block(x, off, inv, B, top, bits, signed, a, b, c, 0, out.size, out, codes, hw)


def quantize_pack(x, offset, inv_scale, bucket: int, top, bits: int, key, signed: bool = False) -> np.ndarray:
    """``Fused.quantize_pack``: x contiguous 1-D float32/float64; offset and
    inv_scale per bucket in x's dtype; key uint32[2]."""
    n = x.size
    per = 32 // bits
    out = buffers.empty(-(-n // per), np.uint32)
    if n:
        run = _quantize_parallel if n >= PARALLEL_MIN else _quantize_serial
        run(x, offset, inv_scale, bucket or n, x.dtype.type(top), bits, bool(signed), _U(key[0]), _U(key[1]), out)
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _decode_codes(cs, o, s, high, signed, os):
    """os[t] = o + value(cs[t]) * s; a signed code with the top bit h stands
    for -(code - h), as h - code."""
    dt = os.dtype.type
    if signed:
        for t in range(os.size):
            v = dt(cs[t])
            os[t] = o + (high - v if v >= high else v) * s
    else:
        for t in range(os.size):
            os[t] = o + dt(cs[t]) * s


@numba.njit(cache=True, nogil=True, inline="always")
def _value(c, o, s, high, signed, dt):
    """o + value(c) * s, as :func:`_decode_codes`."""
    v = dt(c)
    return o + ((high - v if v >= high else v) if signed else v) * s


@numba.njit(cache=True, nogil=True, inline="always")
def _entry(c, bits, lut, table, lv, o, s, high, signed, dt):
    """The value of code c: with ``table``, the bucket's value for it (``lut``, whose first four
    are ``lv``), else :func:`_value`. A 2-bit code picks from ``lv`` by selects, not ``lut[c]``:
    an indexed load from a table the loop's stores may alias is a gather LLVM cannot hoist (the
    2-bit decode loop in cache, one core: 0.27 -> 0.15 ns an entry). A 1-bit code indexes ``lut``:
    with selects its loop of eight entries a byte ran 4x slower, unvectorized."""
    if not table:
        return _value(c, o, s, high, signed, dt)
    if bits == 1:
        return lut[c]
    lo = lv[1] if c & np.uint8(1) else lv[0]
    return (lv[3] if c & np.uint8(1) else lv[2]) if c & np.uint8(2) else lo


@numba.njit(cache=True, nogil=True, inline="always")
def _decode_bytes(wb, i, e, bits, pb, lut, o, s, high, signed, out):
    """out[j] = o + value(code j) * s for the entries [i, e) of one bucket, their codes of
    ``bits`` bits read from the bytes ``wb`` (``pb = 8 // bits`` to a byte, code j at bits
    (j % pb)·bits of byte j // pb): whole bytes in one loop (pb a constant: unrolled and
    vectorized, no codes buffer), the entries before the first and after the last whole byte
    one at a time. With a non-empty ``lut`` (the bucket's 2**bits values, computed by
    :func:`_value`: the same roundings) each entry is picked from them instead of computed."""
    dt = out.dtype.type
    mask = np.uint8((1 << bits) - 1)
    table = lut.size > 0
    top = max(lut.size - 1, 0)
    lv = (lut[0], lut[min(1, top)], lut[min(2, top)], lut[min(3, top)]) if table else (o, o, o, o)
    while i < e and i % pb != 0:
        out[i] = _entry((wb[i // pb] >> np.uint8((i % pb) * bits)) & mask, bits, lut, table, lv, o, s, high, signed, dt)
        i += 1
    k0 = i // pb
    full = (e - i) // pb
    os = out[i:i + full * pb]
    bs = wb[k0:k0 + full]
    for k in range(full):
        v = bs[k]
        for t in range(pb):
            os[pb * k + t] = _entry((v >> np.uint8(t * bits)) & mask, bits, lut, table, lv, o, s, high, signed, dt)
    for j in range(i + full * pb, e):
        out[j] = _entry((wb[j // pb] >> np.uint8((j % pb) * bits)) & mask, bits, lut, table, lv, o, s, high, signed, dt)


@numba.njit(cache=True, nogil=True)
def _dequantize_block(words, bits, off, sc, B, signed, w0, w1, out, codes):
    """Entries of the words [w0, w1); 8- and 16-bit codes are read straight
    from the words' bytes or half-words, 4-bit ones from their bytes (:func:`_decode_bytes`:
    25M float32 in buckets of 512, 4.8 -> 3.0 ms), other widths through :func:`unpack_codes`."""
    per = 32 // bits
    i0 = w0 * per
    i1 = min(out.size, w1 * per)
    if bits == 4:   # (2 and 1 bits this way, 4 and 8 codes a byte, ran 3x slower: not vectorized)
        high = out.dtype.type(8)
        wb = words.view(np.uint8)
        i = i0
        while i < i1:
            e, o, s = _bucket_run(i, i1, B, off, sc)
            _decode_bytes(wb, i, e, 4, 2, codes[:0], o, s, high, signed, out)
            i = e
        return
    if bits == 2 or bits == 1:   # a look-up of the bucket's 4 or 2 values per code
        dt = out.dtype.type
        high = dt(1 << (bits - 1))
        wb = words.view(np.uint8)
        lut = codes[:1 << bits]
        i = i0
        while i < i1:
            e, o, s = _bucket_run(i, i1, B, off, sc)
            for c in range(1 << bits):
                lut[c] = _value(c, o, s, high, signed, dt)
            if bits == 2:
                _decode_bytes(wb, i, e, 2, 4, lut, o, s, high, signed, out)
            else:
                _decode_bytes(wb, i, e, 1, 8, lut, o, s, high, signed, out)
            i = e
        return
    if bits != 8 and bits != 16:
        unpack_codes(words, w0, w1, bits, codes)
    narrow8 = words.view(np.uint8)
    narrow16 = words.view(np.uint16)
    high = out.dtype.type(1 << (bits - 1))
    i = i0
    while i < i1:
        e, o, s = _bucket_run(i, i1, B, off, sc)
        if bits == 8:
            _decode_codes(narrow8[i:e], o, s, high, signed, out[i:e])
        elif bits == 16:
            _decode_codes(narrow16[i:e], o, s, high, signed, out[i:e])
        else:
            _decode_codes(codes[i - i0:e - i0], o, s, high, signed, out[i:e])
        i = e


@numba.njit(cache=True, parallel=True)
def _dequantize_parallel(words, bits, off, sc, B, signed, out):
    per = 32 // bits
    nw = (out.size + per - 1) // per
    nblk = (nw + WORDS - 1) // WORDS
    for ch in numba.prange((nblk + CHUNK - 1) // CHUNK):
        codes = np.empty(WORDS * per, out.dtype)
        for blk in range(ch * CHUNK, min(nblk, ch * CHUNK + CHUNK)):
            w0 = blk * WORDS
            _dequantize_block(words, bits, off, sc, B, signed, w0, min(nw, w0 + WORDS), out, codes)


@numba.njit(cache=True, nogil=True)
def _dequantize_serial(words, bits, off, sc, B, signed, out):
    per = 32 // bits
    nw = (out.size + per - 1) // per
    codes = np.empty(nw * per, out.dtype)
    _dequantize_block(words, bits, off, sc, B, signed, 0, nw, out, codes)


def dequantize(words, bits: int, count: int, offset, scale, bucket: int, signed: bool = False) -> np.ndarray:
    """``Fused.dequantize`` (offset, scale: float32/float64 per bucket)."""
    out = buffers.empty(count, offset.dtype)
    if count:
        run = _dequantize_parallel if count >= PARALLEL_MIN else _dequantize_serial
        run(words, bits, offset, scale, bucket or count, bool(signed), out)
    return out
