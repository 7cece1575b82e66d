"""QSGD (Alistarh et al. 2017): stochastic quantization to s levels of the bucket norm.

Per bucket v of B consecutive entries (B = 0: one bucket for the tensor):

    ξ_i = SR(s |v_i| / ||v||_2) ∈ {0, ..., s},   SR(y) = floor(y) + Bernoulli(y - floor(y))
    Q_s(v)_i = ||v||_2 · (1/s) · sign(v_i) · ξ_i

E[ξ_i] = s|v_i| / ||v||, so E[Q_s(v)] = v (unbiased); variance
<= min(B/s^2, sqrt(B)/s) ||v||^2 (Lemma 3.1). Gather (per-worker norms).
The norm is ``ops.bucket_norm``, m·sqrt(sum((v/m)^2)), m = max|v|, so squaring
never overflows: the norm is finite whenever it is representable (for
float32 input, max|v|·sqrt(B) <= 3.4e38; beyond, it is inf and the bucket
decodes to NaN, never silently finite), and floored at 2^-126 so s/||v|| stays
finite (unbiasedness is kept; a zero bucket still sends zeros). The last
bucket is zero-padded.

Wire format (d entries, nb = ceil(d / B), w = ceil(log2(s + 1)) + 1 bits):
    codes  uint32[ceil(d / floor(32 / w))]   ξ_i | sign_i << (w - 1), packed by
                                             ops.pack_bits(., w); sign_i = 1 iff v_i < 0
    norm   float32[nb]
The encoder uses the float32 norm it sends (float64 input: ξ clamped to s).
Encoding is one pass of the fused signed quantizer
(``ops.quantize_pack(..., signed=True)``: offset 0, magnitude
|v_i| · (1 / step), step = ||v|| · (1 / s), 1 / step floored at 2^-126 as ``quantize`` does),
decoding one pass of ``ops.dequantize(..., signed=True)`` with step ||v|| / s.

Non-finite input: a NaN or ±inf entry makes its bucket's norm NaN, and the
whole bucket decodes to NaN. A float64 bucket whose norm exceeds the float32
range sends norm = inf and decodes to NaN/±inf.
"""
from __future__ import annotations

import math

from compressors import quant as Q
from compressors.core import Compressor, Law, check, compute_dtype, fixed, single_round, upcast
from compressors.registry import canonical, register


def _qsgd_leaf(levels: int, bucket: int):
    level_bits = math.ceil(math.log2(levels + 1))
    width = level_bits + 1
    s = float(levels)

    def compress(ops, x, state, keys):
        flat = upcast(ops, ops.reshape(x, (-1,)))
        norm_w, norm = Q.wire_scale(ops, Q.floored(ops, ops.bucket_norm(flat, bucket)), x.dtype)
        # 1 / step as quantize computes it (XLA keeps these bits); NaN for a non-finite
        # norm (inf - inf), so every code is 0 and the bucket decodes to 0 * inf = NaN
        inv = Q.floored(ops, 1.0 / (norm * (1.0 / s))) + (norm - norm)
        zero = ops.zeros(norm.shape, norm.dtype)
        return (ops.quantize_pack(flat, zero, inv, bucket, s, width, keys.worker, signed=True), norm_w), state

    def decompress(ops, payload, x):
        packed, norm_w = payload
        norm = ops.astype(norm_w, compute_dtype(x.dtype))
        out = ops.dequantize(packed, width, x.size, ops.zeros(norm.shape, norm.dtype), norm * (1.0 / s), bucket,
                             signed=True)
        return ops.astype(ops.reshape(out, x.shape), x.dtype)

    return single_round(
        law=Law.GATHER,
        bits=lambda shape, dtype: Q.code_bits(shape, width) + Q.scale_bits(shape, bucket),
        compress=compress,
        decompress=decompress,
    )


@register("qsgd", paper="Alistarh et al. 2017, QSGD")
def qsgd(levels: int = 127, bucket: int = 512) -> Compressor:
    """QSGD: stochastic rounding of s|v_i|/||v|| to integer levels per bucket (unbiased)."""
    check(isinstance(levels, int) and not isinstance(levels, bool) and 1 <= levels <= 2**24 - 1,
          f"qsgd: levels must be an int in 1..2**24-1, got {levels!r}")
    Q.check_bucket("qsgd", bucket)
    return Compressor(canonical("qsgd", levels=levels, bucket=bucket), fixed(_qsgd_leaf(levels, bucket)),
                      unbiased=True, doc=f"QSGD with {levels} levels")
