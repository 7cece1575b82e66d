"""Op semantics (see ``tests/backends/semantics.py``): threefry keys,
``fold_in``, ``random_bits`` and ``uniform``, bit for bit as ``jax.random``; ``random_words``,
both words of JAX's threefry blocks.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from backends.numpy import threefry
from tests.backends.ops_backends import assert_same_bits
from tests.backends.semantics import covers, put


def test_threefry_known_answers():
    """Random123's known-answer vectors for threefry2x32 with 20 rounds."""
    cases = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
             ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
             ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]
    for key, ctr, want in cases:
        y0, y1 = threefry.threefry2x32(key[0], key[1], np.uint32(ctr[0]), np.uint32(ctr[1]))
        assert (int(y0), int(y1)) == want


@covers("key", "fold_in")
@pytest.mark.parametrize("seed", [0, 1, 42, 2 ** 31 - 1, 2 ** 32 - 1, -1, -7])
def test_key_and_fold_in_match_jax(ops, seed):
    want = np.asarray(jax.random.PRNGKey(seed))
    k = ops.key(seed)
    assert_same_bits(k, want, "key")
    for data in [0, 1, 17, 2 ** 31, 2 ** 32 - 1]:
        assert_same_bits(ops.fold_in(k, data), np.asarray(jax.random.fold_in(jnp.asarray(want), data)), "fold_in")
    # a uint32 array datum, as compressors fold in traced values
    assert_same_bits(ops.fold_in(k, put(ops, np.uint32(5))), np.asarray(jax.random.fold_in(jnp.asarray(want), 5)),
                     "fold_in array")


@covers("random_bits", "uniform")
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (2, 3, 4), (1000,), (300_001,)])
def test_random_bits_and_uniform_match_jax(ops, shape):
    key = jax.random.fold_in(jax.random.PRNGKey(3), 11)
    k = ops.asarray(np.asarray(key))
    want = np.asarray(jax.random.bits(key, shape, jnp.uint32))
    assert_same_bits(ops.random_bits(k, shape), want, "random_bits")
    u = np.asarray(jax.random.uniform(key, shape, jnp.float32))
    assert_same_bits(ops.uniform(k, shape), u, "uniform")
    formula = ((want >> 9) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)
    assert_same_bits(u, formula, "uniform formula")


def test_random_bits_reference_matches_kernel():
    key = threefry.fold_in(threefry.key(9), 4)
    assert_same_bits(threefry.random_bits(key, (4099,)), threefry.random_bits_reference(key, (4099,)), "kernel")


@covers("random_words")
@pytest.mark.parametrize("shape", [(), (0,), (1,), (2,), (7,), (3, 5), (2, 3, 4), (4097,), (1 << 18,), (300_001,)])
def test_random_words_are_both_words_of_the_blocks(ops, shape):
    """Word 2j is y0 and 2j + 1 is y1 of threefry2x32(key, (0, j)), JAX's own primitive; each pair
    xors to random_bits' word j (the same blocks)."""
    from jax.extend.random import threefry2x32_p
    key = jax.random.fold_in(jax.random.PRNGKey(3), 11)
    k = ops.asarray(np.asarray(key))
    n = int(np.prod(shape, dtype=np.int64))
    j = jnp.arange(-(-n // 2), dtype=jnp.uint32)
    y0, y1 = threefry2x32_p.bind(key[0], key[1], jnp.zeros_like(j), j)
    want = np.stack([np.asarray(y0), np.asarray(y1)], axis=1).reshape(-1)[:n].reshape(shape)
    got = ops.random_words(k, shape)
    assert_same_bits(got, want, "random_words")
    flat = np.asarray(want).reshape(-1)
    pairs = flat[: n - n % 2].reshape(-1, 2)
    bits = np.asarray(jax.random.bits(key, (n // 2,), jnp.uint32))
    assert np.array_equal(pairs[:, 0] ^ pairs[:, 1], bits)
    assert_same_bits(threefry.random_words_reference(np.asarray(key), shape), want, "reference")


@pytest.mark.parametrize("blocks,chunk", [(1, 16), (1000, 64), (1000, 1 << 16), (4097, 1024)])
def test_draw_only_computes_the_stream_it_times(blocks, chunk):
    """The benchmarks' draw floor (threefry.draw_seconds) runs the real blocks: its per-chunk xor
    equals the xor of random_words' words of those blocks."""
    words = threefry.random_words(np.array([0, 1], np.uint32), (2 * blocks,))
    acc = threefry._draw_only(np.uint32(0), np.uint32(1), blocks, chunk)
    assert acc.size == -(-blocks // chunk)
    for j, got in enumerate(acc):
        want = np.bitwise_xor.reduce(words[2 * j * chunk:2 * min(blocks, (j + 1) * chunk)])
        assert got == want
    assert threefry.draw_seconds(0) == 0.0 and threefry.draw_seconds(blocks, repeat=1) > 0.0


@pytest.mark.parametrize("m0, m1", [(0, 0), (0, 1), (1, 2), (0, 5), (6, 19), (3, 130), (5, 4104), (2, 4096)])
def test_fill_words_writes_its_words_and_nothing_past_them(m0, m1):
    """fill_words (the fused quantizer's draws, a share of a block at a time) writes the
    random_words stream from word 2·(m0 // 2) and nothing past the last block, for odd and even
    starts, odd and even block counts (two streams and a tail) and an empty range."""
    a, b, c = threefry.key_schedule(np.uint32(7), np.uint32(0xDEADBEEF))
    size = 2 * (-(-m1 // 2) - m0 // 2) + 4
    got = np.full(size, 0xA5A5A5A5, np.uint32)
    threefry.fill_words(a, b, c, m0, m1, got)
    ref = threefry.random_words_reference(np.array([7, 0xDEADBEEF], np.uint32), (max(m1, 1) + 1,))
    j0 = 2 * (m0 // 2)
    n = max(2 * (-(-m1 // 2)) - j0, 0)   # the words of the blocks drawn
    np.testing.assert_array_equal(got[:m1 - j0], ref[j0:m1])
    assert np.all(got[n:] == 0xA5A5A5A5)
