"""PowerSGD (Vogels et al. 2019): rank-r power iteration, two summable rounds.

For a gradient viewed as a matrix M (n x m; first axis by the rest), with a
shared Q (m x r) kept between steps (warm start):

    round 0:  P_i = M_i Q                 all-reduce  P = sum_i P_i
              P_hat = orthogonalize(P)    (Gram-Schmidt, column /= ||col|| + eps)
    round 1:  Q_i = M_i^T P_hat           all-reduce  Q = sum_i Q_i
    decode:   M_hat = P_hat (Q / n)^T ;   Q <- Q / n  (warm start)

This worker's own contribution is P_hat Q_i^T, which error feedback subtracts
(``powersgd(ef=True)`` is ``ef`` around this core, as in the paper's
Algorithm 2). Tensors with ndim < 2, or for which the compression rate
n*m / ((n+m)*r) is below ``min_compression``, are sent dense (one round).
The initial Q is uniform in [-1, 1) from a fixed key, identical on every worker.

Per-tensor state: PowerSGDState(q), the shared Q (m x r, compute dtype) the
next step's round 0 multiplies by (Q / n of this step with warm_start, else
a fresh one); dense tensors are stateless (). ``powersgd(ef=True)`` wraps
it: EFState(inner=PowerSGDState(q), residual).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from compressors.core import Compressor, Leaf, Law, Round, check, compute_dtype, dtype_bits, upcast
from compressors.ef import ef as error_feedback
from compressors.identity import IDENTITY_LEAF
from compressors.ops import Array
from compressors.registry import canonical, register

Q_SEED = 0x5EED


class PowerSGDState(NamedTuple):
    """PowerSGD per tensor: the warm-start Q (m x r, compute dtype)."""

    q: Array


def matrix_shape(shape) -> tuple[int, int]:
    return shape[0], math.prod(shape[1:])


def orthogonalize(ops, p, eps: float):
    """Gram-Schmidt on the columns of p (n x r); deterministic on every backend."""
    rows = ops.transpose(p)  # r x n
    qs = []
    for i in range(rows.shape[0]):
        v = rows[i]
        for q in qs:
            v = v - q * ops.sum(v * q)
        v = v / (ops.sqrt(ops.sum(v * v)) + eps)
        qs.append(v)
    return ops.transpose(ops.stack(qs))


def _powersgd_leaf(rank: int, warm_start: bool, eps: float, shape, dtype) -> Leaf:
    n, m = matrix_shape(shape)
    r = min(rank, n, m)
    cd = compute_dtype(dtype)

    def fresh_q(ops):
        u = ops.uniform(ops.fold_in(ops.key(Q_SEED), m * 131 + r), (m, r))
        return ops.astype(u * 2.0 - 1.0, cd)

    def as_matrix(ops, x):
        return ops.reshape(upcast(ops, x), (n, m))

    def init(ops, x):
        return PowerSGDState(fresh_q(ops))

    def encode(ops, x, state, keys, received, rnd):
        mat = as_matrix(ops, x)
        if rnd == 0:
            return ops.matmul(mat, state.q), state
        p_hat = orthogonalize(ops, received[0], eps)
        return ops.matmul(ops.transpose(mat), p_hat), state

    def local(ops, x, state, own, received):
        p_hat = orthogonalize(ops, received[0], eps)
        return ops.astype(ops.reshape(ops.matmul_nt(p_hat, own[1]), x.shape), x.dtype)

    def residual(ops, x, state, own, received):
        # x - P_hat Q_i^T in one pass (in the compute dtype: x's own when it is float32/64)
        p_hat = orthogonalize(ops, received[0], eps)
        return ops.reshape(ops.sub_matmul_nt(as_matrix(ops, x), p_hat, own[1]), x.shape)

    def decode(ops, x, state, own, received, count):
        p_hat = orthogonalize(ops, received[0], eps)
        q_mean = received[1] / float(count)
        out = ops.astype(ops.reshape(ops.matmul_nt(p_hat, q_mean), x.shape), x.dtype)
        return out, PowerSGDState(q_mean if warm_start else fresh_q(ops))

    def plan(shape, dtype):
        bits = dtype_bits(cd)
        return (Round(Law.SUM, n * r * bits), Round(Law.SUM, m * r * bits))

    # narrow dtypes keep EF's x - local(...), rounded like the payload it sent
    return Leaf(init, encode, local, decode, plan, residual if np.dtype(dtype) == cd else None)


def compresses(shape, rank: int, min_compression: float) -> bool:
    """Whether PowerSGD is used on a tensor of this shape (else dense)."""
    if len(shape) < 2 or math.prod(shape) == 0:
        return False
    n, m = matrix_shape(shape)
    r = min(rank, n, m)
    return n * m / ((n + m) * r) >= min_compression


@register("powersgd", paper="Vogels et al. 2019, PowerSGD")
def powersgd(rank: int = 4, warm_start: bool = True, eps: float = 1e-8, min_compression: float = 2.0,
             ef: bool = True) -> Compressor:
    """PowerSGD rank-r low-rank compression (2 all-reduce rounds), with EF by default."""
    check(isinstance(rank, int) and rank >= 1, f"powersgd: rank must be an int >= 1, got {rank!r}")
    check(isinstance(eps, (int, float)) and eps >= 0, f"powersgd: eps must be >= 0, got {eps!r}")
    check(isinstance(min_compression, (int, float)) and min_compression >= 0,
          f"powersgd: min_compression must be >= 0, got {min_compression!r}")

    def for_leaf(shape, dtype):
        if not compresses(shape, rank, min_compression):
            return IDENTITY_LEAF
        return _powersgd_leaf(rank, bool(warm_start), float(eps), shape, dtype)

    spec = canonical("powersgd", rank=rank, warm_start=warm_start, eps=eps,
                     min_compression=min_compression, ef=ef)
    core = Compressor(spec, for_leaf, doc="PowerSGD low-rank")
    return error_feedback(core)._replace(spec=spec) if ef else core
