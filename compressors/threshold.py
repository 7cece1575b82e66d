"""Threshold sparsification (Strom 2015; Dutta et al. 2020): send every |x_i| >= τ.

    S = { i : |x_i| >= τ }   (NaN and ±inf entries count as large)
    C(x)_i = x_i if i ∈ S' else 0,   S' = the first c = ceil(capacity · d) members
                                          of S in index order

The payload has the static capacity c: when fewer than c entries pass,
the rest is padding (index d, value 0, dropped by the decoder); when more
pass, the ones with the largest flat indices beyond the first c are *not
sent*. Alone they are lost for this step; under ``ef(threshold(...))`` they
stay in the residual and are sent later, nothing is lost. Biased; gather
(each worker has its own S).

Wire format: values x.dtype[c] (x_i for i ∈ S', 0 for padding), indices
int32[c] (increasing, padded with d) — the layout of topk.

Non-finite input: NaN/±inf entries are selected, and a NaN or inf anywhere
in x turns every sent value NaN, padding included (max|x| · 0 is added),
so the decoded tensor is NaN wherever something was sent (at least one
entry, since the non-finite ones are selected).
"""
from __future__ import annotations

import math

from compressors import quant as Q
from compressors.core import Compressor, check, fixed, upcast
from compressors.registry import canonical, register
from compressors.topk import keep_count, sparse_leaf


def _threshold_leaf(tau: float, capacity: float):
    def compress(ops, x, state, keys):
        flat = ops.reshape(x, (-1,))
        c = keep_count(capacity, flat.size)
        if c == 0:
            return (flat, ops.zeros((0,), "int32")), state
        a = ops.abs(upcast(ops, flat))
        idx = ops.nonzero((a >= tau) | ~ops.isfinite(a), c)
        return (ops.gather(flat, idx) + Q.poison(ops, flat, x.dtype), idx), state

    return sparse_leaf(compress, capacity)


@register("threshold", paper="Strom 2015")
def threshold(tau: float = 1e-3, capacity: float = 0.05) -> Compressor:
    """Send entries with |x| >= tau, at most ceil(capacity*d) of them (biased)."""
    check(isinstance(tau, (int, float)) and not isinstance(tau, bool) and math.isfinite(tau) and tau > 0,
          f"threshold: tau must be a finite number > 0, got {tau!r}")
    check(isinstance(capacity, (int, float)) and not isinstance(capacity, bool) and 0 < capacity <= 1,
          f"threshold: capacity must be in (0, 1], got {capacity!r}")
    return Compressor(canonical("threshold", tau=tau, capacity=capacity),
                      fixed(_threshold_leaf(float(tau), float(capacity))), doc="threshold sparsification")
