"""Constants and checks every backend binding shares (semantics live in compressors.ops)."""
from __future__ import annotations

import numpy as np

UNIFORM_ONE_BITS = np.uint32(0x3F800000)  # bit pattern of float32 1.0


def int_bounds(dtype) -> tuple[float, float]:
    """(lowest, highest) of an integer dtype, as float64."""
    info = np.iinfo(dtype)
    return float(info.min), float(info.max)


def is_float(dtype) -> bool:
    d = np.dtype(dtype)
    return np.issubdtype(d, np.floating) or d.name == "bfloat16"


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def check_bits(bits: int) -> None:
    if not 1 <= bits <= 32:
        raise ValueError(f"pack_bits: bits must be in 1..32, got {bits}")
