"""Natural compression's codec (``Fused.natural_pack`` / ``Fused.natural_unpack``)
as one Numba pass each, on all cores from ``PARALLEL_MIN`` entries, in
blocks of ``WORDS`` sign words (32 entries each, so threads never share a
word of either output).

The composition's float steps reduce to integers. With ``k = w >> 9``
the entry's threefry word (word i of ``random_words``: both output words of
each block, ``threefry.fill_words``, drawn a block of entries at a time) cut
to the uniform's 23 bits (``u = k / 2**23`` exactly):

* float32, finite: write x's bits as exponent field E and mantissa M. A
  normal x rounds up when ``u < 2m - 1 = M / 2**23`` and a subnormal or zero
  one to 2^-126 when ``u < |x| * 2**126 = M / 2**23``: both are ``k < M``,
  and the code is ``E + [k < M]`` (E = 254 rounding up gives 255: inf).
* float64, normal (|x| >= 2^-126): ``2m - 1 = M / 2**52``, so the test is
  ``k * 2**29 < M``; the code is ``min(E - 896 + [k * 2**29 < M], 255)``.
  Below 2^-126 the composition's float test ``u < |x| * 2**126`` is kept
  (exact: a power-of-two scaling of a float64 that stays in range).

±inf gives code 255, NaN code 0 with the sign bit set; a negative x has its
sign bit only when its code is not 0.

A block of sign words is drawn and coded ``SUB`` entries at a time: ``fill_words``
stores the share's words (word i is entry i's), then one contiguous loop codes its
entries, so words, entries and codes stay in L1. It replaced computing each threefry
block in the loop that coded its two entries (whose stride-2 loads and stores LLVM
serves with permutes; that form had taken natural_pack on 25M float32 15.5 -> 11.1 ms
against storing a whole block's words): with ``_code32``'s carry form, 11.1-11.3 ->
10.35-10.6 ms (old and new code run alternately, best of 15). The share's sign words are then
read off x's bits and its codes by vector compares and a mask move (``signed_code_bits32``),
not from a 0/1 byte per entry packed after the whole block: same bits, 10.29 -> 9.66 and
10.12 -> 9.44 ms (best of 40, alternated in one process).
"""
from __future__ import annotations

import numba
import numpy as np

from backends.numpy import buffers
from backends.numpy.blocks import PARALLEL_MIN, SUB, WORDS
from backends.numpy.intrinsics import signed_code_bits32
from backends.numpy.threefry import fill_words, key_schedule

_U = np.uint32
_U64 = np.uint64
TINY64 = 2.0**-126
SCALE64 = 2.0**126


@numba.njit(cache=True, nogil=True, inline="always")
def _code32(b, k):
    """E code of the float32 with bits b, given k. With a = |x|'s bits,
    ``(a + [k < M] << 23) >> 23`` is E + [k < M] (E = 254 carries into 255: inf; inf itself
    has M = 0, so it stays 255) and never reaches bit 31; only NaN (a > inf's bits) is
    special. Every step is cast back to uint32: Numba widens uint32 arithmetic to 64 bits,
    and the loop then runs 8 lanes wide, not 16 (its code loop 0.56 -> 0.26 ns an entry);
    this form, not separate E and inf tests, took the pack on one core from 0.86 to 0.76 ns
    an entry (in cache)."""
    a = _U(b & _U(0x7FFFFFFF))
    m = _U(b & _U(0x7FFFFF))
    code = _U(_U(a + (_U(0x800000) if k < m else _U(0))) >> _U(23))
    return _U(0) if a > _U(0x7F800000) else code


@numba.njit(cache=True, nogil=True, inline="always")
def _code64(b, x, k):
    """E code of the float64 x with bits b, given k."""
    e = (b >> _U64(52)) & _U64(0x7FF)
    m = b & _U64(0xFFFFFFFFFFFFF)
    a = abs(x)
    up = _U64(1) if (_U64(k) << _U64(29)) < m else _U64(0)
    normal = min(e + up, _U64(896 + 255)) - _U64(896) if e >= _U64(897) else _U64(0)
    tiny = _U64(1) if np.float64(k) * (1.0 / 8388608.0) < a * SCALE64 else _U64(0)
    code = tiny if a < TINY64 else normal
    code = _U64(255) if e == _U64(0x7FF) else code
    nan = (e == _U64(0x7FF)) & (m != _U64(0))
    return _U(0) if nan else _U(code)


@numba.njit(cache=True, nogil=True)
def _pack_block(xb, x, wide, a, b, c, w0, w1, signs, exps, hw):
    """Sign words [w0, w1) and their entries' exponent bytes. ``xb``: x's bits
    (uint32 for float32, uint64 for float64), ``wide``: x is float64; ``hw``: room for
    ``SUB + 2`` threefry words (entry i takes word i of ``random_words``), drawn ``SUB``
    entries at a time so that they, the entries and their codes stay in L1, where the
    share's sign words are then read off x and the codes (:func:`signed_code_bits32`)."""
    n = xb.size
    i0 = w0 * 32   # even: word i0 opens a threefry block
    i1 = min(n, w1 * 32)
    for s0 in range(i0, i1, SUB):   # SUB is a multiple of 32: a share starts a sign word
        s1 = min(i1, s0 + SUB)
        fill_words(a, b, c, s0, s1, hw)   # from word s0 (even)
        xs = xb[s0:s1]
        es = exps[s0:s1]
        if wide:
            vs = x[s0:s1]
            for t in range(s1 - s0):
                es[t] = np.uint8(_code64(xs[t], vs[t], hw[t] >> _U(9)))
        else:
            for t in range(s1 - s0):
                es[t] = np.uint8(_code32(xs[t], _U(hw[t] >> _U(9))))
        full = (s1 - s0) // 32
        for w in range(full):
            signs[s0 // 32 + w] = signed_code_bits32(x, exps, s0 + 32 * w)
        if s0 + 32 * full < s1:   # the last, partial word
            acc = _U(0)
            for i in range(s0 + 32 * full, s1):   # on the bits, as signed_code_bits32 (no DAZ)
                if wide:
                    b = xb[i]
                    sg = ((b >> _U64(63)) != _U64(0) and exps[i] != 0) or (b & _U64(0x7FFFFFFFFFFFFFFF)) > \
                        _U64(0x7FF0000000000000)
                else:
                    b = _U(xb[i])
                    sg = ((b >> _U(31)) != _U(0) and exps[i] != 0) or _U(b & _U(0x7FFFFFFF)) > _U(0x7F800000)
                if sg:
                    acc |= _U(1) << _U(i - s0 - 32 * full)
            signs[s0 // 32 + full] = acc


@numba.njit(cache=True, parallel=True)
def _pack_parallel(xb, x, wide, k0, k1, signs, exps):
    a, b, c = key_schedule(k0, k1)
    nblk = (signs.size + WORDS - 1) // WORDS
    for blk in numba.prange(nblk):
        hw = np.empty(SUB + 2, np.uint32)
        _pack_block(xb, x, wide, a, b, c, blk * WORDS, min(signs.size, blk * WORDS + WORDS), signs, exps, hw)


@numba.njit(cache=True, nogil=True)
def pack_into(xb, x, wide, k0, k1, signs, words):
    """``natural_pack`` of x (bits xb) into the sign words and the exponent words."""
    exps = words.view(np.uint8)
    if xb.size >= PARALLEL_MIN:
        _pack_parallel(xb, x, wide, k0, k1, signs, exps)
    elif xb.size:
        a, b, c = key_schedule(k0, k1)
        _pack_block(xb, x, wide, a, b, c, 0, signs.size, signs, exps, np.empty(SUB + 2, np.uint32))
    for j in range(xb.size, exps.size):  # the unused bytes of the last exponent word
        exps[j] = 0


def natural_pack(x: np.ndarray, key) -> tuple[np.ndarray, np.ndarray]:
    """``Fused.natural_pack`` of a contiguous 1-D float32/float64 array; key uint32[2]."""
    n = x.size
    signs = np.empty(-(-n // 32), np.uint32)
    words = buffers.empty(-(-n // 4), np.uint32)
    bits = x.view(np.uint64 if x.dtype == np.float64 else np.uint32)
    pack_into(bits, x, x.dtype == np.float64, _U(key[0]), _U(key[1]), signs, words)
    return signs, words


@numba.njit(cache=True, nogil=True)
def _unpack_block(signs, exps, w0, w1, out):
    i0 = w0 * 32
    i1 = min(out.size, w1 * 32)
    os = out[i0:i1]
    es = exps[i0:i1]
    ws = signs[w0:w1]
    full = (i1 - i0) // 32
    for w in range(full):
        v = ws[w]
        for t in range(32):
            s = (v >> _U(t)) & _U(1)
            e = _U(es[w * 32 + t])
            bits = (s << _U(31)) | (e << _U(23))
            os[w * 32 + t] = _U(0x7FC00000) if (s == _U(1)) & (e == _U(0)) else bits
    for t in range(full * 32, i1 - i0):
        s = (ws[full] >> _U(t - full * 32)) & _U(1)
        e = _U(es[t])
        os[t] = _U(0x7FC00000) if (s == _U(1)) & (e == _U(0)) else (s << _U(31)) | (e << _U(23))


@numba.njit(cache=True, parallel=True)
def _unpack_parallel(signs, exps, out):
    nw = (out.size + 31) // 32
    nblk = (nw + WORDS - 1) // WORDS
    for blk in numba.prange(nblk):
        _unpack_block(signs, exps, blk * WORDS, min(nw, blk * WORDS + WORDS), out)


@numba.njit(cache=True, nogil=True)
def unpack_into(signs, words, out):
    """``natural_unpack`` into ``out``, the float32 result's bits (uint32)."""
    exps = words.view(np.uint8)
    if out.size >= PARALLEL_MIN:
        _unpack_parallel(signs, exps, out)
    elif out.size:
        _unpack_block(signs, exps, 0, -(-out.size // 32), out)


def natural_unpack(signs: np.ndarray, words: np.ndarray, count: int) -> np.ndarray:
    """``Fused.natural_unpack`` (contiguous uint32 words holding ``count`` entries)."""
    out = buffers.empty(count, np.float32)
    unpack_into(signs, words, out.view(np.uint32))
    return out
