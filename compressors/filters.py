"""Leaf filters: leave small tensors uncompressed (biases, norms, scalars).

    C'(x) = x      if size(x) < min_size or ndim(x) < min_ndim
            C(x)   otherwise

The choice depends only on the static shape, so it is part of the plan.
"""
from __future__ import annotations

import math

from compressors.combinator import wrapping
from compressors.core import Compressor, check
from compressors.identity import IDENTITY_LEAF
from compressors.registry import canonical, register


@register("filter", combinator=True, paper="Vogels et al. 2019 (PowerSGD skips vectors)")
def leaf_filter(inner: Compressor, min_size: int = 0, min_ndim: int = 0) -> Compressor:
    """Send tensors smaller than min_size elements or with ndim < min_ndim dense."""
    check(isinstance(min_size, int) and min_size >= 0, f"filter: min_size must be an int >= 0, got {min_size!r}")
    check(isinstance(min_ndim, int) and min_ndim >= 0, f"filter: min_ndim must be an int >= 0, got {min_ndim!r}")

    def wrap(leaf, shape, dtype):
        if math.prod(shape) < min_size or len(shape) < min_ndim:
            return IDENTITY_LEAF
        return leaf

    spec = canonical("filter", inner=inner, min_size=min_size, min_ndim=min_ndim).replace("inner=", "")
    return wrapping(spec, inner, wrap, lambda c: leaf_filter(c, min_size, min_ndim),
                    unbiased=inner.unbiased, contractive=inner.contractive, doc="leaf filter")
