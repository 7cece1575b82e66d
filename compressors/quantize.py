"""n-bit uniform quantization with stochastic rounding and per-bucket scales.

Stochastic rounding (Gupta et al. 2015) on a min-max grid per bucket of B
consecutive entries (the bucketing of QSGD, Alistarh et al. 2017):

    lo = min_b x,   Δ = (max_b x - lo) · (1 / (2^bits - 1))
    q_i = SR((x_i - lo) · (1 / Δ)) ∈ {0, ..., 2^bits - 1},   SR(y) = floor(y) + Bernoulli(y - floor(y))
    C(x)_i = lo + q_i Δ

E[q_i] = (x_i - lo) / Δ, so E[C(x)] = x (unbiased). Δ is floored at 2^-126
(the smallest normal float32) so 1/Δ stays finite; a constant bucket (all
zeros, say) still decodes exactly, to lo. 1/Δ is floored at 2^-126 too, so
no backend flushes a subnormal reciprocal (a bucket whose range exceeds
2^126, |x| > 4e37, then rounds with a coarser grid). int8 =
quantize(bits=8), int4 = quantize(bits=4). B = 0 means one bucket per
tensor. Gather: every worker has its own scales.

Written with the fused ops ``minmax_quantize_pack`` (``bucket_min_max``, the
float32 scales, ``quantize_pack``) and ``dequantize`` (``compressors.fused.Fused``):
on NumPy the encoder reads each bucket once from memory, on all cores.

Wire format (d entries, nb = ceil(d / B) buckets), in this order:
    codes  uint32[ceil(d / floor(32 / bits))]   q_i packed by ops.pack_bits(., bits)
    lo     float32[nb]
    Δ      float32[nb]
The encoder uses the float32 lo and Δ it sends (for float64 input a value
outside the rounded range is clamped to the grid: a bias of one float32 ulp
of the range at most).

Non-finite input: a NaN or ±inf makes lo or Δ NaN/inf on the wire and the
whole bucket decodes to NaN or ±inf (never finite). A finite bucket whose
range max - lo overflows the compute dtype (|x| near the float32 maximum)
decodes to NaN the same way.
"""
from __future__ import annotations

from compressors import quant as Q
from compressors.core import Compressor, Law, check, compute_dtype, fixed, single_round, upcast
from compressors.registry import canonical, register


def _quantize_leaf(bits: int, bucket: int):
    top = float(2**bits - 1)

    def compress(ops, x, state, keys):
        flat = upcast(ops, ops.reshape(x, (-1,)))
        return ops.minmax_quantize_pack(flat, bucket, top, bits, keys.worker), state

    def decompress(ops, payload, x):
        packed, lo_w, step_w = payload
        dt = compute_dtype(x.dtype)
        out = ops.dequantize(packed, bits, x.size, ops.astype(lo_w, dt), ops.astype(step_w, dt), bucket)
        return ops.astype(ops.reshape(out, x.shape), x.dtype)

    return single_round(
        law=Law.GATHER,
        bits=lambda shape, dtype: Q.code_bits(shape, bits) + Q.scale_bits(shape, bucket, 2),
        compress=compress,
        decompress=decompress,
    )


@register("quantize", paper="Gupta et al. 2015; Alistarh et al. 2017")
def quantize(bits: int = 8, bucket: int = 512) -> Compressor:
    """Stochastic-rounding n-bit quantization, min-max scales per bucket (unbiased)."""
    check(isinstance(bits, int) and not isinstance(bits, bool) and 1 <= bits <= 16,
          f"quantize: bits must be an int in 1..16, got {bits!r}")
    Q.check_bucket("quantize", bucket)
    return Compressor(canonical("quantize", bits=bits, bucket=bucket), fixed(_quantize_leaf(bits, bucket)),
                      unbiased=True, doc=f"{bits}-bit stochastic quantization")


@register("int8", paper="Gupta et al. 2015")
def int8(bucket: int = 512) -> Compressor:
    """8-bit stochastic quantization: quantize(bits=8)."""
    return quantize(bits=8, bucket=bucket)


@register("int4", paper="Gupta et al. 2015")
def int4(bucket: int = 512) -> Compressor:
    """4-bit stochastic quantization: quantize(bits=4)."""
    return quantize(bits=4, bucket=bucket)
