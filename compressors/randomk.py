"""Random-k sparsification with shared indices (Stich et al. 2018; Wangni et al. 2018).

    S = k = ceil(ratio · d) indices, uniform without replacement, drawn from
        the *shared* key, so every worker picks the same S
    C(x)_i = (d/k) · x_i  if i ∈ S else 0    (scale=True:  E[C(x)] = x, unbiased)
    C(x)_i = x_i          if i ∈ S else 0    (scale=False: E||C(x) - x||^2 = (1 - k/d)||x||^2,
                                              the contraction error feedback wants)

S is the set of the k largest of d random 30-bit integers u_i =
random_bits_i >> 2; ties (each pair equal with probability 2^-30) go to the
lower index, the only departure from exactly uniform. It is selected as
``top_k_abs`` of the float32 whose bits are u_i + 2^23: positive normal
floats order like their bit patterns, and these are never subnormal (which
XLA flushes) nor inf/NaN, so every backend picks the same set. S comes in
ascending index order, so gathering x_S and scattering it back walk memory
forward (the top k in rank order would be a random permutation: on 2.5·10^7
entries the gather and scatter then dominate the round trip). Because S is
shared, payloads are summable: an all-reduce adds the x_S of all workers
(Law.SUM).

Wire format: values x.dtype[k] = x_S in ascending index order, unscaled (d/k is applied when
decoding, so an fp16 payload does not overflow on the wire). Range: the
decoded (d/k)·x_i saturates to ±inf where it exceeds the dtype's range
(|x_i| > max · k/d, e.g. 6.8e37 in float32 at ratio 0.2); scale=False never does.

Per-tensor state: RandomKState(indices), this step's S (int32[k]) kept from
encode for decoding; it is rewritten every step.

Non-finite input: a NaN or ±inf anywhere in x (selected or not) makes every
sent value NaN (max|x| · 0 is added to the values), so the decoded tensor is
NaN on S and never silently finite.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from compressors import quant as Q
from compressors.core import Compressor, Law, Leaf, Round, check, dtype_bits, fixed, upcast
from compressors.ops import Array
from compressors.registry import canonical, register
from compressors.topk import densify, keep_count


NORMAL = 1 << 23  # float32 bits of the smallest normal number (2^-126)


class RandomKState(NamedTuple):
    """Random-k per tensor: this step's shared indices S (int32[k], ascending)."""

    indices: Array


def _randomk_leaf(ratio: float, scale: bool) -> Leaf:
    def init(ops, x):
        return RandomKState(ops.zeros((keep_count(ratio, x.size),), np.int32))

    def encode(ops, x, state, keys, received, r):
        flat = ops.reshape(x, (-1,))
        k = keep_count(ratio, flat.size)
        if k == 0:
            return flat, state
        bits = ops.random_bits(keys.shared, flat.shape) >> ops.asarray(2, np.uint32)
        idx = ops.top_k_abs(ops.bitcast(bits + ops.asarray(NORMAL, np.uint32), np.float32), k)
        return ops.gather(flat, idx) + Q.poison(ops, flat, x.dtype), RandomKState(idx)

    def expand(ops, values, idx, x, divisor):
        factor = (x.size / max(idx.size, 1) if scale else 1.0) / divisor
        return densify(ops, (ops.astype(upcast(ops, values) * factor, x.dtype), idx), x)

    def local(ops, x, state, own, received):
        return expand(ops, own[0], state.indices, x, 1)

    def decode(ops, x, state, own, received, n):
        return expand(ops, received[0], state.indices, x, n), state

    def plan(shape, dtype):
        return (Round(Law.SUM, keep_count(ratio, math.prod(shape)) * dtype_bits(dtype)),)

    return Leaf(init, encode, local, decode, plan)


@register("randomk", paper="Stich et al. 2018; Wangni et al. 2018")
def randomk(ratio: float = 0.01, scale: bool = True) -> Compressor:
    """Random-k with shared indices (summable); scaled by d/k it is unbiased."""
    check(isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and 0 < ratio <= 1,
          f"randomk: ratio must be in (0, 1], got {ratio!r}")
    check(isinstance(scale, bool), f"randomk: scale must be True or False, got {scale!r}")
    return Compressor(canonical("randomk", ratio=ratio, scale=scale), fixed(_randomk_leaf(float(ratio), scale)),
                      unbiased=scale, contractive=not scale, doc="random-k sparsification (shared indices)")
