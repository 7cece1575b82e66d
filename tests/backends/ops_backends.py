"""Backends the op-semantics and conformance suites run on, and helpers to
compare their arrays bit for bit.

Append a name here (``"mindspore"``) when its binding lands; every test that
takes the ``ops`` fixture or iterates ``OPS_BACKENDS`` then covers it.
"""
from __future__ import annotations

import contextlib

import jax
import ml_dtypes
import numpy as np

import backends

OPS_BACKENDS = ["jax", "numpy"]

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOAT_DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16, np.dtype(np.float64)]
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def get_ops(name: str):
    return backends.get(name)


def is_float(dtype) -> bool:
    d = np.dtype(dtype)
    return d.kind == "f" or d == BF16


def to_numpy(a) -> np.ndarray:
    """Any backend's array as a NumPy array (same dtype and bits)."""
    if hasattr(a, "asnumpy"):  # MindSpore Tensor
        return a.asnumpy()
    return np.asarray(a)


def same_bits(a, b) -> bool:
    """Same dtype, shape and bits; any NaN equals any NaN (payloads are not
    part of the contract)."""
    a, b = to_numpy(a), to_numpy(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    ua, ub = a.view(_UINT[a.dtype.itemsize]), b.view(_UINT[b.dtype.itemsize])
    if is_float(a.dtype):
        na, nb = np.isnan(a.astype(np.float64)), np.isnan(b.astype(np.float64))
        return bool(np.all(na == nb) and np.all((ua == ub) | na))
    return bool(np.all(ua == ub))


def assert_same_bits(a, b, what: str = "") -> None:
    if not same_bits(a, b):
        a, b = to_numpy(a), to_numpy(b)
        raise AssertionError(f"{what}: bits differ\n got      {a.dtype}{a.shape} {a!r}\n"
                             f" expected {b.dtype}{b.shape} {b!r}")


@contextlib.contextmanager
def maybe_x64(dtype):
    """Run with ``jax_enable_x64`` for float64 (JAX silently truncates to
    float32 otherwise); leaves the flag as it was afterwards."""
    if np.dtype(dtype) == np.float64:
        with jax.enable_x64(True):
            yield
    else:
        yield
