"""QSGD: levels of the bucket norm, sign, code width, overflow-safe norm."""
from __future__ import annotations

import math

import numpy as np
import pytest

import compressors as C
from tests.compressors.helpers import OPS
from tests.compressors.mc import run


def decode(spec, x, seed=0):
    out, _, _ = run(spec, [{"x": OPS.asarray(x)}], seed=seed)
    return np.asarray(out["x"], np.float64)


@pytest.mark.parametrize("levels,bucket", [(1, 8), (4, 0), (127, 16), (300, 5)])
def test_values_are_signed_levels_of_the_bucket_norm(levels, bucket):
    x = np.random.default_rng(levels).normal(size=37).astype(np.float32)
    y = decode(f"qsgd(levels={levels}, bucket={bucket})", x)
    b = bucket or x.size
    for i in range(0, x.size, b):
        norm = np.linalg.norm(x[i:i + b].astype(np.float64))
        lv = y[i:i + b] / norm * levels
        np.testing.assert_allclose(lv, np.round(lv), atol=1e-3)
        assert np.all(np.abs(lv) <= levels + 1e-3)
        assert np.all((np.sign(y[i:i + b]) == 0) | (np.sign(y[i:i + b]) == np.sign(x[i:i + b])))
        assert np.all(np.abs(y[i:i + b] - x[i:i + b]) <= norm / levels * (1 + 1e-5))


@pytest.mark.parametrize("levels,width", [(1, 2), (3, 3), (127, 8), (128, 9), (300, 10)])
def test_code_width_is_sign_plus_level_bits(levels, width):
    assert width == 1 + math.ceil(math.log2(levels + 1))
    d = 1000
    assert C.parse(f"qsgd(levels={levels}, bucket=100)").wire_bits((d,)) == 32 * -(-d // (32 // width)) + 32 * 10


def test_large_finite_values_do_not_overflow_the_norm():
    x = np.array([3e37, -2e38, 1e38, 5.0], np.float32)  # sum of squares overflows float32
    y = decode("qsgd(levels=8, bucket=0)", x)
    assert np.all(np.isfinite(y))
    assert np.all(np.abs(y - x) <= np.linalg.norm(x.astype(np.float64)) / 8 * 1.001)


def test_nonfinite_poisons_its_bucket_only():
    x = np.random.default_rng(2).normal(size=12).astype(np.float32)
    for bad in (np.nan, np.inf):
        z = x.copy()
        z[1] = bad
        y = decode("qsgd(levels=16, bucket=4)", z)
        assert np.all(np.isnan(y[:4])) and np.all(np.isfinite(y[4:])), bad
