"""PowerSGD (Vogels et al. 2019): rank-r power iteration, two summable rounds.

For a gradient viewed as a matrix M (n x m; first axis by the rest, a vector
of n entries as n x 1), with a shared Q (m x r) kept between steps (warm start):

    round 0:  P_i = M_i Q                 all-reduce  P = sum_i P_i
              P_hat = orthogonalize(P)    (orthonormal columns; dependent ones 0)
    round 1:  Q_i = M_i^T P_hat           all-reduce  Q = sum_i Q_i
    decode:   M_hat = P_hat (Q / n)^T ;   Q <- Q / n, columns scaled to max |entry| 1 (warm start)

This worker's own contribution is P_hat Q_i^T, which error feedback subtracts
(``powersgd(ef=True)`` is ``ef`` around this core, as in the paper's
Algorithm 2). Tensors with no elements or no axes, and those for which the
compression rate n*m / ((n+m)*r) is not above ``min_compression``, are
sent dense (one round). The initial Q is uniform in [-1, 1) from a fixed
key, identical on every worker.

**Orthogonalisation** (:func:`orthogonalize`): Gram-Schmidt, modified and
run twice, that zeroes dependent columns. When the rank r exceeds the rank
of the summed gradient (small per-worker batches, a large r, a zero
gradient), columns of P are dependent on the earlier ones up to round-off,
and normalising that round-off (one Gram-Schmidt pass, ``col / (||col|| +
eps)``) adds spurious basis vectors that are not orthogonal to the real
ones: M_hat is then no projection of M, with relative errors of order 1. So:

* each column is first scaled to a largest entry of magnitude one (a
  reciprocal, exact under power-of-two scaling; squares cannot overflow
  or underflow), and its squared norm ``a`` kept;
* a column whose squared norm after removing the earlier columns is at most
  ``tol**2 * a`` is *dependent* and set to 0, with ``tol = max(eps,
  sqrt(machine eps))`` of the compute dtype (3.5e-4 in float32, 1.5e-8 in
  float64): round-off of a dependent column sits near machine eps, about
  300 times below; a real direction weaker than ``tol`` is dropped, an error
  of about ``tol`` relative that error feedback keeps;
* a second pass over the normalised columns restores orthogonality to
  machine precision (one modified Gram-Schmidt pass loses ``eps * cond(P)``;
  twice is enough once dependent columns are gone).

So every comparison is relative: scaling the gradient by 2**k scales every
payload, the result and the EF residual by exactly 2**k (the warm-start Q
not at all), and by 10**k to rounding.

One step from the same state agrees across backends to 1e-5. With error
feedback on gradients that stay rank-deficient, runs left to themselves
drift apart: e starts as round-off, and each step amplifies it (it tilts
the captured span). With spare columns (r above the summed gradient's rank)
it is sent once it passes ``tol``, and the runs stay within 32 ``tol`` of
the largest gradient entry. At r equal to that rank, and on full-rank
gradients over long runs, no bound holds (docs/powersgd.md, measured by
benchmarks/bench_powersgd_agreement.py). With rank
r at least the rank of the mean gradient, P_hat spans its column space and
M_hat reproduces it to rounding (PyTorch's hook gets that from QR above rank
2). Why this and not QR: the three backends need the same numbers, and
Gram-Schmidt here is elementwise ops and ``ops.sum``, whose order is fixed,
so given the same P every backend computes the same P_hat bit for bit (only
the two products M Q and M^T P_hat round differently across backends); a QR
kernel (LAPACK, XLA, MindSpore's) fixes neither its signs nor how it fills a
rank-deficient basis. Zeroing beats re-drawing a random column: the zeros
make the dependent directions contribute exactly nothing, need no random
numbers in the step (MindSpore's exact RNG is a CPU-only custom op), and
give the same result on every backend.

A dependent column's slot in Q_i is free (P_hat's column is 0, so nothing
reads it), so with the warm start it carries this step's Q column instead:
the next Q keeps it, and a column that was dependent on one gradient
(or all of them, on a zero gradient) is tried again on the next.

``eps`` is PyTorch's ``orthogonalization_epsilon`` made relative (its
absolute ``col / (||col|| + eps)`` makes the result depend on the
gradient's scale): it can only raise ``tol`` above the floor, dropping weak
directions sooner. Default 0 (the floor), as PyTorch's default.

PyTorch ``PowerSGDState`` -> spec: ``matrix_approximation_rank`` ->
``rank`` (PyTorch 1, here 4); ``start_powerSGD_iter`` -> ``start_step``
(dense all-reduce before it, EF residual and Q untouched, the ``warmup``
combinator; PyTorch 1000, here 0); ``min_compression_rate`` ->
``min_compression`` (2, the same strict test); ``use_error_feedback`` ->
``ef``; ``warm_start``; ``orthogonalization_epsilon`` -> ``eps`` (relative,
above). 1-D tensors are n x 1 matrices in both, so they are compressed
only below ``min_compression`` 1. Error feedback covers every tensor in
both: PyTorch keeps ``input - output`` for the whole bucket, here each
worker keeps ``p - P_hat Q_i^T`` (a dense tensor: 0). Both sum over the
workers to the same residual, and both rounds are linear, so the mean
estimates agree (``tests/compressors/test_powersgd.py`` checks this against
a NumPy transcription of the hook); only the per-worker split differs.

Per-tensor state: PowerSGDState(q), the shared Q (m x r, compute dtype) the
next step's round 0 multiplies by (Q / n of this step with warm_start, each
column scaled to a largest entry of magnitude one, so that P = M Q scales
with M and not with its square, which under- or overflows; else a fresh
one); from round 1's encode to decode it holds P_hat (n x r)
instead, so P_hat is computed once per exchange. Dense tensors are
stateless (). ``powersgd(ef=True)`` wraps it: EFState(inner=PowerSGDState(q),
residual).
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
from compressors.warmup import warmup

Q_SEED = 0x5EED


class PowerSGDState(NamedTuple):
    """PowerSGD per tensor: the warm-start Q (m x r, compute dtype)."""

    q: Array


def matrix_shape(shape) -> tuple[int, int]:
    """(n, m): the first axis by the rest (a vector of n entries is n x 1)."""
    return shape[0], math.prod(shape[1:])


def tolerance(eps: float, dtype) -> float:
    """The relative dependency threshold of :func:`orthogonalize`."""
    return max(float(eps), math.sqrt(float(np.finfo(dtype).eps)))


def orthogonalize(ops, p, tol: float):
    """(P_hat, dependent) for P (n x r): P_hat has orthonormal columns
    spanning P's column space, a column that is dependent on the earlier
    ones (its norm without them at most ``tol`` times its own) set to 0;
    ``dependent`` is a (1, r) bool array. Modified Gram-Schmidt, twice, on
    column-rescaled P (see the module docstring); elementwise ops and
    ``ops.sum`` only, so the same bits on every backend."""
    r = p.shape[1]
    rows = ops.transpose(unit_columns(ops, p))  # r x n: row j is column j of P, largest entry +-1
    limit = ops.sum(rows * rows, axis=1) * (tol * tol)
    dependent = []
    for sweep in range(2):
        out, rest = [], rows
        for j in range(r):
            v = rest[0]
            vv = ops.sum(v * v)
            if sweep == 0:
                dependent.append(vv <= limit[j])
            v = v * (1.0 / ops.where(dependent[j], math.inf, ops.sqrt(vv)))
            out.append(v)
            if j + 1 < r:  # remove v from the columns after it
                rest = rest[1:]
                rest = rest - ops.reshape(ops.sum(rest * v, axis=1), (r - j - 1, 1)) * v
        rows = ops.stack(out)
    return ops.transpose(rows), ops.reshape(ops.stack(dependent), (1, r))


def unit_columns(ops, q):
    """q with each column scaled to a largest entry of magnitude one (an
    all-zero column stays 0). P_hat does not depend on the scale of Q's
    columns, and so the next P = M Q scales with M, not with M squared."""
    big = ops.max(ops.abs(q), axis=0)
    return q * ops.reshape(1.0 / ops.where(big > 0.0, big, math.inf), (1, q.shape[1]))


def _powersgd_leaf(rank: int, warm_start: bool, tol: float, shape, dtype) -> Leaf:
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
        p_hat, dependent = orthogonalize(ops, received[0], tol)
        q = ops.matmul_tn(mat, p_hat)
        if warm_start:  # a dependent column's slot carries this step's Q column on to the next step
            q = ops.where(dependent, state.q, q)
        return q, PowerSGDState(p_hat)

    def local(ops, x, state, own, received):
        return ops.astype(ops.reshape(ops.matmul_nt(state.q, own[1]), x.shape), x.dtype)

    def residual(ops, x, state, own, received):
        # x - P_hat Q_i^T in one pass (in the compute dtype: x's own when it is float32/64)
        return ops.reshape(ops.sub_matmul_nt(as_matrix(ops, x), state.q, own[1]), x.shape)

    def decode(ops, x, state, own, received, count):
        q_mean = received[1] / float(count)
        out = ops.astype(ops.reshape(ops.matmul_nt(state.q, q_mean), x.shape), x.dtype)
        return out, PowerSGDState(unit_columns(ops, q_mean) if warm_start else fresh_q(ops))

    def plan(shape, dtype):
        bits = dtype_bits(cd)
        return (Round(Law.SUM, n * r * bits), Round(Law.SUM, m * r * bits))

    # narrow dtypes keep EF's x - local(...), rounded like the payload it sent
    return Leaf(init, encode, local, decode, plan, residual if np.dtype(dtype) == cd else None)


def compresses(shape, rank: int, min_compression: float) -> bool:
    """Whether PowerSGD is used on a tensor of this shape (else dense):
    PyTorch's test, n*m > (n+m) * r * min_compression."""
    if len(shape) < 1 or math.prod(shape) == 0:
        return False
    n, m = matrix_shape(shape)
    r = min(rank, n, m)
    return n * m > (n + m) * r * min_compression


@register("powersgd", paper="Vogels et al. 2019, PowerSGD")
def powersgd(rank: int = 4, warm_start: bool = True, eps: float = 0.0, min_compression: float = 2.0,
             ef: bool = True, start_step: int = 0) -> Compressor:
    """PowerSGD rank-r low-rank compression (2 all-reduce rounds), with EF by default."""
    check(isinstance(rank, int) and rank >= 1, f"powersgd: rank must be an int >= 1, got {rank!r}")
    check(isinstance(eps, (int, float)) and 0 <= eps < 1, f"powersgd: eps must be in [0, 1), got {eps!r}")
    check(isinstance(min_compression, (int, float)) and min_compression >= 0,
          f"powersgd: min_compression must be >= 0, got {min_compression!r}")
    check(isinstance(start_step, int) and start_step >= 0,
          f"powersgd: start_step must be an int >= 0, got {start_step!r}")

    def for_leaf(shape, dtype):
        if not compresses(shape, rank, min_compression):
            return IDENTITY_LEAF
        return _powersgd_leaf(rank, bool(warm_start), tolerance(eps, compute_dtype(dtype)), shape, dtype)

    spec = canonical("powersgd", rank=rank, warm_start=warm_start, eps=eps,
                     min_compression=min_compression, ef=ef, start_step=start_step)
    comp = Compressor(spec, for_leaf, doc="PowerSGD low-rank")
    if ef:
        comp = error_feedback(comp)
    if start_step:
        comp = warmup(comp, steps=start_step)
    return comp._replace(spec=spec)
