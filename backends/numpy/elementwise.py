"""Elementwise Numba kernels of the NumPy binding: ``sign`` and the
branch-free select behind ``where`` (both vectorized by LLVM).
"""
from __future__ import annotations

import numba
import numpy as np


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
def _select_range(c8, a, b, out):
    """out = a where c8 else b: the mask 0 - c8 (all ones or zero) picks the bits, so the
    loop has no branch and no bool load and LLVM vectorizes it (a ``cond[i]`` ternary on
    a bool array did not: 30 ms on 25M uint32 against 10 ms, ad hoc)."""
    zero = out.dtype.type(0)
    for i in range(out.size):
        m = zero - out.dtype.type(c8[i])
        out[i] = b[i] ^ ((a[i] ^ b[i]) & m)


@numba.njit(cache=True, parallel=True)
def _select_parallel(c8, a, b, out):
    chunk = 1 << 16
    for j in numba.prange((out.size + chunk - 1) // chunk):
        lo = j * chunk
        hi = min(out.size, lo + chunk)
        _select_range(c8[lo:hi], a[lo:hi], b[lo:hi], out[lo:hi])


PARALLEL_SELECT = 1 << 20  # from this many entries the select runs on all cores


def select(cond, a, b, out):
    """out = a where cond else b, elementwise on equal-length raw-bit (unsigned) arrays;
    cond a bool array (its bytes are 0 or 1)."""
    c8 = cond.view(np.uint8)
    if out.size >= PARALLEL_SELECT:
        _select_parallel(c8, a, b, out)
    else:
        _select_range(c8, a, b, out)
    return out
