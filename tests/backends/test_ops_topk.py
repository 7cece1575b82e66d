"""Op semantics (see ``tests/backends/semantics.py``): ``top_k`` by IEEE
totalOrder, ties to the lowest index, on small, large (the NumPy binding's
sampled-threshold path and its fall-backs) and integer inputs.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.backends.ops_backends import BF16, OPS_BACKENDS, assert_same_bits, get_ops, is_float, maybe_x64, to_numpy
from tests.backends.semantics import F16, F32, FLOATS, HYP, covers, dt_id, put


def total_order_key(v) -> int:
    """IEEE 754 totalOrder as an unsigned key: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN."""
    a = np.asarray(v)
    width = 8 * a.dtype.itemsize
    b = int(a.reshape(1).view({16: np.uint16, 32: np.uint32, 64: np.uint64}[width])[0])
    sign = 1 << (width - 1)
    return ((1 << width) - 1) ^ b if b & sign else b | sign


def top_k_oracle(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    if is_float(x.dtype):
        keys = [total_order_key(v) for v in x]
    else:
        keys = [int(v) for v in x]
    order = sorted(range(x.size), key=lambda i: (-keys[i], i))[:k]
    idx = np.array(order, np.int32)
    return x[idx], idx


def check_top_k(ops, x, k, what=""):
    v, i = ops.top_k(put(ops, x), k)
    wv, wi = top_k_oracle(x, k)
    assert_same_bits(i, wi, f"top_k indices {what}")
    assert_same_bits(v, wv, f"top_k values {what}")


@covers("top_k")
@pytest.mark.parametrize("dtype", FLOATS, ids=dt_id)
def test_top_k_ties_and_nan(ops, dtype):
    x = np.array([1, 0.0, 0.0, np.inf, 2, 2, np.nan, -np.inf, 0, 1, np.nan, -3], np.float64).astype(dtype)
    with maybe_x64(dtype):
        for k in range(1, x.size + 1):
            check_top_k(ops, x, k, f"k={k}")
        # NaN first (lowest index first among NaNs), then +inf, ties by index
        _, i = ops.top_k(put(ops, x), 6)
        assert to_numpy(i).tolist() == [6, 10, 3, 4, 5, 0]


@covers("top_k")
def test_top_k_total_order_of_zeros_and_negative_nan(ops):
    """Beyond the docstring: backends rank by IEEE totalOrder, as XLA's
    TopK does (+0 above -0; a NaN with the sign bit set ranks lowest)."""
    neg_nan = np.array([0xFFC00000], np.uint32).view(np.float32)[0]
    x = np.array([-0.0, 0.0, neg_nan, -np.inf, -0.0, np.nan], np.float32)
    check_top_k(ops, x, x.size, "totalOrder")


@covers("top_k")
@pytest.mark.parametrize("n,k", [(50_000, 1), (50_000, 500), (50_000, 5_000), (50_000, 12_500), (50_000, 30_000),
                                 (70_001, 701), (20_000, 20_000)])
@pytest.mark.parametrize("kind", ["normal", "abs", "few_values", "mostly_zero", "sorted", "nan_inf"])
def test_top_k_large_inputs(ops, n, k, kind):
    """Large inputs exercise the NumPy backend's sampled-threshold path and
    its fall-backs (heavy ties at the threshold, adversarial orders)."""
    rng = np.random.default_rng(n + k)
    x = rng.standard_normal(n).astype(np.float32)
    if kind == "abs":
        x = np.abs(x)
    elif kind == "few_values":
        x = rng.integers(0, 4, size=n).astype(np.float32)
    elif kind == "mostly_zero":
        x = np.where(rng.random(n) < 0.995, 0.0, x).astype(np.float32)
    elif kind == "sorted":
        x = np.sort(x)
    elif kind == "nan_inf":
        x[rng.random(n) < 0.001] = np.nan
        x[rng.random(n) < 0.001] = np.inf
    v, i = ops.top_k(put(ops, x), k)
    # fast oracle for large n: stable argsort of the totalOrder keys
    u = x.view(np.uint32).astype(np.uint64)
    keys = np.where(u >= 2 ** 31, (2 ** 32 - 1) ^ u, u | 2 ** 31)
    want = np.argsort(-keys.astype(np.int64), kind="stable")[:k].astype(np.int32)
    assert_same_bits(i, want, "top_k indices")
    assert_same_bits(v, x[want], "top_k values")


@covers("top_k")
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=dt_id)
def test_top_k_large_half_precision(ops, dtype):
    rng = np.random.default_rng(8)
    x = np.abs(rng.standard_normal(40_000)).astype(dtype)  # many exact ties in 16-bit types
    k = 400
    v, i = ops.top_k(put(ops, x), k)
    keys = x.astype(np.float64)
    want = np.argsort(-keys, kind="stable")[:k].astype(np.int32)
    assert_same_bits(i, want, "indices")
    assert_same_bits(v, x[want], "values")


@covers("top_k")
@pytest.mark.parametrize("backend", OPS_BACKENDS)
@HYP
@given(st.lists(st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan, 7.0]) | st.floats(width=32),
                min_size=1, max_size=50), st.data())
def test_top_k_hypothesis(backend, values, data):
    ops = get_ops(backend)
    x = np.array(values, np.float32)
    k = data.draw(st.integers(1, x.size))
    check_top_k(ops, x, k)


@covers("top_k")
def test_top_k_int(ops):
    x = np.array([3, -1, 3, 7, -8, 7, 0], np.int32)
    for k in range(1, 8):
        check_top_k(ops, x, k, f"k={k}")


def _int_input(dtype, n, kind, rng):
    info = np.iinfo(dtype)
    if kind == "uniform":
        x = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dtype)
    elif kind == "few_values":  # heavy ties at any threshold
        x = rng.choice(np.array([info.min, -1 if info.min else 1, 0, info.max], dtype), size=n)
    else:  # random bits >> 1, as randomk draws them: non-negative, with a sorted run
        x = (rng.integers(0, info.max, size=n, endpoint=True, dtype=dtype) >> 1).astype(dtype)
        x[: n // 10] = np.sort(x[: n // 10])
    return np.ascontiguousarray(x)


def _int_oracle(x, k):
    return np.array(sorted(range(x.size), key=lambda i: (-int(x[i]), i))[:k], np.int32)


@covers("top_k")
@pytest.mark.parametrize("k", [1, 500, 12_500, 30_000])
@pytest.mark.parametrize("kind", ["uniform", "few_values", "draws"])
def test_top_k_large_int32(ops, k, kind):
    """Large int32 inputs (randomk's draws): the NumPy binding maps them onto the float
    selection's order (the sampled threshold for 4k <= n, a full sort otherwise)."""
    x = _int_input(np.int32, 50_000, kind, np.random.default_rng(k))
    v, i = ops.top_k(put(ops, x), k)
    want = _int_oracle(x, k)
    assert_same_bits(i, want, "top_k indices")
    assert_same_bits(v, x[want], "top_k values")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.int64, np.uint64])
@pytest.mark.parametrize("kind", ["uniform", "few_values"])
def test_numpy_top_k_every_integer_width(dtype, kind):
    from backends.numpy.topk import top_k_indices_int
    x = _int_input(dtype, 40_000, kind, np.random.default_rng(3))
    for k in (1, 37, 9_000, 40_000):
        assert np.array_equal(top_k_indices_int(x, k), _int_oracle(x, k)), (dtype, kind, k)
