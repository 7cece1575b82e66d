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
"""
from __future__ import annotations

import numba
import numpy as np

from backends.numpy import buffers
from backends.numpy.blocks import PARALLEL_MIN, WORDS
from backends.numpy.packing import pack_codes, unpack_codes
from backends.numpy.threefry import key_schedule, threefry_hash

_U = np.uint32


@numba.njit(cache=True, nogil=True, inline="always")
def _bucket_run(i, i1, B, off, scale):
    """(e, off[b], scale[b]) for the entries [i, e) of bucket b = i // B that
    lie before i1: one bucket segment of a block, its values loaded once."""
    b = i // B
    return min(i1, (b + 1) * B), off[b], scale[b]


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
def _quantize_block(x, off, inv, B, top, bits, signed, a, b, c, w0, w1, out, codes, u):
    per = 32 // bits
    i0 = w0 * per
    i1 = min(x.size, w1 * per)
    m0 = i0 >> 1
    _uniform16(a, b, c, m0, (i1 + 1) >> 1, u)
    ub = 2 * m0
    zero = top - top
    one = _U(1)
    nil = _U(0)
    high = _U(1) << _U(bits - 1)
    i = i0
    while i < i1:
        e, o, s = _bucket_run(i, i1, B, off, inv)
        xs = x[i:e]
        cs = codes[i - i0:e - i0]
        us = u[i - ub:e - ub]
        if signed:  # sign and magnitude: the top bit marks x - offset < 0
            for t in range(e - i):
                v = xs[t] - o
                y = abs(v) * s
                y = y if y > zero else zero  # NaN -> 0
                y = top if y > top else y
                f = np.floor(y)
                cs[t] = _U(np.int32(f)) + (one if us[t] < y - f else nil) + (high if v < zero else nil)
        else:
            for t in range(e - i):
                y = (xs[t] - o) * s
                y = y if y > zero else zero  # NaN -> 0
                y = top if y > top else y
                f = np.floor(y)
                cs[t] = _U(np.int32(f)) + (one if us[t] < y - f else nil)  # int32: vectorizes
        i = e
    pack_codes(codes, i1 - i0, bits, out, w0)


@numba.njit(cache=True, parallel=True)
def _quantize_parallel(x, off, inv, B, top, bits, signed, k0, k1, out):
    a, b, c = key_schedule(k0, k1)
    per = 32 // bits
    nblk = (out.size + WORDS - 1) // WORDS
    for blk in numba.prange(nblk):
        codes = np.empty(WORDS * per, np.uint32)
        u = np.empty(WORDS * per + 2, np.float32)
        w0 = blk * WORDS
        _quantize_block(x, off, inv, B, top, bits, signed, a, b, c, w0, min(out.size, w0 + WORDS), out, codes, u)


@numba.njit(cache=True, nogil=True)
def _quantize_serial(x, off, inv, B, top, bits, signed, k0, k1, out):
    a, b, c = key_schedule(k0, k1)
    codes = np.empty(out.size * (32 // bits), np.uint32)
    u = np.empty(out.size * (32 // bits) + 2, np.float32)
    _quantize_block(x, off, inv, B, top, bits, signed, a, b, c, 0, out.size, out, codes, u)


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


@numba.njit(cache=True, nogil=True)
def _dequantize_block(words, bits, off, sc, B, signed, w0, w1, out, codes):
    per = 32 // bits
    i0 = w0 * per
    i1 = min(out.size, w1 * per)
    unpack_codes(words, w0, w1, bits, codes)
    high = out.dtype.type(1 << (bits - 1))
    i = i0
    while i < i1:
        e, o, s = _bucket_run(i, i1, B, off, sc)
        os = out[i:e]
        cs = codes[i - i0:e - i0]
        if signed:  # a code with the top bit h stands for -(code - h), as h - code
            for t in range(e - i):
                v = cs[t]
                os[t] = o + (high - v if v >= high else v) * s
        else:
            for t in range(e - i):
                os[t] = o + cs[t] * s
        i = e


@numba.njit(cache=True, parallel=True)
def _dequantize_parallel(words, bits, off, sc, B, signed, out):
    per = 32 // bits
    nw = (out.size + per - 1) // per
    nblk = (nw + WORDS - 1) // WORDS
    for blk in numba.prange(nblk):
        codes = np.empty(WORDS * per, out.dtype)
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
