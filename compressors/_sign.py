"""Sign bits on the wire: 1 bit per element, bit = 1 where x < 0.

A zero or NaN entry gets bit 0 (+1). Scale-free sign compressors also send a
float32 *vote weight*: 1 for a tensor with a nonzero entry, 0 for an
all-zero tensor (it abstains, so zero gradients decode to zeros), and NaN if
any entry is NaN or +-inf (``sum(x * 0)``), so a non-finite gradient decodes
to NaN instead of a silently finite sign vector.
"""
from __future__ import annotations

import math

import numpy as np

from compressors.core import upcast, words


def pack_signs(ops, x):
    flat = ops.reshape(x, (-1,))
    codes = ops.astype(flat < 0, np.uint32)
    return ops.pack_bits(codes, 1)


def unpack_signs(ops, packed, x, dtype):
    """+1/-1 in ``dtype``, shaped like x."""
    bits = ops.unpack_bits(packed, 1, x.size)
    pm = ops.full((x.size,), 1.0, dtype) - ops.astype(bits, dtype) * 2.0
    return ops.reshape(pm, x.shape)


def vote_weight(ops, x):
    """1.0 (some entry nonzero), 0.0 (all zero) or NaN (non-finite), float32 scalar."""
    flat = ops.reshape(upcast(ops, x), (-1,))
    nonzero = ops.where(ops.sum(ops.abs(flat)) > 0, 1.0, 0.0)
    return ops.astype(nonzero + ops.sum(flat * 0.0), np.float32)


def sign_bits(shape) -> int:
    return words(math.prod(shape), 1) * 32
