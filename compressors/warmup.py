"""Warm-up: send dense gradients for the first ``steps`` steps, then compress.

    C_t(x) = x      for t < steps
             C(x)   for t >= steps

The state keeps the inner compressor's layout during warm-up (untouched), so
error-feedback residuals or PowerSGD's Q are ready when compression starts.
The payload shape changes at ``steps``: drivers ask ``phase_of(step)``.
"""
from __future__ import annotations

from compressors.core import Compressor, Leaf, check
from compressors.identity import IDENTITY_LEAF
from compressors.registry import canonical, register


def _dense_keeping_state(inner: Leaf) -> Leaf:
    def encode(ops, x, state, keys, received, r):
        return IDENTITY_LEAF.encode(ops, x, (), keys, received, r)[0], state

    def decode(ops, x, state, own, received, n):
        return IDENTITY_LEAF.decode(ops, x, (), own, received, n)[0], state

    def local(ops, x, state, own, received):
        return IDENTITY_LEAF.local(ops, x, (), own, received)

    return Leaf(inner.init, encode, local, decode, IDENTITY_LEAF.plan)


@register("warmup", combinator=True, paper="Lin et al. 2018 (DGC warm-up); Vogels et al. 2019")
def warmup(inner: Compressor, steps: int = 100) -> Compressor:
    """Uncompressed (dense all-reduce) for the first `steps` steps, then inner."""
    check(isinstance(inner, Compressor), f"warmup: expects a compressor, got {inner!r}")
    check(isinstance(steps, int) and steps >= 0, f"warmup: steps must be an int >= 0, got {steps!r}")
    spec = canonical("warmup", inner=inner, steps=steps).replace("inner=", "")
    dense = Compressor(spec, lambda shape, dtype: _dense_keeping_state(inner.for_leaf(shape, dtype)),
                       doc="warm-up (dense phase)")

    def at(step: int) -> Compressor:
        return dense if step < steps else inner.step(step)

    def phase(step: int):
        return ("dense",) if step < steps else ("on", inner.phase_of(step))

    start = dense if steps > 0 else inner
    return start._replace(spec=spec, at=at, phase=phase, unbiased=inner.unbiased,
                          contractive=inner.contractive, doc="warm-up then inner")
