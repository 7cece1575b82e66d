"""Op semantics (see ``tests/backends/semantics.py``): ``pack_bits`` /
``unpack_bits`` for every code width.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.backends.ops_backends import OPS_BACKENDS, assert_same_bits, get_ops, to_numpy
from tests.backends.semantics import HYP, covers, put


def pack_oracle(codes, bits):
    per = 32 // bits
    words = []
    for w in range(-(-len(codes) // per)):
        acc = 0
        for j, c in enumerate(codes[w * per:(w + 1) * per]):
            acc |= int(c) << (j * bits)
        words.append(acc)
    return np.array(words, np.uint32)


@covers("pack_bits", "unpack_bits")
@pytest.mark.parametrize("bits", list(range(1, 17)) + [32])
@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 100])
def test_pack_unpack_round_trip(ops, bits, n):
    rng = np.random.default_rng(bits * 1000 + n)
    codes = rng.integers(0, 2 ** bits, size=n, dtype=np.uint64).astype(np.uint32)
    words = ops.pack_bits(put(ops, codes), bits)
    assert_same_bits(words, pack_oracle(codes, bits), "pack_bits")
    assert to_numpy(words).size == -(-n // (32 // bits))
    assert_same_bits(ops.unpack_bits(words, bits, n), codes, "unpack_bits")
    if n:
        assert_same_bits(ops.unpack_bits(words, bits, n - 1), codes[:-1], "unpack prefix")


@covers("pack_bits", "unpack_bits")
@pytest.mark.parametrize("backend", OPS_BACKENDS)
@HYP
@given(st.integers(1, 32).filter(lambda b: b <= 16 or b == 32), st.data())
def test_pack_unpack_hypothesis(backend, bits, data):
    ops = get_ops(backend)
    codes = np.array(data.draw(st.lists(st.integers(0, 2 ** bits - 1), max_size=80)), np.uint32)
    words = ops.pack_bits(put(ops, codes), bits)
    assert_same_bits(words, pack_oracle(codes, bits), "pack_bits")
    assert_same_bits(ops.unpack_bits(words, bits, codes.size), codes, "unpack_bits")


def test_pack_bits_rejects_bad_width():
    for backend in OPS_BACKENDS:
        ops = get_ops(backend)
        with pytest.raises(ValueError):
            ops.pack_bits(put(ops, np.zeros(3, np.uint32)), 0)
        with pytest.raises(ValueError):
            ops.unpack_bits(put(ops, np.zeros(3, np.uint32)), 33, 3)
