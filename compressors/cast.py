"""Low-precision floats: C(x) = cast_fp16(x) or cast_bf16(x); summable.

Deterministic rounding to nearest even; float16 saturates to +-inf beyond
65504 (the real behaviour of an fp16 all-reduce), bf16 keeps fp32's range.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from compressors.core import Compressor, Law, Leaf, fixed, single_round
from compressors.registry import register


def _cast_leaf(wire_dtype) -> Leaf:
    wire = np.dtype(wire_dtype)
    return single_round(
        law=Law.SUM,
        bits=lambda shape, dtype: math.prod(shape) * wire.itemsize * 8,
        compress=lambda ops, x, state, keys: (ops.astype(x, wire), state),
        decompress=lambda ops, payload, x: ops.astype(payload, x.dtype),
    )


@register("fp16", paper="Micikevicius et al. 2018 (mixed precision)")
def fp16() -> Compressor:
    """Cast to IEEE half precision (2x vs fp32); summable."""
    return Compressor("fp16()", fixed(_cast_leaf(np.float16)), doc="half-precision cast")


@register("bf16", paper="Kalamkar et al. 2019")
def bf16() -> Compressor:
    """Cast to bfloat16 (2x vs fp32, fp32's exponent range); summable."""
    return Compressor("bf16()", fixed(_cast_leaf(ml_dtypes.bfloat16)), doc="bfloat16 cast")
