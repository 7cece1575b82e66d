"""``quantize_pack`` with codes {0, 1} (top = 1: terngrad's signed 2-bit codes, 1-bit ones):
NumPy's kernel compares u < |x|·s as (h + 1/2) < |x|·(s·2^16) while s·2^16 is finite, and as
written beyond; both give the reference composition's bits at every scale."""
from __future__ import annotations

import numpy as np
import pytest

from compressors.fused import Fused
from tests.backends.ops_backends import assert_same_bits
from tests.backends.test_fused import BIG, FLOATS, NP, on_jax


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bits,signed", [(1, False), (2, True), (2, False), (8, True)])
def test_codes_of_one_step_at_every_scale(bits, signed, dtype):
    """Codes {0, 1} (top = 1: terngrad, 1-bit) compare u < |x|·s as (h + 1/2) < |x|·(s·2^16)
    while s·2^16 is finite, as written beyond: inverse scales on both sides of float32's
    2^112 limit, subnormal, tiny and huge entries, NaN entries and NaN scales (every code 0, no
    sign bit) give the reference's bits."""
    n = BIG if dtype == np.float32 else 4_099
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(n) * 10.0 ** rng.uniform(-45, 38, n)).astype(dtype)
    x[:6] = [1e-45, -1e-45, 2.0**-126, -0.0, 3e38, -3e38]
    x[rng.integers(0, n, 4)] = np.nan
    bucket = 512
    scales = np.array([2.0**111, 2.0**112, 2.0**113, 2.0**126, np.inf, 1.0, 2.0**-20, 0.0, np.nan], dtype)
    inv = np.resize(scales, -(-n // bucket)).astype(dtype)
    off = np.zeros_like(inv)
    key = NP.key(4)
    ref = Fused.quantize_pack(NP, x, off, inv, bucket, 1.0, bits, key, signed=signed)
    assert_same_bits(NP.quantize_pack(x, off, inv, bucket, 1.0, bits, key, signed=signed), ref,
                     "quantize_pack, codes {0, 1}")
    if signed and dtype == np.float32:  # XLA flushes subnormals (outside the contract: compressors.ops)
        x[np.abs(x) < np.finfo(dtype).tiny] = 0.0
        assert_same_bits(on_jax(Fused.quantize_pack, x, off, inv, bucket, 1.0, bits, key, signed, dtype=dtype),
                         Fused.quantize_pack(NP, x, off, inv, bucket, 1.0, bits, key, signed=signed),
                         "quantize_pack, codes {0, 1} (JAX)")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bits,signed", [(1, False), (2, True)])
@pytest.mark.parametrize("n,bucket", [(1, 0), (33, 0), (4_099, 0), (4_099, 16), (4_099, 50), (BIG + 7, 0),
                                      (BIG + 7, 512), (BIG + 7, 1_000)])
def test_codes_of_one_step_read_off_compare_masks(n, bucket, bits, signed, dtype):
    """1-bit unsigned codes {0, 1} are written a word at a time from compare masks where the
    buckets start whole words (bucket 0 or a multiple of 32; the last partial word, other buckets
    and huge inverse scales go through the codes, as signed 2-bit codes do): the reference's bits
    either way, with NaN, -0.0 and subnormal entries, NaN and huge inverse scales."""
    rng = np.random.default_rng(n + bucket + bits)
    x = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(dtype)
    x[rng.integers(0, n, 3)] = [np.nan, -0.0, -1e-45]
    nb = -(-n // (bucket or n))
    inv = (np.abs(rng.standard_normal(nb)) + 0.1).astype(dtype)
    if nb > 2:
        inv[:2] = [np.nan, 2.0**120]
    off = (rng.standard_normal(nb) * 0.1 * (not signed)).astype(dtype)
    key = NP.key(n)
    assert_same_bits(NP.quantize_pack(x, off, inv, bucket, 1.0, bits, key, signed=signed),
                     Fused.quantize_pack(NP, x, off, inv, bucket, 1.0, bits, key, signed=signed),
                     "quantize_pack from compare masks")

