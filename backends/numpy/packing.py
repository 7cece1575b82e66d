"""Bit packing: codes of ``bits`` bits, ``32 // bits`` to a uint32 word, code
j of a word at bit ``j * bits``. ``pack_bits`` / ``unpack_bits`` are the
ops of that name; ``pack_codes`` / ``unpack_codes`` pack and unpack whole
words of a block for the fused quantizer (``backends.numpy.fused_quant``),
with a constant code width per branch so LLVM vectorizes the loops.
"""
from __future__ import annotations

import numba
import numpy as np

_U = np.uint32


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


@numba.njit(cache=True, nogil=True, inline="always")
def _pack_bytes(codes, m, bits, pb, out, w0):
    """Codes of 1, 2 or 4 bits, ``pb = 8 // bits`` to a byte of out's words
    (little-endian: code pb*k + t of the block is bits t*bits.. of byte k):
    a byte loop vectorizes where the word loop's 32 // bits-way gather does not."""
    ob = out.view(np.uint8)[4 * w0:]
    full = m // pb
    for k in range(full):
        acc = _U(0)
        for t in range(pb):
            acc |= _U(codes[pb * k + t] << _U(t * bits))
        ob[k] = np.uint8(acc)
    used = full
    if full * pb < m:
        acc = _U(0)
        for t in range(m - full * pb):
            acc |= _U(codes[full * pb + t] << _U(t * bits))
        ob[full] = np.uint8(acc)
        used += 1
    for k in range(used, -(-m // (4 * pb)) * 4):  # the unused fields of a last partial word
        ob[k] = 0


@numba.njit(cache=True, nogil=True, inline="always")
def _unpack_bytes(words, w0, w1, bits, pb, codes):
    """codes[pb*k + t] = code t of byte k of words[w0:w1] (1, 2 or 4 bits), as codes' dtype."""
    wb = words.view(np.uint8)[4 * w0:4 * w1]
    mask = np.uint8((1 << bits) - 1)
    dt = codes.dtype.type
    for k in range(wb.size):
        v = wb[k]
        for t in range(pb):
            codes[pb * k + t] = dt((v >> np.uint8(t * bits)) & mask)


@numba.njit(cache=True, nogil=True)
def pack_codes(codes, m, bits, out, w0):
    """out[w0 + w] = word w of the m codes packed ``32 // bits`` a word, OR-ed
    into disjoint fields (codes < 2**bits: the quantizer's); a branch per
    width up to 8 and 16, so each loop's trip count is a constant LLVM
    unrolls and vectorizes (3 bits: 22.7 -> 14 ms for the quantizer on 25M
    float32, ad hoc, against 14.2 ms at 4 bits)."""
    if bits == 8:
        _pack_width(codes, m, 8, 4, out, w0)
    elif bits == 4:
        _pack_bytes(codes, m, 4, 2, out, w0)
    elif bits == 1:
        _pack_bytes(codes, m, 1, 8, out, w0)
    elif bits == 2:
        _pack_bytes(codes, m, 2, 4, out, w0)
    elif bits == 16:
        _pack_width(codes, m, 16, 2, out, w0)
    elif bits == 3:
        _pack_width(codes, m, 3, 10, out, w0)
    elif bits == 5:
        _pack_width(codes, m, 5, 6, out, w0)
    elif bits == 6:
        _pack_width(codes, m, 6, 5, out, w0)
    elif bits == 7:
        _pack_width(codes, m, 7, 4, out, w0)
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
def unpack_codes(words, w0, w1, bits, codes):
    """codes[(w - w0) * per + t] = code t of words[w] for w0 <= w < w1 (all
    ``per = 32 // bits`` codes of each word), as codes' dtype; a branch per
    common width, as :func:`pack_codes` (5-7 bits: 11-12 -> 6.5-7.5 ms for
    the dequantizer on 25M float32, ad hoc)."""
    if bits == 8:
        _unpack_width(words, w0, w1, 8, 4, codes)
    elif bits == 4:
        _unpack_bytes(words, w0, w1, 4, 2, codes)
    elif bits == 1:
        _unpack_bytes(words, w0, w1, 1, 8, codes)
    elif bits == 2:
        _unpack_bytes(words, w0, w1, 2, 4, codes)
    elif bits == 16:
        _unpack_width(words, w0, w1, 16, 2, codes)
    elif bits == 5:  # (3 bits as a constant unpacked slower, 8.3 -> 10.8 ms on 25M: runtime width)
        _unpack_width(words, w0, w1, 5, 6, codes)
    elif bits == 6:
        _unpack_width(words, w0, w1, 6, 5, codes)
    elif bits == 7:
        _unpack_width(words, w0, w1, 7, 4, codes)
    else:
        _unpack_width(words, w0, w1, bits, 32 // bits, codes)


@numba.njit(cache=True, nogil=True)
def pack_bits(codes, bits):
    """Words of ``32 // bits`` codes each, code j at bit j*bits (added, as
    the JAX binding does, so codes >= 2**bits carry the same way; hence not
    :func:`pack_codes`, whose OR would drop the carry)."""
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
    """The first ``count`` codes of ``words`` as uint32: the whole words by
    :func:`unpack_codes`, then the leading codes of the last one."""
    per = 32 // bits
    mask = np.uint32(0xFFFFFFFF) if bits == 32 else np.uint32((1 << bits) - 1)
    out = np.empty(count, np.uint32)
    full = count // per
    unpack_codes(words, 0, full, bits, out)
    base = full * per
    for j in range(count - base):
        out[base + j] = np.uint32(words[full] >> np.uint32(j * bits)) & mask
    return out
