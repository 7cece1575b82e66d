"""Error feedback (Seide et al. 2014; Karimireddy et al. 2019) and EF21 (Richtárik et al. 2021).

EF:   p_t = x_t + e_t;   send C(p_t);   e_{t+1} = p_t - C(p_t)
      so   sum_t C(p_t) + e_{T+1} = sum_t x_t   (nothing is lost)

      (p_t - C(p_t) is the inner leaf's ``residual`` when it has one.)

EF21: c_t = C(x_t - g_i);  g_i += c_t;  g += mean_workers(c_t);  use g
      (g_i: this worker's estimate; g: the shared one, equal on all workers)

C(p) is what this worker's own payloads decode to (``Leaf.local``); for
PowerSGD that is P_hat Q_i^T after the P round, exactly as in the paper.

Per-tensor state:

    EFState(inner, residual)       inner: the inner compressor's state;
                                   residual: e_t (x's shape and dtype). From
                                   round 0's encode to decode it holds
                                   p_t = x_t + e_t instead, so p is summed
                                   once per exchange; decode stores e_{t+1}.
    EF21State(inner, local, shared)  inner: the inner compressor's state;
                                   local: g_i, this worker's estimate;
                                   shared: g, the estimate every worker holds
                                   (both x's shape and dtype).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from compressors.combinator import wrapping
from compressors.core import Compressor, Leaf, check
from compressors.ops import Array
from compressors.registry import canonical, register


class EFState(NamedTuple):
    """Error feedback per tensor: the inner state and the residual e
    (p = x + e between round 0's encode and decode)."""

    inner: Any
    residual: Array


class EF21State(NamedTuple):
    """EF21 per tensor: the inner state, this worker's estimate g_i (local)
    and the shared estimate g (shared)."""

    inner: Any
    local: Array
    shared: Array


def _ef_leaf(inner: Leaf, shape, dtype) -> Leaf:
    def init(ops, x):
        return EFState(inner.init(ops, x), ops.zeros(x.shape, x.dtype))

    def encode(ops, x, state, keys, received, r):
        s, e = state
        p = ops.add(x, e) if r == 0 else e
        pay, s = inner.encode(ops, p, s, keys, received, r)
        return pay, EFState(s, p)

    def local(ops, x, state, own, received):
        s, p = state
        return inner.local(ops, p, s, own, received)

    def decode(ops, x, state, own, received, n):
        s, p = state
        if inner.residual is not None:
            left = inner.residual(ops, p, s, own, received)
        else:
            left = p - inner.local(ops, p, s, own, received)
        out, s = inner.decode(ops, p, s, own, received, n)
        return out, EFState(s, left)

    return Leaf(init, encode, local, decode, inner.plan)


def _ef21_leaf(inner: Leaf, shape, dtype) -> Leaf:
    def init(ops, x):
        z = ops.zeros(x.shape, x.dtype)
        return EF21State(inner.init(ops, x), z, z)

    def encode(ops, x, state, keys, received, r):
        s, gi, g = state
        pay, s = inner.encode(ops, x - gi, s, keys, received, r)
        return pay, EF21State(s, gi, g)

    def local(ops, x, state, own, received):
        s, gi, g = state
        return inner.local(ops, x - gi, s, own, received)

    def decode(ops, x, state, own, received, n):
        s, gi, g = state
        d = x - gi
        c_local = inner.local(ops, d, s, own, received)
        c_mean, s = inner.decode(ops, d, s, own, received, n)
        g = ops.add(g, c_mean)   # full-size sums: Fused.add (threaded on an eager backend)
        return g, EF21State(s, ops.add(gi, c_local), g)

    return Leaf(init, encode, local, decode, inner.plan)


@register("ef", combinator=True, paper="Seide et al. 2014; Karimireddy et al. 2019")
def ef(inner: Compressor) -> Compressor:
    """Error feedback: add the residual of past compression before compressing."""
    check(isinstance(inner, Compressor), f"ef: expects a compressor, got {inner!r}")
    return wrapping(canonical("ef", inner=inner).replace("inner=", ""), inner, _ef_leaf, ef,
                    contractive=inner.contractive, doc="error feedback (residual memory)")


@register("ef21", combinator=True, paper="Richtárik et al. 2021, EF21")
def ef21(inner: Compressor) -> Compressor:
    """EF21: compress the change of each worker's gradient estimate."""
    return wrapping(canonical("ef21", inner=inner).replace("inner=", ""), inner, _ef21_leaf, ef21,
                    doc="EF21 gradient-estimate feedback")
