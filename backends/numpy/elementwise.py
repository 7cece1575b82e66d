"""Elementwise Numba kernels of the NumPy binding: ``sign`` and the
branch-free select behind ``where`` (both vectorized by LLVM).
"""
from __future__ import annotations

import numba


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
