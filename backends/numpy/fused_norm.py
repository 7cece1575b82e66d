"""``Fused.bucket_norm`` as one Numba pass: each bucket is read once into a
row buffer (|v| max, then the exactly scaled squares), summed there in the
halving order; buckets run on all cores from ``PARALLEL_MIN`` entries.
Buckets longer than ``ROW_MAX`` take the composition (its passes use the
one-pass 1-D sum kernel).
"""
from __future__ import annotations

import math

import numba
import numpy as np

from backends.numpy.blocks import PARALLEL_MIN

ROW_MAX = 1 << 16  # longest bucket the kernel takes (its row buffer stays in L2)


@numba.njit(cache=True, nogil=True)
def _row_norm(x, lo, hi, P, buf):
    """The norm of x[lo:hi] zero-padded to P = next_pow2(B) entries."""
    t = x.dtype.type
    m = t(0)
    nan = False
    for i in range(lo, hi):
        a = abs(x[i])
        nan |= a != a
        m = a if a > m else m
    if nan or m == t(np.inf):
        return t(np.nan)
    m = m if m > t(2.0**-126) else t(2.0**-126)
    f, e = math.frexp(float(m))  # m = f * 2**e exactly
    p = t(2.0 ** -e)  # exact in x's dtype (at worst subnormal): v * p is ldexp(v, -e)
    r = t(1) / t(f)
    w = hi - lo
    for i in range(w):
        s = (x[lo + i] * p) * r
        buf[i] = s * s
    for i in range(w, P):
        buf[i] = t(0)
    h = P
    while h > 1:
        h //= 2
        for c in range(h):
            buf[c] = buf[c] + buf[c + h]
    return m * np.sqrt(buf[0])


@numba.njit(cache=True, nogil=True)
def _norms(x, B, P, b0, b1, out):
    buf = np.empty(P, x.dtype)
    for b in range(b0, b1):
        out[b] = _row_norm(x, b * B, min(x.size, (b + 1) * B), P, buf)


@numba.njit(cache=True, parallel=True)
def _norms_parallel(x, B, P, out):
    per = max(1, 16384 // B)  # buckets per task
    for t in numba.prange((out.size + per - 1) // per):
        _norms(x, B, P, t * per, min(out.size, (t + 1) * per), out)


def applies(x, bucket: int) -> bool:
    b = bucket if 0 < bucket < x.size else x.size
    return 0 < b <= ROW_MAX


def bucket_norm(x: np.ndarray, bucket: int) -> np.ndarray:
    """Norms of the buckets of a contiguous 1-D float32/float64 array (see :func:`applies`)."""
    B = bucket if 0 < bucket < x.size else x.size
    nb = -(-x.size // B)
    P = 1 << max(B - 1, 0).bit_length()
    out = np.empty(nb, x.dtype)
    if x.size >= PARALLEL_MIN and nb > 1:
        _norms_parallel(x, B, P, out)
    else:
        _norms(x, B, P, 0, nb, out)
    return out
