"""Array conventions the NumPy binding's modules share: the dtypes its Numba
kernels take, the unsigned type of each width (kernels work on raw bits),
bf16, and the argument coercions of the ops.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}  # raw-bit type of each itemsize
KERNEL_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))  # the Numba kernels' dtypes


def as_array(x) -> np.ndarray:
    """x itself if it is an ndarray, else ``np.asarray(x)``."""
    return x if isinstance(x, np.ndarray) else np.asarray(x)


def vector(x, op: str) -> np.ndarray:
    """x as an ndarray, which must be 1-D (else a ValueError naming ``op``)."""
    x = as_array(x)
    if x.ndim != 1:
        raise ValueError(f"{op}: expects a 1-D array, got shape {x.shape}")
    return x


def compute_float(dtype: np.dtype) -> np.dtype:
    """bf16 goes through float32 for ufuncs ml_dtypes lacks or runs slowly."""
    return np.dtype(np.float32) if dtype == BF16 else dtype
