"""Array-protocol semantics of integer arithmetic (``compressors/ops.py``,
"Integer arithmetic"): floor ``//`` and ``%`` on int32 and uint32, uint32
wrap-around of ``+ - *`` and unary ``-``, large uint32 constants via
``ops.asarray``. Oracles are Python integers. The MindSpore lowering of the
same expressions is checked in ``tests/mindspore/test_integer_lowering.py``.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.backends.ops_backends import assert_same_bits
from tests.backends.semantics import put

I32 = np.array([0, 1, -1, 7, -7, 13, -13, 2**31 - 1, -2**31 + 1, 2**24 + 1, -(2**24 + 3), 123456789, -98765])
U32 = np.array([0, 1, 7, 13, 2**24 + 1, 2**31 - 1, 2**31, 2**31 + 5, 3_000_000_000, 2**32 - 1, 123456789],
               dtype=np.uint64)
MASK = 2**32 - 1


def _py(values, fn, dtype):
    return np.array([fn(int(v)) for v in values], dtype=np.int64).astype(dtype)



@pytest.mark.parametrize("m", [1, 2, 3, 7, -2, -7, 1000, 65537, 2**31 - 1])
def test_int32_floor_division_and_remainder_by_a_python_int(ops, m):
    x = put(ops, I32.astype(np.int32))
    assert_same_bits(x // m, _py(I32, lambda v: v // m, np.int32), f"// {m}")
    assert_same_bits(x % m, _py(I32, lambda v: v % m, np.int32), f"% {m}")


def test_int32_floor_division_and_remainder_between_arrays(ops):
    b = np.array([3, -3, 2, 5, -5, 7, 7, -2, 9, 1000, -1000, -7, 11])
    a = put(ops, I32.astype(np.int32))
    B = put(ops, b.astype(np.int32))
    q = np.array([int(x) // int(y) for x, y in zip(I32, b)]).astype(np.int32)
    r = np.array([int(x) % int(y) for x, y in zip(I32, b)]).astype(np.int32)
    assert_same_bits(a // B, q, "//")
    assert_same_bits(a % B, r, "%")
    # the identity that defines them, and the remainder's sign is the divisor's
    assert np.array_equal(q.astype(np.int64) * b + r, I32)
    assert np.all((r == 0) | (np.sign(r) == np.sign(b)))


@pytest.mark.parametrize("m", [1, 3, 7, 1000, 65536, 2**31 - 1])
def test_uint32_floor_division_and_remainder(ops, m):
    x = put(ops, U32.astype(np.uint32))
    assert_same_bits(x // m, _py(U32, lambda v: v // m, np.uint32), f"// {m}")
    assert_same_bits(x % m, _py(U32, lambda v: v % m, np.uint32), f"% {m}")
    d = np.array([3, 5, 2**31 + 1, 7, 2**32 - 1, 13, 2, 1, 2**20, 9, 4096], dtype=np.uint64)
    X, D = put(ops, U32.astype(np.uint32)), put(ops, d.astype(np.uint32))
    assert_same_bits(X // D, np.array([int(a) // int(b) for a, b in zip(U32, d)], np.uint64).astype(np.uint32), "//")
    assert_same_bits(X % D, np.array([int(a) % int(b) for a, b in zip(U32, d)], np.uint64).astype(np.uint32), "%")


def test_uint32_arithmetic_wraps_modulo_2_32(ops):
    a = U32
    b = np.roll(U32, 4)
    A, B = put(ops, a.astype(np.uint32)), put(ops, b.astype(np.uint32))
    pairs = list(zip(a.tolist(), b.tolist()))
    assert_same_bits(A + B, np.array([(x + y) & MASK for x, y in pairs], np.uint64).astype(np.uint32), "+")
    assert_same_bits(A - B, np.array([(x - y) & MASK for x, y in pairs], np.uint64).astype(np.uint32), "-")
    assert_same_bits(A * B, np.array([(x * y) & MASK for x, y in pairs], np.uint64).astype(np.uint32), "*")
    assert_same_bits(-A, np.array([(-x) & MASK for x in a.tolist()], np.uint64).astype(np.uint32), "unary -")
    big = 0x85EBCA6B  # above int32: a constant goes through ops.asarray
    C = ops.asarray(np.uint32(big))
    assert_same_bits(A * C, np.array([(x * big) & MASK for x in a.tolist()], np.uint64).astype(np.uint32), "* const")
    assert_same_bits(A + C, np.array([(x + big) & MASK for x in a.tolist()], np.uint64).astype(np.uint32), "+ const")
    assert_same_bits(A - 1, np.array([(x - 1) & MASK for x in a.tolist()], np.uint64).astype(np.uint32), "- 1")


def test_zero_d_integer_operands(ops):
    x = put(ops, np.asarray(-7, np.int32))
    assert_same_bits(x // 2, np.asarray(-4, np.int32), "0-d //")
    assert_same_bits(x % 2, np.asarray(1, np.int32), "0-d %")
    u = put(ops, np.asarray(0, np.uint32))
    assert_same_bits(u - ops.asarray(np.uint32(1)), np.asarray(2**32 - 1, np.uint32), "0-d wrap")
    v = put(ops, np.arange(5, dtype=np.uint32))
    assert_same_bits(v ^ ops.asarray(np.uint32(0xFFFFFFFF)), (~np.arange(5, dtype=np.uint32)), "0-d broadcast")
