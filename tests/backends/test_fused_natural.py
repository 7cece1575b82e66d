"""Natural compression's fused codec (``Fused.natural_pack`` / ``natural_unpack``):
the NumPy kernels (``backends.numpy.fused_natural``) return the composition's
bits at every size (serial, threaded, odd tails) for float32 and float64, at
the edges of both ranges, and clear the unused fields of recycled buffers.
"""
from __future__ import annotations

import numpy as np
import pytest

import backends
from backends.numpy import fused_natural
from backends.numpy.blocks import PARALLEL_MIN
from compressors.fused import Fused
from tests.backends.ops_backends import assert_same_bits

NP = backends.get("numpy")
SIZES = [0, 1, 31, 33, 4_099, PARALLEL_MIN + 12_345]
FLOATS = [np.dtype(np.float32), np.dtype(np.float64)]


def edges(dtype) -> np.ndarray:
    f32 = np.finfo(np.float32)
    v = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 1.5, 2.0**-126, -(2.0**-126), 2.0**-127,
         -(2.0**-149), 1e-40, f32.max, -f32.max, 2.0**127, 1.9999999 * 2.0**127, 1e38, -1e-38]
    if np.dtype(dtype) == np.float64:  # beyond float32's range, and float64's own extremes
        v += [2.0**128, -1e300, 1e-300, -(2.0**-1074), 2.0**-126 * (1 - 2.0**-53), np.finfo(np.float64).max,
              2.0**-127 * 3]
    return np.array(v, dtype)


def data(n: int, dtype, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):
        x = (rng.standard_normal(n) * np.exp2(rng.uniform(-140, 130, n))).astype(dtype)
    e = edges(dtype)
    x[rng.permutation(n)[:min(n, e.size)]] = e[:min(n, e.size)]
    return x


def reference(x, key):
    with np.errstate(all="ignore"):  # the composition's ldexp overflows where its result is not taken
        return Fused.natural_pack(NP, x, key)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", SIZES)
def test_pack_and_unpack_return_the_composition_bits(n, dtype):
    x, key = data(n, dtype), NP.key(9)
    want = reference(x, key)
    got = NP.natural_pack(x, key)
    assert_same_bits(got[0], want[0], "natural_pack signs")
    assert_same_bits(got[1], want[1], "natural_pack exponents")
    assert got[0].size == -(-n // 32) and got[1].size == -(-n // 4)
    assert_same_bits(NP.natural_unpack(*got, n), Fused.natural_unpack(NP, *want, n), "natural_unpack")


@pytest.mark.parametrize("dtype", FLOATS)
def test_every_edge_value_alone(dtype):
    """Each edge value in a vector of its own copies (the threaded kernel): no neighbour hides a miss."""
    for v in edges(dtype):
        x = np.full(PARALLEL_MIN + 7, v, dtype)
        want, got = reference(x, NP.key(3)), NP.natural_pack(x, NP.key(3))
        assert_same_bits(got[1], want[1], f"natural_pack exponents of {v!r}")
        assert_same_bits(got[0], want[0], f"natural_pack signs of {v!r}")


def test_decoded_values_are_powers_of_two_around_x():
    x = data(50_000, np.float32, seed=4)
    finite = np.isfinite(x) & (np.abs(x) >= 2.0**-126) & (np.abs(x) < 2.0**127)
    out = NP.natural_unpack(*NP.natural_pack(x, NP.key(1)), x.size)
    lo = np.exp2(np.floor(np.log2(np.abs(x[finite].astype(np.float64)))))
    got = np.abs(out[finite].astype(np.float64))
    assert np.all((got == lo) | (got == 2 * lo))
    assert np.all(np.signbit(out[finite]) == np.signbit(x[finite]))
    assert np.isnan(out[np.isnan(x)]).all() and np.array_equal(out[np.isinf(x)], x[np.isinf(x)])


@pytest.mark.parametrize("n", [33, PARALLEL_MIN + 3])
def test_unused_exponent_bytes_of_a_recycled_buffer_are_cleared(n):
    x = data(n, np.float32)
    signs = np.full(-(-n // 32), 0xFFFFFFFF, np.uint32)
    words = np.full(-(-n // 4), 0xFFFFFFFF, np.uint32)
    key = NP.key(5)
    fused_natural.pack_into(x.view(np.uint32), x, False, np.uint32(key[0]), np.uint32(key[1]), signs, words)
    want = reference(x, key)
    assert_same_bits(signs, want[0], "signs into a garbage buffer")
    assert_same_bits(words, want[1], "exponents into a garbage buffer")


def test_unpack_refuses_words_too_short_for_count():
    signs, exps = NP.natural_pack(np.ones(40, np.float32), NP.key(0))
    with pytest.raises(ValueError, match="natural_unpack: 100 entries do not fit"):
        NP.natural_unpack(signs, exps, 100)


def test_other_dtypes_take_the_composition():
    x = np.array([1.5, -3.0, 0.0], np.float16)
    got = NP.natural_pack(x, NP.key(2))
    assert_same_bits(got[1], reference(x, NP.key(2))[1], "float16 exponents")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [100, PARALLEL_MIN + 5])
def test_mantissas_at_the_uniform_round_up_and_stay(n, dtype):
    """Entries whose fraction equals their uniform (u < p is false: they stay),
    or lies one step either side: the kernels' integer tests at their boundary."""
    from backends.numpy import threefry

    key = NP.key(21)
    k = (threefry.random_bits(key, (n,)) >> np.uint32(9)).astype(np.uint64)  # each entry's 23-bit uniform
    step = np.uint64(1) if np.dtype(dtype) == np.float32 else np.uint64(1) << np.uint64(29)
    m = k * step + (np.arange(n, dtype=np.uint64) % np.uint64(3)).astype(np.uint64) - np.uint64(1)  # k-1, k, k+1
    m = np.where(k == 0, k, m)  # no borrow below 0
    if np.dtype(dtype) == np.float32:
        exp = np.where(np.arange(n) % 5 == 0, 0, 100 + np.arange(n) % 50).astype(np.uint64)  # subnormals too
        x = ((exp << np.uint64(23)) | (m & np.uint64(0x7FFFFF))).astype(np.uint32).view(np.float32)
    else:
        exp = (900 + np.arange(n) % 200).astype(np.uint64)
        x = ((exp << np.uint64(52)) | (m & np.uint64((1 << 52) - 1))).view(np.float64)
    x = np.where(np.arange(n) % 2 == 0, x, -x)
    assert_same_bits(NP.natural_pack(x, key)[1], reference(x, key)[1], "natural_pack exponents at the ties")
