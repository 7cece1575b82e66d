"""``Fused.bucket_norm`` as one Numba pass: each bucket is read once into a
row buffer (|v| max, then the exactly scaled squares), summed there in the
halving order; buckets run on all cores from ``PARALLEL_MIN`` entries.
The max of |v| is taken on the floats' bits with the sign cleared, as
integers: they order as the magnitudes do (a NaN above +inf), and an
integer max vectorizes where a float one, with its NaN rule, does not.
Buckets longer than ``ROW_MAX`` (QSGD's ``bucket=0``: one bucket of the
whole tensor) run bucket by bucket in two threaded passes: the max of |v|
from ``bucket_min_max``'s kernel, then the scaled squares ``(v * (2**-e / f))**2`` written once and
summed by the one-pass 1-D halving-sum kernel. ``v * (2**-e * (1/f))`` has
the bits of the composition's ``ldexp(v, -e) * (1/f)``: 2**-e * (1/f) is
exact for e < 100, and v * 2**-e is exact unless it is subnormal, when its
square is +0 either way. A bucket with e >= 100 (max |v| >= 2**99) takes
the composition.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from backends.numpy.blocks import PARALLEL_MIN
from backends.numpy.fused_minmax import SIGNED, bucket_min_max
from backends.numpy.sums import sum_halving

ROW_MAX = 1 << 16  # longest bucket the kernel takes (its row buffer stays in L2)


@numba.njit(cache=True, nogil=True, inline="always")
def _row_norm(x, xi, lo, hi, P, buf, inf_bits, key, kf):
    """The norm of x[lo:hi] (hi > lo) zero-padded to P = next_pow2(B) entries;
    xi: x's bits as signed integers, inf_bits: those of +inf; key/kf: one
    integer and its float view (scratch)."""
    t = x.dtype.type
    it = xi.dtype.type
    mask = it(inf_bits | (inf_bits - it(1)))  # 0x7F..F: every bit but the sign
    seg = xi[lo:hi]
    mi = it(seg[0] & mask)
    for i in range(hi - lo):  # from 0 over a slice: no negative-index check, so it vectorizes
        mi = max(mi, it(seg[i] & mask))
    if mi >= inf_bits:  # a NaN or an infinity
        return t(np.nan)
    key[0] = mi
    m = kf[0]
    m = m if m > t(2.0**-126) else t(2.0**-126)
    f, e = math.frexp(float(m))  # m = f * 2**e exactly
    # v * 2**-e is ldexp(v, -e), exact; from e = 100 in two normal factors (2**-e alone is
    # subnormal for e > 126 in float32: a thread that flushes subnormals, as MindSpore's
    # kernel threads do, would make it 0 and the norm of a bucket holding 3e38 zero)
    h1 = e // 2 if e >= 100 else 0
    p1 = t(2.0 ** -h1)
    p = t(2.0 ** -(e - h1))
    r = t(1) / t(f)
    w = hi - lo
    xs = x[lo:hi]
    for i in range(w):  # every loop from 0 over slices: no negative-index check, so they vectorize
        s = ((xs[i] * p1) * p) * r
        buf[i] = s * s
    pad = buf[w:P]
    for i in range(P - w):
        pad[i] = t(0)
    h = P
    while h > 1:
        h //= 2
        a = buf[:h]
        b = buf[h:2 * h]
        for c in range(h):
            a[c] = a[c] + b[c]
    return m * np.sqrt(buf[0])


@numba.njit(cache=True, nogil=True)
def _norms(x, xi, inf_bits, B, P, b0, b1, out):
    buf = np.empty(P, x.dtype)
    key = np.empty(1, xi.dtype)
    kf = key.view(x.dtype)
    for b in range(b0, b1):
        out[b] = _row_norm(x, xi, b * B, min(x.size, (b + 1) * B), P, buf, inf_bits, key, kf)


@numba.njit(cache=True, parallel=True)
def _norms_parallel(x, xi, inf_bits, B, P, out):
    per = max(1, 16384 // B)  # buckets per task
    for t in numba.prange((out.size + per - 1) // per):
        _norms(x, xi, inf_bits, B, P, t * per, min(out.size, (t + 1) * per), out)


@numba.njit(cache=True, parallel=True)
def _scaled_squares(x, s, out):
    for i in numba.prange(x.size):
        w = x[i] * s
        out[i] = w * w


def long_buckets(x: np.ndarray, bucket: int) -> np.ndarray | None:
    """Norms of a contiguous 1-D float32/float64 array whose buckets are longer than
    ``ROW_MAX`` (None where one of them needs the composition: max |v| >= 2**99). Max |v|
    per bucket is max(-min, max) of the threaded ``bucket_min_max`` kernel (NaN when the
    bucket holds one)."""
    B = bucket if 0 < bucket < x.size else x.size
    mins, maxs = bucket_min_max(x, B)
    out = np.empty(mins.size, x.dtype)
    t = x.dtype.type
    for b in range(out.size):
        m = max(-mins[b], maxs[b])
        if not np.isfinite(m):  # a NaN or an infinity
            out[b] = t(np.nan)
            continue
        m = max(m, t(2.0**-126))
        f, e = np.frexp(m)
        if e >= 100:
            return None
        seg = x[b * B:(b + 1) * B]
        squares = np.empty_like(seg)
        _scaled_squares(seg, t(2.0**-int(e)) * (t(1) / f), squares)
        out[b] = m * np.sqrt(sum_halving(squares, 0))
    return out


def bits_of(x: np.ndarray):
    """(x's bits as signed integers, the bits of +inf in that type)."""
    it, inf_key, _ = SIGNED[x.dtype]
    return x.view(it), it(inf_key)


def applies(x, bucket: int) -> bool:
    b = bucket if 0 < bucket < x.size else x.size
    return 0 < b <= ROW_MAX


def bucket_norm(x: np.ndarray, bucket: int) -> np.ndarray:
    """Norms of the buckets of a contiguous 1-D float32/float64 array (see :func:`applies`)."""
    B = bucket if 0 < bucket < x.size else x.size
    nb = -(-x.size // B)
    P = 1 << max(B - 1, 0).bit_length()
    out = np.empty(nb, x.dtype)
    xi, inf_bits = bits_of(x)
    if x.size >= PARALLEL_MIN and nb > 1:
        _norms_parallel(x, xi, inf_bits, B, P, out)
    elif nb:
        _norms(x, xi, inf_bits, B, P, 0, nb, out)
    return out
