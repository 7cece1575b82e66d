"""Pieces the quantizers and sparsifiers share: buckets, stochastic rounding,
code packing, and the NaN poison term.

Buckets: the flattened tensor (d entries) is cut into ``nb = ceil(d / B)``
rows of B consecutive entries; the last row is padded by repeating the final
entry (min-max scales: the range does not widen) or with zeros (norms). B = 0
in a factory means one bucket for the whole tensor.

Division by per-bucket scales goes through :func:`divide` (a power of two
and the reciprocal of a mantissa): XLA turns ``rows / column(scale)`` and
``x / const`` into a multiply by a reciprocal, and flushes a subnormal
reciprocal of a large scale to zero, so a plain division would neither agree
bit for bit with NumPy nor survive scales above 2^126.

Stochastic rounding (unbiased): ``SR(y) = floor(y) + [u < y - floor(y)]``
with ``u ~ U[0, 1)`` from the worker key, so ``E[SR(y)] = y``.
"""
from __future__ import annotations

import math

import numpy as np

from compressors.core import check, compute_dtype, upcast, words
from compressors.fused import bucket_grid


def check_bucket(name: str, bucket) -> None:
    """The ValueError for a bad ``bucket`` (an int >= 1, or 0 = whole tensor)."""
    check(isinstance(bucket, int) and not isinstance(bucket, bool) and bucket >= 0,
          f"{name}: bucket must be an int >= 1, or 0 for one bucket per tensor, got {bucket!r}")


def to_buckets(ops, x, bucket: int, edge: bool = True):
    """x (any shape) as a (nb, B) matrix in the compute dtype. The padding of
    the last row repeats the final entry (``edge``: min and max unchanged) or
    is zero (norms unchanged)."""
    flat = upcast(ops, ops.reshape(x, (-1,)))
    d = flat.size
    nb, b = bucket_grid(d, bucket)
    if nb * b > d:
        flat = ops.gather(flat, ops.minimum(ops.arange(nb * b), d - 1)) if edge else ops.pad(flat, nb * b - d)
    return ops.reshape(flat, (nb, b))


def from_buckets(ops, rows, x):
    """Inverse of :func:`to_buckets`: drop the padding, x's shape and dtype."""
    flat = ops.reshape(rows, (-1,))[: x.size]
    return ops.astype(ops.reshape(flat, x.shape), x.dtype)


def column(ops, v):
    """A per-bucket vector as an (nb, 1) column that broadcasts over rows."""
    return ops.reshape(v, (v.shape[0], 1))


TINY = 2.0**-126  # smallest normal float32


def floored(ops, v):
    """max(v, 2^-126): a scale that is never 0 or subnormal. Quantizers floor
    their scales: the grid is then at most that fine, the estimate stays
    unbiased, and an all-zero bucket still decodes to exact zeros. NaN stays
    NaN, so a non-finite bucket reaches the wire."""
    return ops.maximum(v, TINY)


def divide(ops, rows, scale):
    """rows / scale per row (scale: floored per-row values), as
    2^-e · rows · (1 / m) with scale = m · 2^e, m ∈ [1/2, 1) (ops.frexp): the
    power of two is exact and 1/m ∈ (1, 2] is never subnormal, so no backend
    flushes it to zero. NaN or inf in scale gives NaN/0 rows."""
    m, e = ops.frexp(scale)
    return ops.ldexp(rows, column(ops, -e)) * column(ops, 1.0 / m)


def stochastic_round(ops, y, key):
    """floor(y) + Bernoulli(y - floor(y)), elementwise; unbiased. The Bernoulli
    draw is added as 0/1 (the same values as a select, about half the cost of
    one in MindSpore's CPU kernels)."""
    u = ops.astype(ops.uniform(key, y.shape), y.dtype)
    f = ops.floor(y)
    return f + ops.astype(u < y - f, y.dtype)


def pack(ops, codes, bits: int, d: int):
    """Float or integer codes of a (nb, B) matrix -> packed uint32 words of the
    first d codes (``bits`` each, ``32 // bits`` per word)."""
    flat = ops.reshape(codes, (-1,))[:d]
    return ops.pack_bits(ops.astype(flat, np.uint32), bits)


def unpack(ops, packed, bits: int, d: int, bucket: int, dtype):
    """Packed words -> the codes as a (nb, B) matrix of ``dtype`` (tail 0)."""
    nb, b = bucket_grid(d, bucket)
    codes = ops.astype(ops.unpack_bits(packed, bits, d), dtype)
    return ops.reshape(ops.pad(codes, nb * b - d), (nb, b))


def code_bits(shape, bits: int) -> int:
    """Wire bits of one packed code per entry of a tensor."""
    return 32 * words(math.prod(shape), bits)


def scale_bits(shape, bucket: int, per_bucket: int = 1) -> int:
    """Wire bits of ``per_bucket`` float32 scales per bucket."""
    return 32 * per_bucket * bucket_grid(math.prod(shape), bucket)[0]


def wire_scale(ops, v, dtype):
    """A per-bucket scale as float32 for the wire, and the value the encoder
    must use (the float32 value back in the compute dtype) so encoder and
    decoder agree exactly."""
    w = ops.astype(v, np.float32)
    return w, ops.astype(w, compute_dtype(dtype))


def poison(ops, x, dtype):
    """0 if every entry of x is finite, else NaN: a 0-d ``dtype`` array that
    sparsifiers add to the values they send, so a NaN/inf that is not sent
    still shows up in the decoded tensor (max|x| is NaN or inf, times 0)."""
    flat = ops.reshape(upcast(ops, x), (-1,))
    if flat.size == 0:
        return ops.zeros((), dtype)
    return ops.astype(ops.max(ops.abs(flat)) * 0.0, dtype)
