"""``clear_at``: x with its entries at distinct indices taken out (top-k's EF residual).

Its definition is the composition ``x - scatter_add(x.size, idx, gather(x, idx))``;
NumPy (a copy and k writes) and JAX (one ``.at[].set``, eager and jitted) must
give its bits, on NaN, +-inf and +-0 entries, every float width and the
integers, with sentinel indices (dropped) and no indices at all. The lowered
MindSpore graph traces the composition (tests/mindspore/test_lowered_clear_at.py).
"""
from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest

import backends
from backends.numpy.indexing import CLEAR_BLOCK, CLEAR_PARALLEL_MIN
from compressors.fused import Fused
from tests.backends.ops_backends import assert_same_bits, maybe_x64
from tests.backends.test_fused import BIG, data

NP = backends.get("numpy")
JAX = backends.get("jax")
DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16),
          np.dtype(np.int32), np.dtype(np.uint32)]


def values(n: int, dtype) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        return np.random.default_rng(1).integers(0, 1000, n).astype(dtype)
    return data(n, np.float64).astype(dtype)


def indices(x: np.ndarray, k: int, sentinels: bool) -> np.ndarray:
    """k distinct positions: every special entry first (NaN, inf, zeros), then random ones."""
    n = x.size
    special = np.flatnonzero(~np.isfinite(x.astype(np.float64)) | (x == 0)).tolist()
    rest = np.random.default_rng(2).permutation(n).tolist()
    picked = list(dict.fromkeys(special + rest))[:k]
    if sentinels:
        picked += [n, n + 7, -1, -n]
    return np.array(np.random.default_rng(3).permutation(picked), np.int32)


def check_all(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    want = Fused.clear_at(NP, x, idx)  # the definition, on NumPy's primitive ops
    assert want.shape == x.shape and want.dtype == x.dtype
    assert_same_bits(NP.clear_at(x, idx), want, "clear_at (NumPy)")
    with maybe_x64(x.dtype):
        jx, ji = JAX.asarray(x), JAX.asarray(idx)
        assert_same_bits(np.asarray(JAX.clear_at(jx, ji)), want, "clear_at (JAX eager)")
        assert_same_bits(np.asarray(jax.jit(JAX.clear_at)(jx, ji)), want, "clear_at (JAX jit)")
        composed = jax.jit(lambda a, b: Fused.clear_at(JAX, a, b))(jx, ji)
        assert_same_bits(np.asarray(composed), want, "clear_at (JAX composition)")
    return want


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 31, 4_099, BIG])
@pytest.mark.parametrize("sentinels", [False, True])
def test_clear_at_matches_its_composition(n, dtype, sentinels):
    x = values(n, dtype)
    idx = indices(x, max(1, n // 10), sentinels)
    with np.errstate(invalid="ignore"):
        got = check_all(x, idx)
    hit = idx[(idx >= 0) & (idx < n)]
    keep = np.ones(n, bool)
    keep[hit] = False
    assert_same_bits(got[keep], x[keep], "untouched entries")  # a check independent of the composition
    xs, gs = x[hit].astype(np.float64), got[hit].astype(np.float64)
    finite = np.isfinite(xs)
    assert np.all(np.isnan(gs[~finite]))  # inf - inf and NaN stay NaN, as the subtraction gives
    assert np.all(gs[finite] == 0)
    zeros = finite & (xs == 0)
    assert np.array_equal(np.signbit(gs[zeros]), np.signbit(xs[zeros]))  # -0.0 - (0 + -0.0) is -0.0


def test_clear_at_edges():
    x = np.array([-0.0, 0.0, 1e38, -2e-38, np.inf, -np.inf, np.nan, 3.0], np.float32)  # (normal: subnormals
    # are outside the bit contract, XLA:CPU flushes them)
    got = check_all(x, np.arange(8, dtype=np.int32))
    assert got.view(np.uint32)[0] == 0x80000000 and got.view(np.uint32)[1] == 0  # the signs of the zeros
    assert np.array_equal(got[2:4], [0.0, 0.0]) and np.all(np.isnan(got[4:7])) and got[7] == 0
    check_all(x, np.zeros(0, np.int32))  # nothing sent: x itself
    check_all(np.array([2.5], np.float32), np.array([0], np.int32))  # length 1
    check_all(np.array([2.5], np.float32), np.array([1], np.int32))  # only a sentinel
    check_all(np.zeros(0, np.float32), np.zeros(0, np.int32))  # empty


def test_clear_at_is_what_top_k_leaves_behind():
    """EF's residual of top-k: p - densify(top-k payload of p), in one op."""
    x = data(BIG, np.float32)
    x[~np.isfinite(x)] = 0.5
    idx = NP.top_k_abs(x, 1000)
    dense = NP.scatter_add(x.size, idx, NP.gather(x, idx))
    assert_same_bits(NP.clear_at(x, idx), x - dense)


@pytest.mark.parametrize("shape", [(3, 4, 5), (7, 1), (1, 9), (), (0, 3), (2, 0, 4)], ids=str)
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.int32)], ids=str)
def test_clear_at_of_any_shape_takes_row_major_positions(shape, dtype):
    """x of any rank: positions index its flat (row-major) view, the result keeps x's shape;
    sentinels (x.size, past it, negative) drop, as for a vector; the same bits on every backend."""
    n = int(np.prod(shape))
    x = values(n, dtype).reshape(shape)
    if n >= 8 and dtype.kind != "i":
        x.reshape(-1)[[1, 3, 6]] = [np.nan, -0.0, np.inf]
    hit = np.array([p for p in (0, 1, 3, 6, n - 1) if 0 <= p < n], np.int32)
    idx = np.concatenate([np.unique(hit), np.array([n, n + 5, -1], np.int32)])
    with np.errstate(invalid="ignore"):
        got = check_all(x, idx)
    assert got.shape == x.shape
    keep = np.ones(n, bool)
    keep[np.unique(hit)] = False
    assert_same_bits(got.reshape(-1)[keep], x.reshape(-1)[keep], "untouched entries")


def test_clear_at_under_vmap_of_matrices():
    """What simulated workers run: a leading worker axis, a matrix each, positions per worker."""
    x = values(3 * 6 * 5, np.dtype(np.float32)).reshape(3, 6, 5)
    idx = np.array([[0, 7, 29, 30], [5, 1, -1, 2], [29, 28, 27, 40]], np.int32)
    got = np.asarray(jax.jit(jax.vmap(JAX.clear_at))(JAX.asarray(x), JAX.asarray(idx)))
    for w in range(3):
        assert_same_bits(got[w], Fused.clear_at(NP, x[w], idx[w]), f"worker {w}")


def test_clear_at_rejects_bad_input():
    with pytest.raises(ValueError, match="clear_at: indices must be integers"):
        NP.clear_at(np.zeros(4, np.float32), np.array([0.0], np.float32))


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)], ids=str)
@pytest.mark.parametrize("n", [CLEAR_BLOCK - 1, 3 * CLEAR_BLOCK + 5, CLEAR_PARALLEL_MIN + 12_345])
@pytest.mark.parametrize("order", ["ascending", "shuffled"])
def test_clear_at_ascending_indices_take_one_blocked_pass(n, dtype, order):
    """Ascending positions (top-k's) are cleared block by block while the copy is cached:
    the composition's bits at the block and thread-span edges, with NaN/inf/-0.0 entries
    and sentinels before (negative) and after (past the end) the real positions; the same
    positions shuffled take the two-pass way, with the same bits."""
    x = values(n, dtype)
    edges = [0, 1, CLEAR_BLOCK - 1, CLEAR_BLOCK, CLEAR_BLOCK + 1, n // 8, n // 8 + 1, n - 2, n - 1]
    x[[e for e in edges[:3] if e < n]] = [np.nan, -0.0, np.inf][:len([e for e in edges[:3] if e < n])]
    picked = np.unique([e for e in edges if 0 <= e < n] + np.random.default_rng(4).choice(n, n // 7).tolist())
    idx = np.concatenate([[-n, -1], picked, [n, n + 9]]).astype(np.int32)
    if order == "shuffled":
        idx = np.random.default_rng(5).permutation(idx)
    with np.errstate(invalid="ignore"):
        want = Fused.clear_at(NP, x, idx)
        got = NP.clear_at(x, idx)
    assert_same_bits(got, want, f"clear_at ({order})")
    keep = np.ones(n, bool)
    keep[picked] = False
    assert_same_bits(got[keep], x[keep], "untouched entries")
