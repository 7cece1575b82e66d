"""The sign compressors' encoders on the NumPy binding, each one read of x
through the halving-sum kernel (``backends.numpy.sums.term_sums``), which
packs x's sign bits from the same pass: ``Fused.sign_split_sums`` and
``Fused.sign_split_pack`` (1-bit SGD's two means and counts) and
``Fused.sum_abs_pack`` (the scaled sign's L1 norm). Each returns the bits of
its composition (``tests/backends/test_split_sums.py``).
"""
from __future__ import annotations

import numba
import numpy as np

from backends.numpy.sums import ABS, SPLIT_MODES, SUM_PARALLEL_MIN, term_sums


@numba.njit(cache=True, nogil=True)
def split_sums_into(x, s, out, words):
    """out[:5] = ``Fused.sign_split_sums`` of x (2 <= x.size), a NaN sum as +NaN;
    and x's sign bits into ``words`` unless it is empty (``Fused.sign_split_pack``)."""
    out[:] = term_sums(x, x.size >= SUM_PARALLEL_MIN, np.array(SPLIT_MODES), s, words)
    for j in range(out.size):
        if np.isnan(out[j]):
            out[j] = np.nan  # one NaN: its sign bit is the compiler's choice (see Fused.sign_split_sums)


def split_sums(x: np.ndarray, scale: float, signs: bool = False):
    """``Fused.sign_split_sums`` of a 1-D float32/float64 array of at least
    2 * SUM_ROW entries: five sums in one pass over x (threaded for long
    arrays); with ``signs``, ``Fused.sign_split_pack``: (the sums, the sign words)."""
    x = np.ascontiguousarray(x)
    out = np.empty(len(SPLIT_MODES), x.dtype)
    words = np.empty(-(-x.size // 32) if signs else 0, np.uint32)
    split_sums_into(x, x.dtype.type(scale), out, words)
    return (out, words) if signs else out


@numba.njit(cache=True, nogil=True)
def abs_sum_pack_into(x, s, out, words):
    """out[0] = ``Fused.sum_abs(x, s)`` (2 <= x.size) and x's sign bits into
    ``words`` (``Fused.sum_abs_pack``), from one read of x."""
    out[:] = term_sums(x, x.size >= SUM_PARALLEL_MIN, np.array([ABS]), s, words)


def abs_sum_pack(x: np.ndarray, scale: float = 1.0):
    """``Fused.sum_abs_pack`` of a 1-D float32/float64 array of at least
    2 * SUM_ROW entries: (the 0-d sum of |x * scale|, the sign words), one
    pass over x (threaded for long arrays)."""
    x = np.ascontiguousarray(x)
    out = np.empty(1, x.dtype)
    words = np.empty(-(-x.size // 32), np.uint32)
    abs_sum_pack_into(x, x.dtype.type(scale), out, words)
    return out.reshape(()), words
