"""Indexed reads and writes of the NumPy binding: ``gather`` on raw bits
(out-of-range indices read zero) and ``scatter_add`` in index order
(out-of-range indices drop).
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def gather_bits(x, idx):
    """x[idx] on raw bits; an index outside [0, x.size) reads 0 (all-zero bits)."""
    n = x.size
    out = np.empty(idx.size, x.dtype)
    for i in range(idx.size):
        j = idx[i]
        if 0 <= j < n:
            out[i] = x[j]
        else:
            out[i] = 0  # (not a conditional expression: uint64 vs int would unify to float64)
    return out


@numba.njit(cache=True, nogil=True)
def scatter_add_into(out, idx, vals):
    """out[idx[i]] += vals[i] in order of i; indices outside [0, out.size) drop."""
    n = out.size
    for i in range(idx.size):
        j = idx[i]
        if 0 <= j < n:
            out[j] += vals[i]
    return out
