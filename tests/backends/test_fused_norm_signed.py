"""The signed (sign-magnitude) mode of ``quantize_pack``/``dequantize``, the
``bucket_norm`` fused op, and the threaded 16-bit casts: NumPy's kernels give
the bits of the reference composition, which JAX runs as written.
"""
from __future__ import annotations

import numpy as np
import pytest

import backends
from backends.numpy import casts, fused_norm, fused_quant
from backends.numpy.arrays import BF16
from compressors.fused import Fused
from tests.backends.ops_backends import assert_same_bits
from tests.backends.test_fused import BIG, FLOATS, JAX_SIZES, SIZES, data, on_jax

NP = backends.get("numpy")


def same_or_both_nan(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    nan = np.isnan(a)
    assert np.array_equal(nan, np.isnan(b)), f"{what}: NaN in different places"
    assert_same_bits(a[~nan], b[~nan], what)  # NaN payloads are outside the contract


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("bits,top", [(2, 1.0), (3, 3.0), (5, 12.0), (8, 127.0), (16, 32767.0)])
def test_signed_quantize_pack_and_dequantize(n, dtype, bits, top):
    bucket = 512 if n > 600 else 7
    x = data(n, dtype)
    nb = -(-n // bucket)
    rng = np.random.default_rng(bits)
    off = np.zeros(nb, dtype) if bits != 5 else rng.standard_normal(nb).astype(dtype)  # an offset too
    inv = (rng.random(nb) * 4 + 0.25).astype(dtype)
    key = NP.key(7)
    words = NP.quantize_pack(x, off, inv, bucket, top, bits, key, signed=True)
    ref = Fused.quantize_pack(NP, x, off, inv, bucket, top, bits, key, signed=True)
    assert_same_bits(words, ref, "signed quantize_pack")
    if n in JAX_SIZES:
        assert_same_bits(on_jax(lambda o, *a: Fused.quantize_pack(o, *a, signed=True), x, off, inv, bucket, top,
                                bits, key, dtype=dtype), ref, "signed quantize_pack (JAX)")
    codes = NP.unpack_bits(words, bits, n).astype(np.int64)
    high = 1 << (bits - 1)
    magnitude = np.where(codes >= high, codes - high, codes)
    assert magnitude.max() <= top
    v = x - np.repeat(off, bucket)[:n]
    assert np.all((codes >= high) == (v < 0))  # the top bit is the sign (NaN and -0.0: clear)
    assert np.all(codes[np.isnan(x)] == 0)
    step = (1.0 / inv).astype(dtype)
    out = NP.dequantize(words, bits, n, off, step, bucket, signed=True)
    assert_same_bits(out, Fused.dequantize(NP, words, bits, n, off, step, bucket, signed=True), "signed dequantize")
    if n in JAX_SIZES:
        assert_same_bits(on_jax(lambda o, *a: Fused.dequantize(o, *a, signed=True), words, bits, n, off, step,
                                bucket, dtype=dtype), out, "signed dequantize (JAX)")


@pytest.mark.parametrize("bits,signed,top", [(1, False, 1.0), (2, True, 1.0), (2, False, 3.0), (3, True, 3.0),
                                             (4, False, 15.0), (8, True, 127.0)])
@pytest.mark.parametrize("bucket", [7, 50, 0])
@pytest.mark.parametrize("n", [2 * fused_quant.SUB + 4_099, BIG])
def test_quantize_pack_buckets_that_straddle_the_kernels_shares(n, bucket, bits, signed, top):
    """quantize_pack draws, rounds and packs ``SUB`` entries of a block at a time: buckets that
    cross a share's edge (7, 50), one bucket over all of them (0, terngrad's), the {0, 1} codes'
    own rounding (top 1), serial and threaded; codes, their decode and the composition agree bit
    for bit, and a NaN entry codes 0."""
    x = data(n, np.float32, seed=bits)
    x[5_000] = np.nan
    x[n - 3] = -np.inf
    nb = -(-n // bucket) if bucket else 1
    rng = np.random.default_rng(bucket + bits)
    off = np.zeros(nb, np.float32) if signed else (rng.standard_normal(nb) - 3).astype(np.float32)
    inv = (rng.random(nb) * 4 + 0.25).astype(np.float32)
    key = NP.key(13)
    words = NP.quantize_pack(x, off, inv, bucket, top, bits, key, signed=signed)
    assert_same_bits(words, Fused.quantize_pack(NP, x, off, inv, bucket, top, bits, key, signed=signed),
                     "quantize_pack")
    codes = NP.unpack_bits(words, bits, n)
    assert codes[5_000] == 0 and 0 < np.count_nonzero(codes) < n
    step = (1.0 / inv).astype(np.float32)
    out = NP.dequantize(words, bits, n, off, step, bucket, signed=signed)
    same_or_both_nan(out, Fused.dequantize(NP, words, bits, n, off, step, bucket, signed=signed), "dequantize")


def test_signed_rounding_is_unbiased_on_both_sides():
    """E[decoded] = x within 2^-17 of a step + sampling error, for x > 0 and x < 0."""
    n = 1 << 20
    for value in (0.3, -0.3, -1.7):
        x = np.full(n, value, np.float32)
        zero, inv = np.zeros(1, np.float32), np.ones(1, np.float32)
        out = NP.dequantize(NP.quantize_pack(x, zero, inv, 0, 3.0, 3, NP.key(3), signed=True), 3, n, zero, inv, 0,
                            signed=True)
        frac = abs(value) % 1
        assert set(np.unique(np.abs(out))) == {np.floor(abs(value)), np.floor(abs(value)) + 1}
        assert np.all(np.sign(out[out != 0]) == np.sign(value))
        assert abs(out.mean() - np.float32(value)) <= 2.0**-17 + 5 * np.sqrt(frac * (1 - frac) / n), value


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", SIZES + [0])
@pytest.mark.parametrize("bucket", [0, 1, 3, 512, 10**7])
def test_bucket_norm(n, dtype, bucket):
    x = data(n, dtype, seed=n)
    if n > 100:
        x[50:60] = dtype.type(1e38) if dtype == np.float32 else dtype.type(1e300)  # squares would overflow
        x[60:70] = dtype.type(1e-39) if dtype == np.float32 else dtype.type(1e-310)  # subnormal entries
    ref = Fused.bucket_norm(NP, x, bucket)
    got = NP.bucket_norm(x, bucket)
    same_or_both_nan(got, ref, "bucket_norm")
    finite = np.isfinite(got)
    if n > 100:
        assert not finite.all()  # the NaN/inf entries of data() poison their buckets
        assert np.isfinite(np.asarray(ref)[finite]).all()
    if n in JAX_SIZES and bucket in (0, 512):
        same_or_both_nan(on_jax(Fused.bucket_norm, x, bucket, dtype=dtype), ref, "bucket_norm (JAX)")


def test_bucket_norm_is_the_norm():
    rng = np.random.default_rng(2)
    x = rng.standard_normal(BIG).astype(np.float32)
    got = NP.bucket_norm(x, 512).astype(np.float64)
    rows = np.pad(x.astype(np.float64), (0, -x.size % 512)).reshape(-1, 512)
    np.testing.assert_allclose(got, np.sqrt((rows ** 2).sum(axis=1)), rtol=1e-5)
    big = np.full(1000, 3e38, np.float32)  # ||x|| = 9.5e39 is not a float32: inf, never a wrong finite value
    assert np.isinf(NP.bucket_norm(big, 4)).all() and np.isinf(NP.bucket_norm(big, 0)[0])
    assert NP.bucket_norm(np.full(1000, 1e38, np.float32), 4)[0] == np.float32(2e38)  # 2e38 fits: no overflow
    assert NP.bucket_norm(np.zeros(700, np.float32), 512).tolist() == [0.0, 0.0]
    assert fused_norm.applies(x, 512) and not fused_norm.applies(x, 0)  # one 1M-entry bucket: the composition


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n, bucket", [(70_000, 0), (66_010, 66_000), (200_003, 70_000)])
@pytest.mark.parametrize("case", ["normal", "huge", "nan", "tiny", "beyond 2**99", "zeros"])
def test_bucket_norm_long_buckets(n, bucket, case, dtype):
    """Buckets longer than ROW_MAX (two threaded passes, or the composition past 2**99)
    have the composition's bits: a short last bucket, overflowing squares, NaN, entries
    whose scaled values are subnormal, a max that takes the composition, all zeros."""
    x = np.random.default_rng(n).standard_normal(n).astype(dtype)
    if case == "huge":
        x[5] = dtype.type(2.0**98)  # its square overflows either float
    elif case == "nan":
        x[-3] = np.nan
    elif case == "tiny":
        x *= dtype.type(1e-30)
        x[9] = 1.0
    elif case == "beyond 2**99":
        x[11] = dtype.type(2.0**100)
    elif case == "zeros":
        x[:] = 0
    assert not fused_norm.applies(x, bucket)
    assert (fused_norm.long_buckets(x, bucket) is None) == (case == "beyond 2**99")
    same_or_both_nan(NP.bucket_norm(x, bucket), Fused.bucket_norm(NP, x, bucket), "bucket_norm")


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16])
def test_threaded_casts_match_one_thread(dtype):
    x = data(BIG, np.float32)
    x[:7] = [65504.0, 65520.0, 6e-8, -3e-8, 1e-45, 3.4e38, -0.0]  # fp16 overflow, subnormals, bf16's range
    narrow_one, widen_one = casts.NARROW[dtype]
    want = narrow_one(x, np.empty(x.size, np.uint16))
    got = NP.astype(x, dtype)
    assert_same_bits(got.view(np.uint16), want, "narrow")
    assert_same_bits(NP.astype(got, np.float32), widen_one(want, np.empty(x.size, np.float32)), "widen")
    ints = NP.astype(x * np.float32(1e3), np.int8)  # the threaded saturating cast
    small = NP.astype(x[:1000] * np.float32(1e3), np.int8)
    assert_same_bits(ints[:1000], small, "saturating cast")
