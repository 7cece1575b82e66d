"""Building blocks compressors compose from the ops namespace: order
statistics and integer hashing.

None of these is an op: each is a short composition of ops, so it runs on
every backend and lowers to MindSpore with no new kernel or rule, and it is
as exact as its parts (the conformance suite covers what a built-in
compressor calls here). ``tests/compressors/test_kit.py`` checks them
against NumPy oracles on every backend.

Order statistics. ``top_k`` over all n entries *is* a sort: descending in
IEEE totalOrder (NaN above +inf, +0 above -0), ties by lowest index.

* :func:`sort` / :func:`argsort` — ascending (the reverse of that order);
* :func:`kth_largest` — the k-th entry of the descending sort;
* :func:`median` — of a 1-D float array (mean of the two middle entries
  when n is even);
* :func:`median_of` — the *elementwise* median of a few arrays of one shape,
  by an odd-even transposition sorting network of ``minimum``/``maximum``
  (no top-k; NaN in any input makes that entry NaN).

Hashing. :func:`hash32` mixes uint32 values with a seed through the
MurmurHash3 finalizer (Appleby 2011): xor-shifts and wrap-around uint32
multiplications, a bijection of the 32-bit words for each seed whose
output bits each depend on every input bit. With seeds drawn from a shared
key it gives every worker the same hash function (``keys.fixed``: the same
one at every step too).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from compressors.core import upcast
from compressors.ops import Array, Ops

_M1, _M2 = 0x85EBCA6B, 0xC2B2AE35  # MurmurHash3 fmix32 multipliers


# ---------------------------------------------------------------------------------------------
# Order statistics
# ---------------------------------------------------------------------------------------------

def _reverse(ops: Ops, x: Array) -> Array:
    n = x.size
    return ops.gather(x, (n - 1) - ops.arange(n))


def argsort(ops: Ops, x: Array) -> Array:
    """int32 indices that sort a 1-D array ascending (ties: the highest
    index first, the reverse of ``top_k``'s lowest-first descending order)."""
    if x.size == 0:
        return ops.zeros((0,), np.int32)
    return _reverse(ops, ops.top_k(x, x.size)[1])


def sort(ops: Ops, x: Array) -> Array:
    """A 1-D array sorted ascending (IEEE totalOrder: -0 before +0, NaN last)."""
    if x.size == 0:
        return x
    return _reverse(ops, ops.top_k(x, x.size)[0])


def kth_largest(ops: Ops, x: Array, k: int) -> Array:
    """The k-th largest entry (k = 1 is the maximum) of a 1-D array, 0-d."""
    if not 0 < k <= x.size:
        raise ValueError(f"kth_largest: k must be in [1, {x.size}], got {k}")
    return ops.top_k(x, k)[0][k - 1]


def median(ops: Ops, x: Array) -> Array:
    """The median of a 1-D float array, 0-d in x's dtype: the middle entry
    of the sorted array, or the mean of the two middle ones (computed in
    :func:`~compressors.core.upcast`'s dtype, rounded once)."""
    n = x.size
    if n == 0:
        raise ValueError("median of an empty array")
    top = ops.top_k(x, n // 2 + 1)[0]
    if n % 2:
        return top[n // 2]
    return ops.astype((upcast(ops, top[n // 2 - 1]) + upcast(ops, top[n // 2])) * 0.5, x.dtype)


def median_of(ops: Ops, xs: Sequence[Array]) -> Array:
    """Elementwise median of arrays of one shape and float dtype (the mean of
    the two middle values for an even count, as :func:`median`)."""
    xs = list(xs)
    if not xs:
        raise ValueError("median_of needs at least one array")
    m = len(xs)
    for rnd in range(m):  # odd-even transposition: m rounds sort m values
        for i in range(rnd % 2, m - 1, 2):
            xs[i], xs[i + 1] = ops.minimum(xs[i], xs[i + 1]), ops.maximum(xs[i], xs[i + 1])
    if m % 2:
        return xs[m // 2]
    dt = xs[0].dtype
    return ops.astype((upcast(ops, xs[m // 2 - 1]) + upcast(ops, xs[m // 2])) * 0.5, dt)


# ---------------------------------------------------------------------------------------------
# Hashing
# ---------------------------------------------------------------------------------------------

def hash32(ops: Ops, x: Array, seed: Array) -> Array:
    """MurmurHash3's 32-bit finalizer of ``x ^ seed`` (uint32 in, uint32 out;
    seed a uint32 array that broadcasts against x)::

        h = x ^ seed;  h ^= h >> 16;  h *= 0x85EBCA6B;  h ^= h >> 13
        h *= 0xC2B2AE35;  h ^= h >> 16          (products modulo 2**32)
    """
    u32 = np.uint32
    h = x ^ seed
    h = h ^ (h >> ops.asarray(u32(16)))
    h = h * ops.asarray(u32(_M1))
    h = h ^ (h >> ops.asarray(u32(13)))
    h = h * ops.asarray(u32(_M2))
    return h ^ (h >> ops.asarray(u32(16)))

