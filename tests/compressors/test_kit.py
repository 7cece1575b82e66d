"""``compressors/kit.py`` on every backend against NumPy oracles: sort,
argsort, k-th largest, median, the elementwise median of a few arrays,
hash32 (MurmurHash3's finalizer), and the fixed key (no step in it)."""
from __future__ import annotations

import numpy as np
import pytest

import compressors as C
from compressors import kit
from tests.backends.ops_backends import OPS_BACKENDS, assert_same_bits, get_ops, to_numpy

BACKENDS = pytest.mark.parametrize("name", OPS_BACKENDS)


def hash32_reference(x, seed) -> np.ndarray:
    """MurmurHash3 fmix32 of x ^ seed in Python integers."""
    out = []
    for v in np.broadcast_to(np.asarray(x, np.uint64) ^ np.asarray(seed, np.uint64), np.shape(x)).ravel():
        h = int(v)
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & 0xFFFFFFFF
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & 0xFFFFFFFF
        h ^= h >> 16
        out.append(h)
    return np.array(out, np.uint64).astype(np.uint32).reshape(np.shape(x))


def values(seed=0, n=41):
    rng = np.random.default_rng(seed)
    v = np.round(rng.standard_normal(n) * 4, 1).astype(np.float32)  # rounding makes ties
    v[:4] = [np.inf, -np.inf, 0.0, -0.0]
    return v


@BACKENDS
def test_sort_and_argsort_ascending(name):
    ops = get_ops(name)
    x = values()
    got = to_numpy(kit.sort(ops, ops.asarray(x)))
    assert np.array_equal(got, np.sort(x))
    assert np.signbit(got[got == 0]).tolist() == [True, False]  # -0 before +0 (totalOrder)
    idx = to_numpy(kit.argsort(ops, ops.asarray(x)))
    assert idx.dtype == np.int32 and sorted(idx.tolist()) == list(range(x.size))
    assert np.array_equal(x[idx], np.sort(x))
    with_nan = np.array([1.0, np.nan, -2.0], np.float32)
    assert np.isnan(to_numpy(kit.sort(ops, ops.asarray(with_nan)))[-1])  # NaN last
    assert to_numpy(kit.sort(ops, ops.asarray(np.zeros(0, np.float32)))).shape == (0,)
    ints = np.array([5, -3, 2**31 - 1, 0, -2**31], np.int32)
    assert np.array_equal(to_numpy(kit.sort(ops, ops.asarray(ints))), np.sort(ints))


@BACKENDS
def test_kth_largest_and_median(name):
    ops = get_ops(name)
    rng = np.random.default_rng(1)
    for n in (1, 2, 5, 8, 33):
        x = rng.standard_normal(n).astype(np.float32)
        X = ops.asarray(x)
        for k in {1, (n + 1) // 2, n}:
            assert_same_bits(kit.kth_largest(ops, X, k), np.sort(x)[::-1][k - 1], f"kth {k} of {n}")
        want = np.float32((np.float64(np.sort(x)[(n - 1) // 2]) + np.float64(np.sort(x)[n // 2])) * 0.5)
        assert_same_bits(kit.median(ops, X), want if n % 2 == 0 else np.sort(x)[n // 2], f"median of {n}")
    with pytest.raises(ValueError):
        kit.kth_largest(ops, ops.asarray(np.ones(3, np.float32)), 4)
    with pytest.raises(ValueError):
        kit.median(ops, ops.asarray(np.zeros(0, np.float32)))


@BACKENDS
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 7])
def test_median_of_arrays_is_numpys_median(name, m):
    ops = get_ops(name)
    rng = np.random.default_rng(m)
    xs = [np.round(rng.standard_normal((6, 5)), 1).astype(np.float32) for _ in range(m)]
    got = to_numpy(kit.median_of(ops, [ops.asarray(x) for x in xs]))
    stacked = np.stack(xs).astype(np.float64)
    assert got.dtype == np.float32 and got.shape == (6, 5)
    assert np.array_equal(got, np.median(stacked, axis=0).astype(np.float32))
    if m > 1:
        xs[m // 2][2, 3] = np.nan
        got = to_numpy(kit.median_of(ops, [ops.asarray(x) for x in xs]))
        assert np.isnan(got[2, 3]) and np.isnan(got).sum() == 1


@BACKENDS
def test_hash32_is_murmur3_fmix32(name):
    ops = get_ops(name)
    x = np.concatenate([np.arange(64), [2**31, 2**32 - 1, 123456789]]).astype(np.uint32)
    for seed in (0, 1, 0x9E3779B9, 2**32 - 1):
        got = kit.hash32(ops, ops.asarray(x), ops.asarray(np.uint32(seed)))
        assert_same_bits(got, hash32_reference(x, seed), f"seed {seed:#x}")
    assert int(hash32_reference(np.uint32(0), 0)) == 0  # fmix32(0) = 0, and a bijection otherwise
    h = hash32_reference(np.arange(1 << 16, dtype=np.uint32), 12345)
    assert np.unique(h).size == 1 << 16
    # every output bit flips for about half of the one-bit input changes (avalanche)
    base = hash32_reference(np.arange(4096, dtype=np.uint32), 7)
    flips = [np.mean(((base ^ hash32_reference(np.arange(4096, dtype=np.uint32) ^ (1 << b), 7)) >> o) & 1)
             for b in (0, 5, 17, 31) for o in (0, 15, 31)]
    assert all(0.4 < f < 0.6 for f in flips), flips


@BACKENDS
def test_fixed_key_is_the_same_at_every_step_and_on_every_worker(name):
    ops = get_ops(name)
    keys = [C.make_keys(ops, 5, step, rank) for step in (0, 1, 77) for rank in (0, 3)]
    fixed = {tuple(to_numpy(k.fixed).tolist()) for k in keys}
    assert len(fixed) == 1
    shared = {tuple(to_numpy(k.shared).tolist()) for k in keys}
    assert len(shared) == 3 and not fixed & shared
    assert tuple(to_numpy(C.make_keys(ops, 6, 0).fixed).tolist()) not in fixed  # the seed is in it
    jax_fixed = to_numpy(C.make_keys(get_ops("jax"), 5, 0).fixed)
    assert np.array_equal(to_numpy(keys[0].fixed), jax_fixed)
