"""``Fused.minmax_quantize_pack`` — min-max scales and stochastic rounding of each
bucket in one read of the gradient — as one Numba pass on all cores.

Each bucket (B entries, a whole number of code words, at most ``MAX_BUCKET`` so that
it stays in L2) is read twice while it is in cache: once for its min and max (the
total-order keys of ``fused_minmax``, NaN winning), once to round it with
``fused_quant``'s rounding loop. The scales are computed between the two in the
composition's order and float32 roundings::

    lo = min + 0.0,  step = max((max - lo) * f32(1 / top), 2^-126),  inv = max(1 / step, 2^-126)

(``maximum`` keeps a NaN). Buckets that are not a whole number of code words,
shorter than ``MIN_BUCKET`` or longer than ``MAX_BUCKET`` take the composition's three
kernels instead (:func:`applies`).
"""
from __future__ import annotations

import numba
import numpy as np

from backends.numpy import buffers
from backends.numpy.blocks import PARALLEL_MIN
from backends.numpy.fused_minmax import min_max_range
from backends.numpy.intrinsics import bits_f32
from backends.numpy.fused_quant import round_codes
from backends.numpy.packing import pack_codes
from backends.numpy.threefry import fill_words, key_schedule

_U = np.uint32
MAX_BUCKET = 1 << 16
# Shorter buckets take the three kernels: per bucket the pass pays a threefry loop, a min/max loop
# and a rounding loop too short to run at speed (25M float32, ad hoc: 8-bit codes in buckets of
# 64 16.5 ms against 11.5, of 256 9.3 against 9.0, of 512 8.2 against 8.7; 4-bit of 512 8.6
# against 12.3).
MIN_BUCKET = 512
TINY = np.float32(2.0**-126)
NAN_KEY = np.int32(0x7F800001)   # fused_minmax's NaN: the key (and bits) of the +NaN it returns
INF_KEY, NEG_INF_KEY = np.int32(0x7F800000), np.int32(-0x7F800001)
TASK_ENTRIES = 1 << 14   # entries per parallel task (whole buckets; scratch allocated once per task)


def applies(x: np.ndarray, bucket: int, bits: int) -> bool:
    """Whether the one-pass kernel takes this call: float32, buckets of whole code words of
    MIN_BUCKET to MAX_BUCKET entries (a one-bucket array of fewer entries too)."""
    B = int(bucket) or x.size
    return (x.dtype == np.float32 and x.size > 0 and B % (32 // int(bits)) == 0 and B <= MAX_BUCKET
            and (B >= MIN_BUCKET or B >= x.size))


@numba.njit(cache=True, nogil=True, inline="always")
def _floored(v):
    return v if (v != v or v > TINY) else TINY


@numba.njit(cache=True, nogil=True)
def _bucket(x, xi, i0, i1, top, inv_top, bits, out, los, steps, bk, hs, codes):
    """Scales of bucket bk (entries [i0, i1), i0 a multiple of 32 // bits) and its codes;
    ``hs``: its 16-bit uniforms (the halves of its threefry words)."""
    mn, mx = min_max_range(xi, i0, i1)
    if mn < NEG_INF_KEY or mx > INF_KEY:
        mn = NAN_KEY
        mx = NAN_KEY
    low = np.int32(0x7FFFFFFF)
    fmin = bits_f32(mn ^ ((mn >> np.int32(31)) & low))   # the key map is its own inverse
    fmax = bits_f32(mx ^ ((mx >> np.int32(31)) & low))
    lo = fmin + np.float32(0.0)
    step = _floored((fmax - lo) * inv_top)
    inv = _floored(np.float32(1.0) / step)
    los[bk] = lo
    steps[bk] = step
    per = 32 // bits
    if bits == 8:
        narrow8 = out.view(np.uint8)
        round_codes(x[i0:i1], lo, inv, top, bits, False, hs, narrow8[i0:i1])
        narrow8[i1:((i1 + per - 1) // per) * per] = 0
    elif bits == 16:
        narrow16 = out.view(np.uint16)
        round_codes(x[i0:i1], lo, inv, top, bits, False, hs, narrow16[i0:i1])
        narrow16[i1:((i1 + per - 1) // per) * per] = 0
    else:
        round_codes(x[i0:i1], lo, inv, top, bits, False, hs, codes[:i1 - i0])
        pack_codes(codes, i1 - i0, bits, out, i0 // per)


@numba.njit(cache=True, nogil=True)
def _task(x, xi, B, b0, b1, top, inv_top, bits, a, b, c, out, los, steps, codes, hw):
    """Buckets [b0, b1): their threefry words in one pass, then bucket by bucket."""
    h16 = hw.view(np.uint16)
    for bk in range(b0, b1):
        i0 = bk * B
        i1 = min(x.size, i0 + B)
        m0 = i0 >> 1
        fill_words(a, b, c, m0, (i1 + 1) >> 1, hw)   # from word 2·(m0 // 2)
        ub = 4 * (m0 >> 1)
        _bucket(x, xi, i0, i1, top, inv_top, bits, out, los, steps, bk, h16[i0 - ub:i1 - ub], codes)


@numba.njit(cache=True, parallel=True)
def run_parallel(x, B, top, inv_top, bits, k0, k1, out, los, steps):
    a, b, c = key_schedule(k0, k1)
    xi = x.view(np.int32)
    nb = los.size
    g = max(1, TASK_ENTRIES // B)   # buckets per task
    for t in numba.prange((nb + g - 1) // g):
        codes = np.empty(B, np.uint16)
        hw = np.empty(B // 2 + 3, np.uint32)
        _task(x, xi, B, t * g, min(nb, t * g + g), top, inv_top, bits, a, b, c, out, los, steps, codes, hw)


@numba.njit(cache=True, nogil=True)
def run_serial(x, B, top, inv_top, bits, k0, k1, out, los, steps):
    a, b, c = key_schedule(k0, k1)
    nb = los.size
    _task(x, x.view(np.int32), B, 0, nb, top, inv_top, bits, a, b, c, out, los, steps, np.empty(B, np.uint16),
          np.empty(B // 2 + 3, np.uint32))


def minmax_quantize_pack(x: np.ndarray, bucket: int, top: float, bits: int, key) -> tuple:
    """``Fused.minmax_quantize_pack`` of a contiguous 1-D float32 array that :func:`applies`."""
    n = x.size
    B = bucket or n
    nb = -(-n // B)
    out = buffers.empty(-(-n // (32 // bits)), np.uint32)
    los = np.empty(nb, np.float32)
    steps = np.empty(nb, np.float32)
    run = run_parallel if n >= PARALLEL_MIN else run_serial
    run(x, B, np.float32(top), np.float32(1.0 / top), int(bits), _U(key[0]), _U(key[1]), out, los, steps)
    return out, los, steps
