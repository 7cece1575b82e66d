"""Natural compression: neighbouring powers of two, exact unbiasedness, wire format."""
from __future__ import annotations

import jax
import numpy as np

import compressors as C
from tests.compressors.helpers import OPS
from tests.compressors.mc import draws, run


def decode(x, seed=0):
    out, _, _ = run("natural()", [{"x": OPS.asarray(x)}], seed=seed)
    return np.asarray(out["x"])


def test_rounds_to_a_neighbouring_power_of_two():
    x = np.random.default_rng(0).normal(size=500).astype(np.float32) * 10.0 ** np.arange(-5, 5).repeat(50)
    ys = draws("natural()", x, 8)
    lo = np.ldexp(1.0, np.frexp(np.abs(x))[1] - 1)
    assert np.all((np.abs(ys) == lo) | (np.abs(ys) == 2 * lo))
    assert np.all(np.sign(ys) == np.sign(x))


def test_powers_of_two_and_zero_are_exact():
    x = np.array([0.0, -0.0, 1.0, -0.5, 2.0**-126, 2.0**100, -(2.0**-20)], np.float32)
    for seed in range(4):
        np.testing.assert_array_equal(decode(x, seed), x)


def test_probability_is_exactly_two_m_minus_one():
    # 0.75 = 0.75 * 2^0 -> 1 with p = 0.5, else 0.5; 5/8 -> 1 with p = 1/4
    x = np.array([0.75, 0.625], np.float32)
    ys = draws("natural()", x, 20000)
    frac_up = (ys == 1.0).mean(0)
    assert abs(frac_up[0] - 0.5) < 5 * np.sqrt(0.25 / 20000)
    assert abs(frac_up[1] - 0.25) < 5 * np.sqrt(0.25 * 0.75 / 20000)


def test_tiny_float64_values_round_to_zero_or_the_smallest_normal():
    with jax.enable_x64(True):
        x = np.array([1e-39, -3e-40, 2.0**-130], np.float64)
        ys = draws("natural()", x, 20000)
        assert set(np.unique(np.abs(ys)).tolist()) <= {0.0, 2.0**-126}
        se = np.sqrt(np.abs(x) * 2.0**-126 / 20000)
        assert np.all(np.abs(ys.mean(0) - x) <= 5 * se)


def test_wire_format_sign_bits_and_biased_exponents():
    x = np.array([1.5, -3.0, 0.0, np.inf, -np.inf, np.nan, 2.0**-126], np.float32)
    comp = C.parse("natural()")
    signs, exps = comp.for_leaf(x.shape, x.dtype).encode(OPS, OPS.asarray(x), (), C.make_keys(OPS, 0, 0), (), 0)[0]
    assert signs.shape == (1,) and exps.shape == (2,)  # ceil(7/32), ceil(7/4) words
    s = np.asarray(OPS.unpack_bits(signs, 1, 7))
    e = np.asarray(OPS.unpack_bits(exps, 8, 7))
    np.testing.assert_array_equal(s, [0, 1, 0, 0, 1, 1, 0])
    assert e[0] in (127, 128) and e[1] in (128, 129)
    np.testing.assert_array_equal(e[2:], [0, 255, 255, 0, 1])
    y = decode(x)
    assert y[3] == np.inf and y[4] == -np.inf and np.isnan(y[5])
    assert comp.wire_bits((1000,)) == 32 * (32 + 250)  # 9 bits per entry


def test_range_ends_are_infinite_not_finite_garbage():
    big = np.array([3e38], np.float32)  # in [2^127, 2^128): rounds to 2^127 or inf
    ys = draws("natural()", big, 64)
    assert set(np.unique(ys).tolist()) <= {2.0**127, np.inf}
    half = np.array([65504.0], np.float16)  # fp16 max: rounds to 2^15 or 2^16 = inf in fp16
    assert set(np.unique(draws("natural()", half, 64)).tolist()) <= {2.0**15, np.inf}
