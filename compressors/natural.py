"""Natural compression (Horváth et al. 2019): random rounding to a power of two.

For x ≠ 0 write |x| = m · 2^e with m ∈ [1/2, 1) (ops.frexp), so
2^(e-1) <= |x| < 2^e, and round to one of the two neighbours:

    C(x) = sign(x) · 2^e       with probability p = |x| / 2^(e-1) - 1 = 2m - 1
           sign(x) · 2^(e-1)   with probability 1 - p

E[|C(x)|] = 2^(e-1) (1 + p) = |x| (unbiased; variance <= |x|^2 / 8). C(0) = 0.
Below the smallest normal float32 2^-126 (float32 subnormals, small float64)
the two neighbours are 0 and 2^-126 with p = |x| · 2^126, still unbiased.
p = 2m - 1 has at most 23 fraction bits for float32/float16/bf16 input, so
comparing it with the 23-bit uniform u is *exactly* unbiased; for float64
the probability is resolved to 2^-23.

C(x) is a float32 with a zero mantissa. Wire format (d entries), in order:
    signs  uint32[ceil(d / 32)]   1 bit per entry (1 = negative), ops.pack_bits(., 1)
    exps   uint32[ceil(d / 4)]    8-bit biased exponent E per entry, ops.pack_bits(., 8):
                                  E = 0 → 0; 1..254 → 2^(E-127); 255 → inf
    decoded = float32 with bits sign << 31 | E << 23, except (sign 1, E 0) = NaN
So 9 bits per entry plus padding of the last words.

Range and non-finite input: ±inf is sent as (sign, 255) → ±inf; NaN as
(1, 0) → NaN. Values from 2^127 up may round to 2^128 = inf (the float32
range ends), and fp16 values from 2^15 may round to 2^16, which is inf in
fp16 (the output is cast to the input dtype). Nothing non-finite comes out
finite. (XLA on CPU treats float32 subnormal inputs as 0, so on the JAX
backend they decode to 0; NumPy rounds them as above.)

Gather: the 9-bit codes are not summable on the wire. Written with the
fused ops ``natural_pack`` and ``natural_unpack`` (``compressors.fused``),
whose compositions are the rule above: on NumPy, and on JAX on the CPU,
each is one pass over memory on all cores.
"""
from __future__ import annotations

import math

from compressors.core import Compressor, Law, fixed, single_round, upcast, words
from compressors.registry import canonical, register


def _compress(ops, x, state, keys):
    return ops.natural_pack(upcast(ops, ops.reshape(x, (-1,))), keys.worker), state


def _decompress(ops, payload, x):
    signs, exps = payload
    return ops.astype(ops.reshape(ops.natural_unpack(signs, exps, x.size), x.shape), x.dtype)


def _bits(shape, dtype) -> int:
    d = math.prod(shape)
    return 32 * (words(d, 1) + words(d, 8))


@register("natural", paper="Horváth et al. 2019, natural compression")
def natural() -> Compressor:
    """Natural compression: unbiased random rounding to a neighbouring power of two (9 bits)."""
    leaf = single_round(law=Law.GATHER, bits=_bits, compress=_compress, decompress=_decompress)
    return Compressor(canonical("natural"), fixed(leaf), unbiased=True, doc="random rounding to powers of two")
