"""No compression: the dense gradient, summed by all-reduce. C(x) = x."""
from __future__ import annotations

import math

from compressors.core import Compressor, Law, dtype_bits, fixed, single_round
from compressors.registry import register


def _leaf():
    return single_round(
        law=Law.SUM,
        bits=lambda shape, dtype: math.prod(shape) * dtype_bits(dtype),
        compress=lambda ops, x, state, keys: (x, state),
        decompress=lambda ops, payload, x: payload,
    )


IDENTITY_LEAF = _leaf()


@register("none", paper="-")
def none() -> Compressor:
    """No compression (dense all-reduce); the baseline."""
    return Compressor("none()", fixed(IDENTITY_LEAF), unbiased=True, contractive=True,
                      doc="dense all-reduce")
