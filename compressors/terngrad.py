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
    codes  uint32[ceil(d / 16)]   2-bit sign-magnitude codes b_i | [x_i < 0] << 1,
                                  packed by ops.pack_bits(., 2): 0 and 2 -> 0,
                                  1 -> +s, 3 -> -s
    s      float32[nb]
The encoder draws b_i against the float32 s it sends, as one pass of the
fused signed quantizer (``ops.quantize_pack(..., signed=True)``: offset 0,
magnitude |x_i| · (1/s) rounded stochastically onto {0, 1}) and decodes with
``ops.dequantize(..., signed=True)``. 1/s is floored at 2^-126 (as
``quantize`` does), so a bucket with s > 2^126 (|x| > 8.5e37) rounds with a
slightly larger probability, clamped at 1.

Non-finite input: NaN or ±inf in a bucket makes s NaN or inf, and 1/s NaN
(``+ (s - s)``): every code is 0 and every entry of the bucket decodes to
NaN (0·inf, 0·NaN), never a finite value.
"""
from __future__ import annotations

from compressors import quant as Q
from compressors.core import Compressor, Law, compute_dtype, fixed, single_round, upcast
from compressors.registry import canonical, register


def _terngrad_leaf(bucket: int):
    def compress(ops, x, state, keys):
        flat = upcast(ops, ops.reshape(x, (-1,)))
        mins, maxs = ops.bucket_min_max(flat, bucket)
        s_w, s = Q.wire_scale(ops, Q.floored(ops, ops.maximum(-mins, maxs)), x.dtype)
        zero = ops.zeros(s.shape, s.dtype)
        inv = Q.floored(ops, 1.0 / s) + (s - s)  # NaN for a non-finite s: every code 0, decoded 0 * s
        return (ops.quantize_pack(flat, zero, inv, bucket, 1.0, 2, keys.worker, signed=True), s_w), state

    def decompress(ops, payload, x):
        packed, s_w = payload
        s = ops.astype(s_w, compute_dtype(x.dtype))
        out = ops.dequantize(packed, 2, x.size, ops.zeros(s.shape, s.dtype), s, bucket, signed=True)
        return ops.astype(ops.reshape(out, x.shape), x.dtype)

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
