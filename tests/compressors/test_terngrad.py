"""TernGrad: values in {-s, 0, s}, the largest entry always sent, wire layout."""
from __future__ import annotations

import numpy as np

import compressors as C
from tests.compressors.helpers import OPS
from tests.compressors.mc import draws, run


def test_values_are_ternary_with_the_max_scale():
    x = np.random.default_rng(0).normal(size=(6, 7)).astype(np.float32)
    ys = draws("terngrad()", x, 64)
    s = np.abs(x).max()
    assert set(np.unique(np.abs(ys)).tolist()) <= {0.0, float(s)}
    assert np.all((ys == 0) | (np.sign(ys) == np.sign(x)))
    i = np.unravel_index(np.argmax(np.abs(x)), x.shape)
    assert np.all(ys[(slice(None),) + i] == x[i])  # p = |x|/s = 1


def test_buckets_have_their_own_scale():
    x = np.array([1.0, -2.0, 0.5, 100.0, -50.0, 1.0], np.float32)
    ys = draws("terngrad(bucket=3)", x, 32)
    assert set(np.unique(np.abs(ys[:, :3])).tolist()) <= {0.0, 2.0}
    assert set(np.unique(np.abs(ys[:, 3:])).tolist()) <= {0.0, 100.0}


def test_wire_is_two_bit_codes_and_one_scale_per_bucket():
    comp = C.parse("terngrad(bucket=10)")
    x = np.linspace(-1, 1, 33).astype(np.float32)
    codes, s = comp.for_leaf(x.shape, x.dtype).encode(OPS, OPS.asarray(x), (), C.make_keys(OPS, 0, 0), (), 0)[0]
    assert codes.shape == (3,) and codes.dtype == np.uint32 and s.shape == (4,) and s.dtype == np.float32
    t = np.asarray(OPS.unpack_bits(codes, 2, 33))
    # sign and magnitude: b | [x < 0] << 1, so 1 = +s and 3 = -s (2 = a negative entry sent as 0)
    assert set(t.tolist()) <= {0, 1, 2, 3} and np.all(t[x > 0] <= 1) and np.all(t[x < 0] >= 2)
    assert 3 in t.tolist() and 1 in t.tolist()
    assert comp.wire_bits((33,)) == 3 * 32 + 4 * 32


def test_nonfinite_makes_the_bucket_nan():
    x = np.random.default_rng(1).normal(size=8).astype(np.float32)
    for bad in (np.nan, np.inf):
        z = x.copy()
        z[2] = bad
        out, _, _ = run("terngrad()", [{"x": OPS.asarray(z)}])
        assert np.all(np.isnan(np.asarray(out["x"]))), bad
