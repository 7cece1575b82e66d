"""Error-compensated compressed all-reduce: DoubleSqueeze (Tang et al. 2019),
the all-reduce of 1-bit Adam (Tang et al. 2021, DeepSpeed's compressed_allreduce).

Both sides of the exchange compress with error feedback; every worker is the
server of 1/n of the tensor. A tensor of d entries is cut into B blocks of
L entries (zero-padded; L = ``block``, or d rounded up to 32 if smaller), and
C is the scaled sign per block, C(v)_b = s_b · sign(v_b) with
s_b = ||v_b||₂ / √L (1-bit Adam's scale: the blocks' root mean square).

    worker i:   p_i = x_i + e_i;   send C(p_i);   e_i ← p_i − C(p_i)
    all-to-all: worker j receives blocks [jS, (j+1)S) of every C(p_i), S = ⌈B/n⌉
    worker j:   q_j = Σ_i C(p_i)[shard j]/n + ε_j;   send C(q_j);   ε_j ← q_j − C(q_j)
    all-gather: every worker decodes the n shards C(q_0) … C(q_{n−1}): the mean estimate

Wire per worker: (n−1)/n of its B·(L + 32) bits in the all-to-all and its
S blocks in the all-gather — the traffic of a ring all-reduce of the 1-bit
payload, where an all-gather of 1-bit payloads (``efsignsgd``) moves
(n−1) whole payloads. Signs need no summable code: the sum is taken by the
shard's server after decoding.

State per tensor (``DSState``): ``worker`` is e_i (x's shape and dtype;
p_i between the all-to-all and decode, as ``ef`` holds it), ``server`` is
ε_j · 2^-k for this worker's shard (B·L entries of the compute dtype; the
first S·L used: a rank keeps its shard across steps, so the state belongs
to one rank of one worker count). The server works on q_j · 2^-k throughout
(the exact 2^-k rides on the decoded scales), so its norms need no pass of
their own. Zero padding: padded entries of the last block decode
to ±s_b and are dropped at the end (1-bit Adam pads alike). Scales travel as
float32; a block's scale is computed from the block pre-scaled by 2^-k
(2^k ≥ √L, exact), so it is finite for any finite input; a non-finite entry
makes its block's scale NaN, and the decoded block NaN. A block decodes as s + bit·(−2s)
(exactly ±s; the server's 1/n is applied to the scales), so a scale above 2^127 (an RMS of
about 1.7e38, where the server's sum of two workers overflows anyway) decodes to ±inf.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from compressors.core import Compressor, Law, Leaf, Round, check, compute_dtype, upcast, words
from compressors.ops import Array
from compressors.registry import canonical, register


class DSState(NamedTuple):
    """Worker error e_i (x's shape) and this rank's server error ε_j (flat, B·L entries)."""

    worker: Array
    server: Array


def grid(d: int, block: int) -> tuple[int, int]:
    """(B, L): blocks and entries per block for a tensor of d entries."""
    L = block if d >= block else 32 * words(max(d, 1), 1)
    return -(-d // L), L


def _compress(ops, flat, B: int, L: int, k: int, scaled=None):
    """C of a flat array of at most B·L entries (the rest of the last block zero):
    (sign words (B, L/32), scales (B,) float32). ``scaled`` is flat · 2^-k where the
    caller has it (the norms are taken of it: finite for any finite input)."""
    norms = ops.bucket_norm(flat * 2.0**-k if scaled is None else scaled, L)
    scales = ops.astype(norms * (2.0**k / math.sqrt(L)), np.float32)
    packed = ops.pack_signs(flat)
    full = B * (L // 32)
    if packed.size < full:   # the zero entries of the last block have sign bit 0 (+)
        packed = ops.pad(packed, full - packed.size)
    return ops.reshape(packed, (B, L // 32)), scales


def _decompress(ops, packed, scales, L: int, dtype, count: int, weight: float = 1.0) -> Array:
    """The first ``count`` entries that payload rows (sign words (..., R, L/32), scales (..., R))
    decode to, each scale times ``weight`` (−1: the negated decode, for residuals through the
    threaded ``ops.add``): per block s + bit·(−2s), i.e. s or −s exactly (``ops.dequantize``
    of 1-bit codes: one pass)."""
    s = ops.reshape(ops.astype(scales, dtype), (-1,))
    blocks = -(-count // L)
    if s.size > blocks:                        # zero-padded blocks past the tensor's end
        s = s[:blocks]
        packed = ops.reshape(packed, (-1,))[:blocks * (L // 32)]
    if weight != 1.0:
        s = s * weight
    return ops.dequantize(ops.reshape(packed, (-1,)), 1, count, s, s * -2.0, L)


def _leaf(block: int, shape, dtype) -> Leaf:
    d = math.prod(shape)
    B, L = grid(d, block)
    k = math.ceil(math.log2(L) / 2)
    cdt = compute_dtype(dtype)

    def init(ops, x):
        return DSState(ops.zeros(tuple(x.shape), x.dtype), ops.zeros((B * L,), cdt))

    def encode(ops, x, state, keys, received, r):
        if r == 0:
            p = ops.add(x, state.worker)
            return _compress(ops, ops.reshape(upcast(ops, p), (-1,)), B, L, k), DSState(p, state.server)
        packed, scales = received[0]            # (n, S, L/32), (n, S): every worker's part for this shard
        n, S = scales.shape[0], scales.shape[1]
        # the shard server works on q·2^-k: the 2^-k (exact) rides on the decoded scales and
        # its error state is kept scaled, so no pass scales q for its norms
        parts = _decompress(ops, packed, scales, L, cdt, n * S * L, 2.0**-k / n)
        total = parts if n == 1 else ops.sum(ops.reshape(parts, (n, S * L)), axis=0)
        q = ops.add(total, state.server[:S * L])                           # q · 2^-k
        pay = _compress(ops, q, S, L, k, scaled=q)                         # signs of q·2^-k are q's
        err = ops.add(q, _decompress(ops, *pay, L, cdt, S * L, -(2.0**-k)))  # (q − C(q)) · 2^-k
        rest = state.server[S * L:]
        return pay, DSState(state.worker, ops.concatenate([err, rest]) if rest.size else err)

    def local(ops, x, state, own, received):
        return _shaped(ops, _decompress(ops, *own[0], L, cdt, d), x)

    def decode(ops, x, state, own, received, n):
        packed, scales = received[1]            # (n, S, L/32), (n, S): every shard, rank order
        mean = _shaped(ops, _decompress(ops, packed, scales, L, cdt, d), x)
        residual = ops.add(state.worker, _shaped(ops, _decompress(ops, *own[0], L, cdt, d, -1.0), x))  # p − C(p)
        return mean, DSState(residual, state.server)

    def _shaped(ops, flat, x):
        return ops.astype(ops.reshape(flat, tuple(x.shape)), x.dtype)

    def plan(shape, dtype):
        bits = B * (L + 32)
        return Round(Law.SCATTER, bits), Round(Law.GATHER, bits, shard=True)

    return Leaf(init, encode, local, decode, plan)


@register("doublesqueeze", paper="Tang et al. 2019, DoubleSqueeze; Tang et al. 2021, 1-bit Adam")
def doublesqueeze(block: int = 2048) -> Compressor:
    """Error-compensated 1-bit all-reduce: scaled signs all-to-all, shard servers re-compress, all-gather."""
    check(isinstance(block, int) and not isinstance(block, bool) and block >= 32 and block % 32 == 0,
          f"doublesqueeze: block must be a multiple of 32, at least 32, got {block!r}")
    return Compressor(canonical("doublesqueeze", block=block), lambda shape, dtype: _leaf(block, shape, dtype),
                      contractive=False, doc="error-compensated 1-bit compressed all-reduce (1-bit Adam's)")
