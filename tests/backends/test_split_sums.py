"""``sign_split_sums``, ``sign_split_pack`` and ``sum_abs_pack`` on the NumPy binding: the one-pass kernel
(``backends.numpy.sums``) returns the composition's bits (``compressors.fused.Fused``) at
every size the kernel takes, around its thresholds, for float32 and float64 and at the
edges of the range (``sign_split_pack`` on JAX's custom call too); and the halving sums it
shares with ``sum``/``sum_abs`` keep their bits."""
from __future__ import annotations

import numpy as np
import pytest

from backends.numpy import sign_sums, sums
from backends.numpy.ops import OPS
from tests.backends.ops_backends import maybe_x64
from compressors.fused import Fused

THRESHOLD = sums.FOLD * sums.FOLD_COLS  # from here the kernel folds in column tasks
SIZES = [0, 1, 2, 7, 2 * sums.SUM_ROW - 1, 2 * sums.SUM_ROW, THRESHOLD - 1, THRESHOLD, THRESHOLD + 1,
         THRESHOLD // 2 + 1, sums.SUM_PARALLEL_MIN - 3, sums.SUM_PARALLEL_MIN + 4097, 16 * THRESHOLD + 5,
         9 * THRESHOLD + 1]  # the last: row 9 partial in the first column task, rows 9..15 padding after it


def vector(n, dtype, seed=0, bad=False, scale=1.0):
    rng = np.random.default_rng(seed + n)
    x = (rng.standard_normal(n) * scale).astype(dtype)
    if n > 16:
        x[rng.choice(n, 8, replace=False)] = np.array([0.0, -0.0, 1e38, -1e38, 1e-38, -1e-38,
                                                       np.finfo(dtype).tiny / 8, -np.finfo(dtype).max], dtype)
    if bad and n > 16:
        x[rng.choice(n, 3, replace=False)] = [np.nan, np.inf, -np.inf]
    return x


def bits(a):
    a = np.asarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("bad", [False, True])
def test_kernel_gives_the_composition_bits(dtype, n, bad):
    x = vector(n, dtype, bad=bad)
    scale = 2.0 ** -max(n - 1, 0).bit_length()
    got = OPS.sign_split_sums(x, scale)
    want = Fused.sign_split_sums(OPS, x, scale)
    assert got.dtype == dtype and got.shape == (5,)
    np.testing.assert_array_equal(bits(got), bits(want))
    assert np.isnan(got[4]) == (bad and n > 16)
    if not bad:
        pos = x >= 0
        assert got[1] == pos.sum() and got[3] == (~pos).sum()  # the counts (exact below 2^24)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [16 * THRESHOLD, 16 * THRESHOLD - 4097])
def test_all_negative(dtype, n):
    """sum(x * 0) of negative entries: -0.0 on a power-of-two size (no padding), +0.0 once
    padding is added: the sixteen rows held in registers add as the rows in memory did."""
    x = -np.linspace(1.0, 2.0, n, dtype=dtype)
    got = OPS.sign_split_sums(x, 2.0 ** -24)
    np.testing.assert_array_equal(bits(got), bits(Fused.sign_split_sums(OPS, x, 2.0 ** -24)))
    assert np.signbit(got[4]) == (n == 16 * THRESHOLD) and got[1] == 0 and got[3] == n


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
def test_split_pack_gives_the_composition_bits(dtype, n):
    x = vector(n, dtype, bad=True)
    scale = 2.0 ** -max(n - 1, 0).bit_length()
    sums_, words = OPS.sign_split_pack(x, scale)
    want_sums, want_words = Fused.sign_split_pack(OPS, x, scale)
    np.testing.assert_array_equal(bits(sums_), bits(want_sums))
    assert words.dtype == np.uint32 and words.shape == (-(-n // 32),)
    np.testing.assert_array_equal(words, want_words)
    if n >= 1 << 15:  # JAX's custom call (smaller tensors take XLA's composition)
        import jax.numpy as jnp

        import backends
        # XLA's threads treat subnormal operands as zero: outside the contract (docs/ops.md)
        x = np.where(np.abs(x) < np.finfo(dtype).tiny, dtype(0), x)
        want_sums, want_words = Fused.sign_split_pack(OPS, x, scale)
        with maybe_x64(dtype):
            j_sums, j_words = backends.get("jax").sign_split_pack(jnp.asarray(x), scale)
            np.testing.assert_array_equal(bits(np.asarray(j_sums)), bits(want_sums))
            np.testing.assert_array_equal(np.asarray(j_words), want_words)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("bad", [False, True])
def test_sum_abs_pack_gives_the_composition_bits(dtype, n, bad):
    """The scaled sign's encoder: the L1 norm and the sign bits from one pass are the
    bits of ``sum_abs`` and ``pack_signs`` (NaN and inf entries, 1e±38, subnormals,
    signed zeros), on NumPy and on JAX's custom call."""
    x = vector(n, dtype, bad=bad)
    scale = 2.0 ** -max(n - 1, 0).bit_length()
    total, words = OPS.sum_abs_pack(x, scale)
    want_total, want_words = Fused.sum_abs_pack(OPS, x, scale)
    assert total.shape == () and total.dtype == dtype and words.dtype == np.uint32
    np.testing.assert_array_equal(bits(total), bits(want_total))
    np.testing.assert_array_equal(words, want_words)
    np.testing.assert_array_equal(bits(total), bits(OPS.sum_abs(x, scale)))
    assert np.isnan(total) == (bad and n > 16)
    if n >= 1 << 15:
        import jax.numpy as jnp

        import backends
        x = np.where(np.abs(x) < np.finfo(dtype).tiny, dtype(0), x)  # XLA flushes subnormal operands
        want_total, want_words = Fused.sum_abs_pack(OPS, x, scale)
        with maybe_x64(dtype):
            j_total, j_words = backends.get("jax").sum_abs_pack(jnp.asarray(x), scale)
            np.testing.assert_array_equal(bits(np.asarray(j_total)), bits(want_total))
            np.testing.assert_array_equal(np.asarray(j_words), want_words)


@pytest.mark.parametrize("n", [THRESHOLD + 33, 9 * THRESHOLD + 1, sums.SUM_PARALLEL_MIN + 4097])
def test_sum_abs_pack_writes_every_word_of_a_recycled_buffer(n):
    x = vector(n, np.float32, seed=6)
    words = np.full(-(-n // 32), 0xFFFFFFFF, np.uint32)
    out = np.empty(1, np.float32)
    sign_sums.abs_sum_pack_into(x, np.float32(1.0), out, words)
    np.testing.assert_array_equal(words, Fused.pack_signs(OPS, x))
    np.testing.assert_array_equal(bits(out[0]), bits(Fused.sum_abs(OPS, x)))


@pytest.mark.parametrize("n", [THRESHOLD + 33, 9 * THRESHOLD + 1, sums.SUM_PARALLEL_MIN + 4097])
def test_split_pack_writes_every_word_of_a_recycled_buffer(n):
    """Each column task packs its rows' words: together they cover every word, the
    last partial one with zeros past the end, whatever the buffer held."""
    x = vector(n, np.float32, seed=5)
    words = np.full(-(-n // 32), 0xFFFFFFFF, np.uint32)
    out = np.empty(5, np.float32)
    sign_sums.split_sums_into(x, np.float32(1.0), out, words)
    np.testing.assert_array_equal(words, Fused.pack_signs(OPS, x))


def test_only_zero_and_negative_zero():
    """x >= 0 holds for -0.0: all on the positive side; the sums stay +0.0 (+0.0 padding)."""
    x = np.full(THRESHOLD + 3, -0.0, np.float32)
    got = OPS.sign_split_sums(x, 1.0)
    np.testing.assert_array_equal(bits(got), bits(Fused.sign_split_sums(OPS, x, 1.0)))
    assert got[1] == x.size and got[3] == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sums_are_exact_where_the_scale_keeps_them_finite(dtype):
    """Entries of the largest magnitude scaled by 2^-k (2^k >= n) cannot overflow the sum."""
    n = THRESHOLD * 2
    x = np.full(n, np.finfo(dtype).max, dtype)
    x[1::2] = -np.finfo(dtype).max
    k = (n - 1).bit_length()
    got = OPS.sign_split_sums(x, 2.0 ** -k)
    assert np.all(np.isfinite(got))
    assert got[0] / got[1] * 2.0 ** k == np.finfo(dtype).max  # the mean, as onebit takes it
    assert got[2] / got[3] * 2.0 ** k == np.finfo(dtype).max


@pytest.mark.parametrize("n", [THRESHOLD // 2 + 1, 3 * THRESHOLD + 1, 9 * THRESHOLD + 1, 16 * THRESHOLD,
                               sums.SUM_PARALLEL_MIN + 1])
@pytest.mark.parametrize("absolute", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_and_sum_abs_keep_the_halving_order(n, absolute, dtype):
    """The kernel's column tasks (with partial and padding rows) against the NumPy pass per level."""
    x = (np.random.default_rng(n).standard_normal(n) * (1e30 if dtype == np.float32 else 1e300)).astype(dtype)
    x[::97] = -0.0
    got = sums.kernel_sum(x, absolute)
    assert np.isfinite(got)  # a finite sum, where a different order gives different bits
    y = np.abs(x) if absolute else x
    p = 1 << (n - 1).bit_length()
    ref = np.concatenate([y, np.zeros(p - n, dtype)])
    while ref.size > 1:
        ref = ref[: ref.size // 2] + ref[ref.size // 2:]
    np.testing.assert_array_equal(bits(got), bits(ref[0]))
