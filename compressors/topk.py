"""Top-k sparsification (Aji & Heafield 2017; Stich et al. 2018).

    k = max(1, ceil(ratio * d))
    S = indices of the k largest |x_i|   (ties: lowest index)
    C(x)_i = x_i if i in S else 0

Biased, delta-contraction with delta = k/d. Gather-only: each worker picks
its own S. Payload: k values (x's dtype) + k int32 indices.
"""
from __future__ import annotations

import math

from compressors.core import Compressor, Law, check, dtype_bits, fixed, mean_of, single_round
from compressors.registry import canonical, register


def sparse_bits(k: int, dtype) -> int:
    return k * (dtype_bits(dtype) + 32)


def keep_count(ratio: float, d: int) -> int:
    return min(d, max(1, math.ceil(ratio * d))) if d else 0


def densify(ops, payload, x):
    """Scatter (values, indices) back into x's shape; sentinel indices drop."""
    values, idx = payload
    return ops.reshape(ops.scatter_add(x.size, idx, values), x.shape)


def densify_mean(ops, received, x, n):
    """Mean of n gathered sparse payloads with one scatter of all n*k pairs."""
    values, idx = received
    total = ops.scatter_add(x.size, ops.reshape(idx, (-1,)), ops.reshape(values, (-1,)))
    return mean_of(ops, ops.reshape(total, x.shape), n)


def sparse_leaf(compress, ratio: float, init=None):
    """One gather round whose payload is (values, int32 indices) of
    ``keep_count(ratio, d)`` entries, sentinel-padded: top-k, threshold, DGC."""
    return single_round(
        law=Law.GATHER,
        bits=lambda shape, dtype: sparse_bits(keep_count(ratio, math.prod(shape)), dtype),
        compress=compress,
        decompress=densify,
        aggregate=densify_mean,
        init=init,
    )


def topk_leaf(ratio: float):
    def compress(ops, x, state, keys):
        flat = ops.reshape(x, (-1,))
        k = keep_count(ratio, flat.size)
        if k == 0:
            return (flat, ops.zeros((0,), "int32")), state
        idx = ops.top_k_abs(flat, k)
        return (ops.gather(flat, idx), idx), state

    def residual(ops, x, state, own, received):
        # x - densify(own): the sent values are x's own, so clearing them is the same bits
        return ops.clear_at(x, own[0][1])

    return sparse_leaf(compress, ratio)._replace(residual=residual)


@register("topk", paper="Aji & Heafield 2017; Stich et al. 2018")
def topk(ratio: float = 0.01) -> Compressor:
    """Keep the k = ceil(ratio*d) largest-magnitude entries (biased, contraction k/d)."""
    check(isinstance(ratio, (int, float)) and 0 < ratio <= 1, f"topk: ratio must be in (0, 1], got {ratio!r}")
    return Compressor(canonical("topk", ratio=ratio), fixed(topk_leaf(float(ratio))), contractive=True,
                      doc="top-k sparsification")
