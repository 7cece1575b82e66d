"""TernGrad (Wen et al. 2017): ternary gradients {-s, 0, +s}, unbiased.

Per bucket of B consecutive entries (B = 0, the default: the whole tensor,
as in the paper's layer-wise scaling):

    s = max_i |x_i|,   b_i ~ Bernoulli(|x_i| / s)
    C(x)_i = s · sign(x_i) · b_i

E[C(x)_i] = s · sign(x_i) · |x_i| / s = x_i (unbiased). s is floored at
2^-126 (so 1/s is finite; still unbiased); an all-zero bucket sends zeros.
(The paper's optional 2.5σ gradient clipping is not part of the
compressor.) Gather: every worker has its own s.

Wire format (d entries, nb = ceil(d / B)):
    codes  uint32[ceil(d / 16)]   2-bit t_i packed by ops.pack_bits(., 2):
                                  t = 0 → 0, t = 1 → +s, t = 2 → -s (3 unused)
    s      float32[nb]
The encoder draws b_i against the float32 s it sends.

Non-finite input: NaN or ±inf in a bucket makes s NaN or inf; every entry
of the bucket then decodes to NaN (0·inf, NaN·t), never a finite value.
"""
from __future__ import annotations

from compressors import quant as Q
from compressors.core import Compressor, Law, compute_dtype, fixed, single_round
from compressors.registry import canonical, register


def _terngrad_leaf(bucket: int):
    def compress(ops, x, state, keys):
        rows = Q.to_buckets(ops, x, bucket)
        s_w, s = Q.wire_scale(ops, Q.floored(ops, ops.max(ops.abs(rows), axis=1)), x.dtype)
        p = Q.divide(ops, ops.abs(rows), s)
        b = ops.astype(ops.uniform(keys.worker, rows.shape), rows.dtype) < p
        t = ops.where(b & (rows < 0), 2.0, ops.where(b, 1.0, ops.zeros(rows.shape, rows.dtype)))
        return (Q.pack(ops, t, 2, x.size), s_w), state

    def decompress(ops, payload, x):
        packed, s_w = payload
        dt = compute_dtype(x.dtype)
        t = Q.unpack(ops, packed, 2, x.size, bucket, dt)
        sign = ops.where(t == 2.0, -1.0, t)
        return Q.from_buckets(ops, sign * Q.column(ops, ops.astype(s_w, dt)), x)

    return single_round(
        law=Law.GATHER,
        bits=lambda shape, dtype: Q.code_bits(shape, 2) + Q.scale_bits(shape, bucket),
        compress=compress,
        decompress=decompress,
    )


@register("terngrad", paper="Wen et al. 2017, TernGrad")
def terngrad(bucket: int = 0) -> Compressor:
    """TernGrad: s·sign(x)·Bernoulli(|x|/s), s = max|x| per tensor or bucket (unbiased)."""
    Q.check_bucket("terngrad", bucket)
    return Compressor(canonical("terngrad", bucket=bucket), fixed(_terngrad_leaf(bucket)),
                      unbiased=True, doc="ternary {-s, 0, s} stochastic gradients")
