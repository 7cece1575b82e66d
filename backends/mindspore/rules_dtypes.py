"""Dtype predicates of the lowering rules, by dtype name (bf16 included), and
the NaN test, which for bf16 goes through float32 (MindSpore's CPU kernels
mostly lack bf16).
"""
from __future__ import annotations

import numpy as np

INT_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


def is_int(dt) -> bool:
    return np.dtype(dt).name in INT_DTYPES


def is_float(dt) -> bool:
    return np.dtype(dt).name in ("float16", "float32", "float64", "bfloat16")


def isnan(em, x, dt):
    return f"ops.isnan(ops.cast({x}, ms.float32))" if np.dtype(dt).name == "bfloat16" else f"ops.isnan({x})"
