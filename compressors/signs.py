"""Sign bits on the wire: 1 bit per element, bit = 1 where x < 0.

A zero or NaN entry gets bit 0 (+1). Scale-free sign compressors also send a
float32 *vote weight*: 1 for a tensor with a nonzero entry, 0 for an
all-zero tensor (it abstains, so zero gradients decode to zeros), and NaN if
any entry is NaN or +-inf (``(max - min) * 0``), so a non-finite gradient decodes
to NaN instead of a silently finite sign vector.
"""
from __future__ import annotations

import math

import numpy as np

from compressors.core import upcast, words


def pack_signs(ops, x):
    return ops.pack_signs(ops.reshape(x, (-1,)))


def unpack_signs(ops, packed, x, pos, neg):
    """``neg`` where the sign bit is set, else ``pos`` (0-d arrays of one
    dtype), shaped like x."""
    return ops.reshape(ops.unpack_signs(packed, x.size, pos, neg), x.shape)


def vote_weight(ops, x):
    """1.0 (some entry nonzero), 0.0 (all zero) or NaN (non-finite), float32 scalar."""
    flat = ops.reshape(upcast(ops, x), (-1,))
    if flat.size == 0:
        return ops.zeros((), np.float32)
    lo, hi = ops.bucket_min_max(flat, 0)
    nonzero = ops.where((hi[0] > 0) | (lo[0] < 0), 1.0, 0.0)
    return ops.astype(nonzero + (hi[0] - lo[0]) * 0.0, np.float32)  # (inf or NaN) * 0 = NaN


def sign_bits(shape) -> int:
    return words(math.prod(shape), 1) * 32
