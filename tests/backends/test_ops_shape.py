"""Op semantics (see ``tests/backends/semantics.py``): creation and shape ops.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.backends.ops_backends import BF16, assert_same_bits, maybe_x64, to_numpy
from tests.backends.semantics import F32, FLOATS, INTS, covers, dt_id, put


@covers("asarray", "zeros", "full", "arange")
@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=dt_id)
def test_creation(ops, dtype):
    with maybe_x64(dtype):
        assert_same_bits(ops.asarray(np.arange(5).astype(dtype)), np.arange(5).astype(dtype), "asarray")
        assert_same_bits(ops.asarray([1, 2, 3], dtype), np.array([1, 2, 3], dtype), "asarray dtype")
        assert_same_bits(ops.zeros((2, 3), dtype), np.zeros((2, 3), dtype), "zeros")
        assert_same_bits(ops.zeros((0,), dtype), np.zeros((0,), dtype), "zeros empty")
        assert_same_bits(ops.full((4,), 3, dtype), np.full((4,), 3, dtype), "full")
    assert_same_bits(ops.arange(7), np.arange(7, dtype=np.int32), "arange")
    assert_same_bits(ops.arange(0), np.zeros(0, np.int32), "arange empty")


@covers("asarray")
def test_asarray_python_scalars_use_32_bit_defaults(ops):
    assert to_numpy(ops.asarray(1.5)).dtype == np.float32
    assert to_numpy(ops.asarray([1, 2])).dtype == np.int32
    assert to_numpy(ops.asarray(True)).dtype == np.bool_


@covers("reshape", "concatenate", "stack", "pad", "transpose")
@pytest.mark.parametrize("dtype", [F32, BF16, np.dtype(np.int32), np.dtype(np.uint32)], ids=dt_id)
def test_shape_ops(ops, dtype):
    a = np.arange(12).astype(dtype)
    m = a.reshape(3, 4)
    assert_same_bits(ops.reshape(put(ops, a), (3, 4)), m, "reshape")
    assert_same_bits(ops.reshape(put(ops, m), (12,)), a, "reshape back")
    assert_same_bits(ops.concatenate([put(ops, a[:5]), put(ops, a[5:])]), a, "concatenate")
    assert_same_bits(ops.concatenate([put(ops, m[:1]), put(ops, m[1:])], axis=0), m, "concat 2-D")
    assert_same_bits(ops.concatenate([put(ops, m[:, :1]), put(ops, m[:, 1:])], axis=1), m, "concat axis 1")
    assert_same_bits(ops.stack([put(ops, a[:4]), put(ops, a[4:8])]), a[:8].reshape(2, 4), "stack")
    assert_same_bits(ops.pad(put(ops, a), 3), np.concatenate([a, np.zeros(3, dtype)]), "pad")
    assert_same_bits(ops.pad(put(ops, a), 0), a, "pad 0")
    assert_same_bits(ops.transpose(put(ops, m)), m.T.copy(), "transpose")
