"""Per-bucket min / max (``Fused.bucket_min_max``) as one Numba pass on all
cores: every bucket is cut into pieces of at most ``PIECE`` entries, each
reduced on integer total-order keys of the floats' bits (integer min/max
vectorizes, float min/max does not without fastmath), then combined per
bucket, NaN winning.
"""
from __future__ import annotations

import numba
import numpy as np

PIECE = 1 << 16  # elements per partial reduction of bucket_min_max


@numba.njit(cache=True, nogil=True)
def min_max_range(xi, s, e):
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
            pmin[p], pmax[p] = min_max_range(xi, s, min(end, s + L))
        else:  # an empty piece repeats the bucket's last entry
            pmin[p], pmax[p] = min_max_range(xi, end - 1, end)


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


SIGNED = {np.dtype(np.float32): (np.int32, 0x7F800000, -0x7F800001),
           np.dtype(np.float64): (np.int64, 0x7FF0000000000000, -0x7FF0000000000001)}
"""float dtype -> (its signed bits, the key of +inf, the key of -inf)."""


@numba.njit(cache=True, nogil=True)
def min_max_into(xi, B, lo_nan, hi_nan, mins, maxs):
    """Per-bucket (min, max) keys of x's signed bits ``xi`` (buckets of B) into mins, maxs."""
    ppb = -(-B // PIECE)
    L = -(-B // ppb)
    pmin = np.empty(mins.size * ppb, xi.dtype)
    pmax = np.empty(mins.size * ppb, xi.dtype)
    _min_max_pieces(xi, B, ppb, L, pmin, pmax)
    _min_max_combine(ppb, pmin, pmax, lo_nan, hi_nan, mins, maxs)


def bucket_min_max(x: np.ndarray, bucket: int) -> tuple[np.ndarray, np.ndarray]:
    """``Fused.bucket_min_max`` of a contiguous 1-D float32/float64 array (size >= 1)."""
    n = x.size
    B = bucket or n
    nb = -(-n // B)
    signed, inf_key, neg_inf_key = SIGNED[x.dtype]
    mins = np.empty(nb, signed)
    maxs = np.empty(nb, signed)
    min_max_into(x.view(signed), B, signed(neg_inf_key), signed(inf_key), mins, maxs)
    return mins.view(x.dtype), maxs.view(x.dtype)
