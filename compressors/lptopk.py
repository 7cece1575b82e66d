"""Top-k with a compact wire format: low-precision values, gap-coded indices.

    S = the k = ceil(ratio * d) largest |x_i|, as ``topk`` (ties: lowest index)
    C(x)_i = round(x_i) if i in S else 0      round: to fp16 or bf16, nearest even

The selection is top-k's; only the payload shrinks, from 32 + 32 bits per
entry (fp32 value, int32 index) to 16 bits per value plus either an int32
index or, with ``indices="delta"``, about 2 + log2(d/k) bits per index.
Biased; gather-only like topk (each worker has its own S). fp16 values are
clipped to +-65504 where finite (a large gradient stays finite, and under
``ef(...)`` the excess stays in the residual); NaN and +-inf are selected
first and sent as they are, so they decode non-finite.

Delta code (Elias 1974; Fano 1971), static size for static (d, k). With S
sorted, i_0 < i_1 < ... < i_{k-1}, and L low bits per index:

    low_j = i_j mod 2**L                     k codes of L bits (pack_bits)
    B     = M = k + ((d - 1) >> L) bits, bit (i_j >> L) + j set, the rest 0
            (pack_bits, 1 bit each): the high parts i_j >> L in unary, the
            zeros between two ones being the gap between their high parts
    decode: p_j = position of the j-th one of B (nonzero);
            i_j = ((p_j - j) << L) | low_j

L in [1, 16] is the one that puts the fewest uint32 words on the wire
(close to log2(d/k)); ``code_size(d, k)`` gives it. Every bit of B is
distinct because the i_j are, so B has exactly k ones.

Wire format (indices="int32"): values fp16/bf16[k], indices int32[k]
(increasing). (indices="delta"): values fp16/bf16[k], low uint32[words(k, L)],
high uint32[words(M, 1)]. No state.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from compressors.core import Compressor, Law, Leaf, check, mean_of, single_round, upcast, words
from compressors.registry import canonical, register
from compressors.topk import densify, keep_count, topk_leaf

WIRE = {"fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}
INDEX_CODES = ("int32", "delta")
FP16_MAX = 65504.0


def code_size(d: int, k: int) -> tuple[int, int]:
    """(L, M) of the delta code of k indices below d: low bits per index and
    bits of the high vector, L minimising the words sent."""
    def total(low):
        return words(k, low) + words(k + ((d - 1) >> low), 1)

    low = min(range(1, 17), key=lambda b: (total(b), b))
    return low, k + ((d - 1) >> low)


def index_bits(d: int, k: int, indices: str) -> int:
    if indices == "int32":
        return 32 * k
    low, m = code_size(d, k)
    return 32 * (words(k, low) + words(m, 1))


def _to_wire(ops, values, wire):
    if wire == WIRE["fp16"]:
        wide = upcast(ops, values)
        clipped = ops.minimum(ops.maximum(wide, -FP16_MAX), FP16_MAX)
        values = ops.where(ops.isfinite(wide), clipped, wide)
    return ops.astype(values, wire)


def encode_indices(ops, idx, d: int, k: int):
    """(low words, high words) of increasing int32 indices below d."""
    low, m = code_size(d, k)
    u = ops.astype(idx, np.uint32)
    lows = u & ops.asarray(np.uint32((1 << low) - 1))
    at = ops.astype(u >> ops.asarray(np.uint32(low)), np.int32) + ops.arange(k)
    ones = ops.scatter_add(m, at, ops.full((k,), 1, np.int32))
    return ops.pack_bits(lows, low), ops.pack_bits(ops.astype(ones, np.uint32), 1)


def decode_indices(ops, lows, highs, d: int, k: int, n: int = 1):
    """The int32 indices of n workers' codes, their words concatenated
    (lows: n * words(k, L), highs: n * words(M, 1)), worker after worker."""
    low, m = code_size(d, k)
    per_low, per_high = words(k, low) * (32 // low), words(m, 1) * 32
    t = ops.arange(n * k)
    j, w = t % k, t // k  # entry j of worker w
    ones = ops.nonzero(ops.unpack_bits(highs, 1, n * per_high) > 0, n * k)
    high = ones - w * per_high - j
    low_codes = ops.gather(ops.unpack_bits(lows, low, n * per_low), w * per_low + j)
    u = (ops.astype(high, np.uint32) << ops.asarray(np.uint32(low))) | low_codes
    return ops.astype(u, np.int32)


def _lptopk_leaf(ratio: float, wire, indices: str, shape) -> Leaf:
    d = math.prod(shape)
    k = keep_count(ratio, d)
    if k == 0:
        return topk_leaf(ratio)  # an empty tensor sends nothing, as topk

    def compress(ops, x, state, keys):
        flat = ops.reshape(x, (-1,))
        idx = ops.top_k_abs(flat, k)
        vals = _to_wire(ops, ops.gather(flat, idx), wire)
        if indices == "int32":
            return (vals, idx), state
        return (vals, *encode_indices(ops, idx, d, k)), state

    def unpack(ops, payload, n):
        """(values, int32 indices) of n workers' payloads, flattened."""
        flat = [ops.reshape(p, (-1,)) for p in payload]
        if indices == "int32":
            return flat[0], flat[1]
        return flat[0], decode_indices(ops, flat[1], flat[2], d, k, n)

    def decompress(ops, payload, x):
        vals, idx = unpack(ops, payload, 1)
        return densify(ops, (ops.astype(vals, x.dtype), idx), x)

    def aggregate(ops, received, x, n):
        vals, idx = unpack(ops, received, n)
        return mean_of(ops, densify(ops, (ops.astype(vals, x.dtype), idx), x), n)

    return single_round(law=Law.GATHER, compress=compress, decompress=decompress, aggregate=aggregate,
                        bits=lambda s, dt: k * wire.itemsize * 8 + index_bits(d, k, indices))


@register("lptopk", paper="Aji & Heafield 2017 (top-k); Elias 1974, Fano 1971 (index code)")
def lptopk(ratio: float = 0.01, values: str = "bf16", indices: str = "delta") -> Compressor:
    """Top-k with fp16/bf16 values and int32 or delta-coded (Elias-Fano) indices (biased)."""
    check(isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and 0 < ratio <= 1,
          f"lptopk: ratio must be in (0, 1], got {ratio!r}")
    check(isinstance(values, str) and values in WIRE, f"lptopk: values must be one of {', '.join(map(repr, WIRE))}, got {values!r}")
    check(isinstance(indices, str) and indices in INDEX_CODES, f"lptopk: indices must be one of {', '.join(map(repr, INDEX_CODES))}, "
                                  f"got {indices!r}")
    spec = canonical("lptopk", ratio=ratio, values=values, indices=indices)
    return Compressor(spec, lambda shape, dtype: _lptopk_leaf(float(ratio), WIRE[values], indices, shape),
                      doc="top-k, fp16/bf16 values, compact indices")
