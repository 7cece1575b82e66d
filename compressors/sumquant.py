"""Summable quantization: shared scales, integer codes that an all-reduce adds.

Per-worker scales (``quantize``) make codes incomparable across workers, so
they must be all-gathered. With one scale per bucket that *every* worker
uses, the integer codes of all workers can simply be added by the network's
all-reduce — in a container with enough headroom that the sum cannot
overflow (the idea of THC, Li et al., NSDI 2024, here with uniform levels).

Two rounds per tensor (d entries, buckets of B, nb = ceil(d / B)):

    round 0 (MAX):  m_b = max_i |x_i| over bucket b        -> M_b = max over workers
    round 1 (SUM):  q_i = SR(L · x_i / M_b) ∈ {-L, ..., L},  L = 2^(bits-1) - 1
                    S_i = Σ_workers q_i                     (integer all-reduce)
    decode:         x̂_i = (S_i / (n L)) · M_b

SR is stochastic rounding (``compressors.quant.stochastic_round``), so
E[q_i] = L x_i / M_b and the mean estimate is unbiased. |S_i| ≤ n L, so
the codes travel in the smallest signed container (int8, int16, int32) that
holds ``workers · L``: ``sumquant(bits=4, workers=16)`` sends 8 bits per
entry, ``bits=8, workers=16`` 16 bits. The plan states exactly that, plus
32 bits per bucket for the scale round, and carries the headroom bound
(``Round.max_workers``): an exchange with more workers is refused, never
wrapped silently.

The encoder multiplies by L / M_b, one division per bucket (a vector
division, correctly rounded on every backend); that factor is floored at
2^-126 so no backend flushes it to zero (a bucket with |x| above ~2^126 · L
then rounds on a coarser grid, clamped to ±L: a small bias there only).

Edges: an all-zero bucket has M_b = 0 and decodes to exact zeros (the scale
is floored at 2^-126 for the division only). A NaN anywhere in a bucket on
any worker makes M_b NaN and the bucket decodes to NaN on every worker (the
code sent for it is L, a defined integer); an inf makes M_b inf and the
bucket decodes to NaN or ±inf (never to finite values). Dividing by n L before multiplying by M_b keeps
finite values near the float32 maximum finite. float64 input computes in
float64 with float32 scales on the wire (a code is clamped to ±L).
"""
from __future__ import annotations

import math

import numpy as np

from compressors import quant as Q
from compressors.core import (Compressor, Law, Leaf, Round, check, compute_dtype, dtype_bits, fixed,
                              upcast)
from compressors.fused import bucket_grid
from compressors.registry import canonical, register

CONTAINERS = (np.int8, np.int16, np.int32)


def container(bits: int, workers: int) -> np.dtype:
    """The smallest signed integer dtype whose range holds ``workers · L``."""
    top = workers * (2 ** (bits - 1) - 1)
    for dt in CONTAINERS:
        if top <= np.iinfo(dt).max:
            return np.dtype(dt)
    raise ValueError(f"sumquant: workers · (2^(bits-1) - 1) = {top} does not fit in int32")


def _sumquant_leaf(bits: int, workers: int, bucket: int) -> Leaf:
    levels = float(2 ** (bits - 1) - 1)
    code = container(bits, workers)

    def init(ops, x):
        return ()

    def encode(ops, x, state, keys, received, r):
        rows = Q.to_buckets(ops, x, bucket, edge=False)   # zero padding: max |x| unchanged
        if r == 0:
            local_max = ops.max(ops.abs(rows), axis=1) if rows.size else ops.zeros((0,), rows.dtype)
            return ops.astype(local_max, np.float32), state
        m = ops.astype(received[0], rows.dtype)
        inv = Q.floored(ops, levels / Q.floored(ops, m))  # per bucket: one IEEE division of nb values
        y = rows * Q.column(ops, inv)
        y = ops.where(y < levels, y, levels)               # rounding of L / M_b can reach L + ulp;
        y = ops.where(y > -levels, y, -levels)             # a NaN (bucket poisoned by M_b) becomes L
        q = Q.stochastic_round(ops, y, keys.worker)        # in [-L, L]: floor(y) >= -L, floor(y) + 1 <= L
        return ops.astype(ops.reshape(q, (-1,))[: x.size], code), state

    def expand(ops, codes, m, x, divisor: float):
        nb, b = bucket_grid(x.size, bucket)
        cd = compute_dtype(x.dtype)
        flat = ops.astype(codes, cd) * (1.0 / divisor)
        rows = ops.reshape(ops.pad(flat, nb * b - x.size), (nb, b))
        return Q.from_buckets(ops, rows * Q.column(ops, ops.astype(m, cd)), x)

    def local(ops, x, state, own, received):
        return expand(ops, own[1], received[0], x, levels)

    def decode(ops, x, state, own, received, n):
        check(n <= workers, f"sumquant(workers={workers}) has headroom for {workers} workers, "
                            f"the exchange has {n}")
        return expand(ops, received[1], received[0], x, n * levels), state

    def plan(shape, dtype):
        d = math.prod(shape)
        nb = bucket_grid(d, bucket)[0]
        return (Round(Law.MAX, 32 * nb), Round(Law.SUM, dtype_bits(code) * d, workers))

    return Leaf(init, encode, local, decode, plan)


@register("sumquant", paper="Li et al. 2024 (THC); Gupta et al. 2015")
def sumquant(bits: int = 4, workers: int = 16, bucket: int = 512) -> Compressor:
    """Shared-scale stochastic quantization whose integer codes sum in an all-reduce (unbiased)."""
    check(isinstance(bits, int) and not isinstance(bits, bool) and 2 <= bits <= 8,
          f"sumquant: bits must be an int in 2..8, got {bits!r}")
    check(isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1,
          f"sumquant: workers must be an int >= 1 (the most workers whose codes are summed), got {workers!r}")
    Q.check_bucket("sumquant", bucket)
    container(bits, workers)
    return Compressor(canonical("sumquant", bits=bits, workers=workers, bucket=bucket),
                      fixed(_sumquant_leaf(bits, workers, bucket)), unbiased=True,
                      doc=f"{bits}-bit shared-scale quantization summed in "
                          f"{container(bits, workers).name} (≤ {workers} workers)")
