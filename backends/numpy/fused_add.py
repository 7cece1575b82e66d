"""Error feedback's full-size sums (``Fused.add``): ``a + b`` as one Numba
pass on all cores (NumPy's operators run on one), from
``ROWS_PARALLEL_MIN`` entries (the binding's threshold).
"""
from __future__ import annotations

import numba
import numpy as np

from backends.numpy import buffers


@numba.njit(cache=True, parallel=True)
def _add_parallel(a, b, out, parts):
    m = out.size
    for p in numba.prange(parts):
        s = (m * p) // parts
        e = (m * (p + 1)) // parts
        xa = a[s:e]
        xb = b[s:e]
        o = out[s:e]
        for i in range(e - s):
            o[i] = xa[i] + xb[i]


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` of two contiguous arrays of one shape and float dtype, on all cores."""
    out = buffers.empty(a.shape, a.dtype)
    _add_parallel(a.reshape(-1), b.reshape(-1), out.reshape(-1), 4 * numba.get_num_threads())
    return out
