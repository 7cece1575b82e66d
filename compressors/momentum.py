"""Worker-side momentum before compression (as in Signum and DGC).

    m_t = beta * m_{t-1} + g_t            (dampening: + (1 - beta) * g_t)
    send C(m_t)

The momentum buffer is per worker and advances once per step (in decode).

Per-tensor state: MomentumState(inner, momentum): the inner compressor's
state and m_{t-1} (x's shape and dtype).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from compressors.combinator import wrapping
from compressors.core import Compressor, Leaf, check, upcast
from compressors.ops import Array
from compressors.registry import canonical, register


class MomentumState(NamedTuple):
    """Worker momentum per tensor: the inner state and the buffer m."""

    inner: Any
    momentum: Array


def _momentum_leaf(beta: float, dampening: bool):
    scale = (1.0 - beta) if dampening else 1.0

    def wrap(inner: Leaf, shape, dtype) -> Leaf:
        def init(ops, x):
            return MomentumState(inner.init(ops, x), ops.zeros(x.shape, x.dtype))

        def advanced(ops, x, m):
            # in the compute dtype: NumPy's bf16 * Python float would give float32
            return ops.astype(upcast(ops, m) * beta + upcast(ops, x) * scale, x.dtype)

        def encode(ops, x, state, keys, received, r):
            s, m = state
            pay, s = inner.encode(ops, advanced(ops, x, m), s, keys, received, r)
            return pay, MomentumState(s, m)

        def local(ops, x, state, own, received):
            s, m = state
            return inner.local(ops, advanced(ops, x, m), s, own, received)

        def decode(ops, x, state, own, received, n):
            s, m = state
            m = advanced(ops, x, m)
            out, s = inner.decode(ops, m, s, own, received, n)
            return out, MomentumState(s, m)

        return Leaf(init, encode, local, decode, inner.plan)

    return wrap


@register("momentum", combinator=True, paper="Bernstein et al. 2018; Lin et al. 2018")
def momentum(inner: Compressor, beta: float = 0.9, dampening: bool = False) -> Compressor:
    """Compress the worker's momentum m = beta*m + g instead of g."""
    check(isinstance(beta, (int, float)) and 0 <= beta < 1, f"momentum: beta must be in [0, 1), got {beta!r}")
    spec = canonical("momentum", inner=inner, beta=beta, dampening=dampening).replace("inner=", "")
    return wrapping(spec, inner, _momentum_leaf(float(beta), bool(dampening)),
                    lambda c: momentum(c, beta, dampening), doc="worker momentum")
