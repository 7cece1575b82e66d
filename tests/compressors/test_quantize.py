"""quantize / int8 / int4: grid, wire layout, buckets, non-finite buckets."""
from __future__ import annotations

import numpy as np
import pytest

import compressors as C
from compressors import protocol
from tests.compressors.helpers import OPS
from tests.compressors.mc import run


def encode(spec, x, seed=0):
    """The payload of a one-leaf tree, with the keys ``decode`` uses."""
    comp = C.parse(spec)
    g = {"x": OPS.asarray(x)}
    res = protocol.run(OPS, comp, [g], [comp.init(OPS, g)], [C.make_keys(OPS, seed, 0)], record=True)
    return res.log[0].sent[0][0]


def decode(spec, x, seed=0):
    out, _, _ = run(spec, [{"x": OPS.asarray(x)}], seed=seed)
    return np.asarray(out["x"], np.float64)


def test_aliases_are_quantize():
    assert C.parse("int8()").spec == "quantize(bits=8, bucket=512)"
    assert C.parse("int4(bucket=64)").spec == "quantize(bits=4, bucket=64)"
    assert C.parse("int8()").unbiased


@pytest.mark.parametrize("bits", [1, 2, 3, 8, 16])
def test_error_is_below_one_grid_step(bits):
    x = np.random.default_rng(bits).normal(size=(9, 11)).astype(np.float32)
    rows = np.concatenate([x.ravel(), np.full(112 - 99, x.ravel()[-1])]).reshape(7, 16)  # edge padding
    step = (rows.max(1) - rows.min(1)) / (2**bits - 1)
    err = np.abs(decode(f"quantize(bits={bits}, bucket=16)", x).ravel() - x.ravel())
    assert np.all(err <= np.repeat(step, 16)[:99] * (1 + 1e-5) + 1e-7)


def test_wire_layout_codes_lo_and_step():
    x = np.random.default_rng(0).normal(size=10).astype(np.float32)
    codes, lo, step = encode("quantize(bits=3, bucket=4)", x)
    assert codes.dtype == np.uint32 and codes.shape == (-(-10 // 10),)  # 10 codes of 3 bits per word
    assert lo.dtype == np.float32 and lo.shape == (3,) and step.shape == (3,)
    buckets = [x[0:4], x[4:8], x[8:10]]  # the padding repeats x[9]: range unchanged
    np.testing.assert_array_equal(lo, [b.min() for b in buckets])
    np.testing.assert_allclose(step, [(b.max() - b.min()) / 7 for b in buckets], rtol=1e-6)
    q = np.asarray(OPS.unpack_bits(codes, 3, 10))
    assert q.max() <= 7
    expect = np.repeat(np.asarray(lo), 4)[:10] + q * np.repeat(np.asarray(step), 4)[:10]
    np.testing.assert_allclose(decode("quantize(bits=3, bucket=4)", x), expect, rtol=1e-6)
    assert C.parse("quantize(bits=3, bucket=4)").wire_bits((10,)) == 32 + 2 * 3 * 32


def test_constant_buckets_and_extremes_are_exact():
    x = np.array([2.5] * 8 + [-1.0, 4.0, 0.5, 3.0], np.float32)
    y = decode("quantize(bits=2, bucket=8)", x)
    np.testing.assert_array_equal(y[:8], 2.5)
    assert y[8] == -1.0 and y[9] == 4.0  # min and max sit on the grid


def test_nan_poisons_its_bucket_only():
    x = np.random.default_rng(1).normal(size=12).astype(np.float32)
    for bad in (np.nan, np.inf, -np.inf):
        z = x.copy()
        z[5] = bad
        y = decode("quantize(bits=4, bucket=4)", z)
        assert not np.any(np.isfinite(y[4:8])), bad
        assert np.all(np.isfinite(y[:4])) and np.all(np.isfinite(y[8:])), bad


def test_half_and_bfloat16_stay_close():
    import ml_dtypes

    for dtype in (np.float16, ml_dtypes.bfloat16):
        x = np.linspace(-3, 3, 64).astype(dtype)
        y = decode("int8()", x)
        assert np.max(np.abs(y - x.astype(np.float64))) <= 6 / 255 * 1.05 + 0.02
