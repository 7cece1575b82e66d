"""Blockwise top-k: top-k inside every block of B consecutive entries.

    x (d entries, flattened) is cut into nb = ceil(d / B) blocks of B entries
    (the last block zero-padded); in every block keep the
    k = min(B, max(1, ceil(ratio * B))) largest |x_i| (ties: lowest index):

    C(x)_i = x_i if i is kept in its block else 0

Contract: biased, and a delta-contraction with delta = k / B: every block
keeps at least k/B of its energy, so ||C(x) - x||^2 <= (1 - k/B) ||x||^2.
Because each block keeps exactly k entries, an entry's position inside its
block fits in b = ceil(log2 B) bits: the payload is nb*k values (x's dtype)
plus nb*k local indices packed 32 // b per uint32 word (plain top-k sends a
32-bit global index per value). Gather law: each worker picks its own entries.
A NaN or +-inf anywhere in x makes every sent value NaN (never silently finite).

This file is notebook 1's compressor (``notebooks/01_prototype_a_compressor.py``
imports it and shows its source); notebooks 2 and 3 import it too.
"""
import math

import numpy as np

import compressors
from compressors.core import Compressor, Law, check, dtype_bits, fixed, single_round, upcast, words


def block_plan(ratio: float, block: int, d: int) -> tuple[int, int, int]:
    """(nb blocks, k kept per block, b bits per local index) for d entries."""
    k = min(block, max(1, math.ceil(ratio * block)))
    return -(-d // block), k, max(1, math.ceil(math.log2(block)))


def reference(x: np.ndarray, ratio: float, block: int) -> np.ndarray:
    """Plain NumPy reference of one worker's round trip: sort each block, keep its k largest
    magnitudes (stable: lowest index first among ties)."""
    nb, k, _ = block_plan(ratio, block, x.size)
    rows = np.concatenate([x.ravel(), np.zeros(nb * block - x.size, x.dtype)]).reshape(nb, block)
    out = np.zeros_like(rows)
    for j in range(nb):
        keep = np.argsort(-np.abs(rows[j]), kind="stable")[:k]
        out[j, keep] = rows[j, keep]
    return out.ravel()[: x.size].reshape(x.shape)


def blockwise_topk_leaf(ratio: float, block: int):
    def select(ops, x):
        """Global indices (block-major, nb*k) of the k largest |x| of every block."""
        d = x.size
        nb, k, _ = block_plan(ratio, block, d)
        flat = ops.pad(ops.reshape(x, (-1,)), nb * block - d)
        a = ops.abs(upcast(ops, ops.reshape(flat, (nb, block))))
        pos = ops.reshape(ops.arange(nb * block), (nb, block))
        last = ops.reshape(ops.arange(nb) * block + (block - 1), (nb, 1))
        chosen = []
        for _ in range(k):  # k passes: take each block's largest, then mask it out
            m = ops.reshape(ops.max(a, axis=1), (nb, 1))
            first = -ops.max(ops.where(a == m, -pos, -nb * block), axis=1)  # lowest index of the max
            g = ops.minimum(ops.reshape(first, (nb, 1)), last)              # (a NaN block has no max)
            a = ops.where(pos == g, -1.0, a)
            chosen.append(g)
        return flat, ops.reshape(ops.concatenate(chosen, axis=1), (-1,))

    def compress(ops, x, state, keys):
        nb, k, b = block_plan(ratio, block, x.size)
        if nb == 0:  # an empty tensor sends nothing
            return (ops.zeros((0,), x.dtype), ops.zeros((0,), np.uint32)), state
        flat, idx = select(ops, x)
        poison = ops.max(ops.abs(flat)) * 0  # NaN if any entry is NaN or inf
        values = ops.gather(flat, idx) + poison
        local = idx - ops.reshape(ops.reshape(ops.arange(nb) * block, (nb, 1)) + ops.zeros((nb, k), np.int32), (-1,))
        return (values, ops.pack_bits(ops.astype(local, np.uint32), b)), state

    def decompress(ops, payload, x):
        values, packed = payload
        nb, k, b = block_plan(ratio, block, x.size)
        if nb == 0:
            return ops.zeros(x.shape, x.dtype)
        local = ops.astype(ops.unpack_bits(packed, b, nb * k), np.int32)
        base = ops.reshape(ops.reshape(ops.arange(nb) * block, (nb, 1)) + ops.zeros((nb, k), np.int32), (-1,))
        return ops.reshape(ops.scatter_add(x.size, local + base, values), x.shape)  # padding indices drop

    def bits(shape, dtype):
        nb, k, b = block_plan(ratio, block, math.prod(shape))
        return nb * k * dtype_bits(dtype) + 32 * words(nb * k, b)

    return single_round(law=Law.GATHER, bits=bits, compress=compress, decompress=decompress)


def blockwise_topk(ratio: float = 0.01, block: int = 256) -> Compressor:
    """Top-k inside each block of `block` entries, local indices bit-packed (biased, contraction k/B)."""
    check(isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and 0 < ratio <= 1,
          f"blockwise_topk: ratio must be in (0, 1], got {ratio!r}")
    check(isinstance(block, int) and not isinstance(block, bool) and 2 <= block <= 2**16,
          f"blockwise_topk: block must be an int in 2..65536, got {block!r}")
    return Compressor(f"blockwise_topk(ratio={ratio!r}, block={block!r})",
                      fixed(blockwise_topk_leaf(float(ratio), block)), contractive=True,
                      doc="blockwise top-k (bit-packed local indices)")


# Register once, so spec strings such as "ef(blockwise_topk(ratio=0.01, block=256))"
# work everywhere (simulated training, the MindSpore launcher); re-running is harmless.
if "blockwise_topk" not in {e.name for e in compressors.entries()}:
    compressors.register("blockwise_topk")(blockwise_topk)
