"""Shared pieces of the op-semantics suites ``tests/backends/test_ops_*.py``:
every op of ``compressors.ops.Ops`` against its documented semantics, on
every backend in ``OPS_BACKENDS``, one test module per op family.

Each test computes the expected result with a small, independent NumPy /
pure-Python oracle written from the docstring, and requires the backend's
result to have the same dtype, shape and bits (any NaN equals any NaN), so
two backends passing a test agree bit for bit. Exceptions: ``matmul``
(accumulation order: tolerance) and subnormal float32/float64/bf16 values,
which are kept out of arithmetic inputs and results because XLA:CPU flushes
them to zero while NumPy keeps IEEE subnormals.

float64 runs JAX with ``jax_enable_x64`` switched on for that test only
(``maybe_x64``), so the rest of the session keeps JAX's default 32-bit mode.

Each test records the ops it covers with :func:`covers`;
``tests/backends/test_ops_coverage.py`` checks that every op is covered.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, settings

from tests.backends.ops_backends import BF16

F32, F16, F64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)
FLOATS = [F32, F16, BF16, F64]
INTS = [np.dtype(d) for d in (np.int8, np.int16, np.int32, np.uint8)]
HYP = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TESTED: set[str] = set()


def covers(*names):
    """Record which ops a test covers (``test_ops_coverage.py`` checks)."""
    TESTED.update(names)
    return lambda f: f


def dt_id(d):
    return np.dtype(d).name


def put(ops, a, dtype=None):
    a = np.asarray(a) if dtype is None else np.asarray(a, dtype=dtype)
    return ops.asarray(a)


def normal_values(rng, n, dtype, scale=1.0):
    """Random values of ``dtype`` that are normal numbers (no subnormals)."""
    v = (rng.standard_normal(n) * scale).astype(dtype)
    tiny = np.finfo(np.float32 if dtype == BF16 else dtype).tiny
    v[np.abs(v.astype(np.float64)) < float(tiny) * 4] = 1
    return v
