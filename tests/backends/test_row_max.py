"""``max(x, axis=1)`` of a large 2-D float array on NumPy goes through the per-bucket kernel
(``backends.numpy.fused_minmax``): its values are np.max's, a row holding a NaN (either sign)
gives NaN, a tie of -0.0 and +0.0 gives +0.0 and a subnormal stays (which zero XLA returns for
a tie depends on its reduction's order, and XLA:CPU flushes subnormals: both outside the bit
contract across backends, as for ``bucket_min_max``)."""
import numpy as np
import pytest

import backends

NP = backends.get("numpy")
JAX = backends.get("jax")


@pytest.mark.parametrize("shape", [(1 << 8, 64), (3, (1 << 14) + 1), (1 << 15, 1), ((1 << 14) + 7, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_max_is_the_reference_max(shape, dtype):
    rng = np.random.default_rng(shape[0])
    x = (rng.standard_normal(shape) * 1e3).astype(dtype)
    r = shape[0]
    x[0 % r, -1] = np.nan
    x[1 % r, 0] = -np.nan
    x[2 % r, :] = -np.inf
    x[3 % r, :] = np.inf if shape[1] == 1 else -1.0
    x[4 % r, :] = -0.0
    x[5 % r, :] = -0.0
    x[5 % r, -1] = 0.0
    x[6 % r, :] = np.finfo(dtype).max
    x[7 % r, :] = -np.finfo(dtype).tiny / 4    # subnormal
    got = NP.max(x, axis=1)
    assert got.dtype == x.dtype and got.shape == (r,)
    nan = np.isnan(x).any(axis=1)
    assert np.array_equal(np.isnan(got), nan)
    want = np.max(np.where(np.isnan(x), 0, x), axis=1)
    zero = want == 0
    want = np.where(zero & (x == 0).all(axis=1) & np.signbit(x).all(axis=1), -0.0, np.where(zero, 0.0, want))
    assert np.array_equal(got[~nan].view(np.uint8), want.astype(dtype)[~nan].view(np.uint8))
    if dtype == np.float32:   # JAX's bits where the contract holds: no NaN, zero or subnormal result
        ref = np.asarray(JAX.max(JAX.asarray(x), axis=1))
        ok = ~nan & (np.abs(got) >= np.finfo(dtype).tiny)
        assert ok.sum() >= r - 8 and np.array_equal(got[ok].view(np.uint32), ref[ok].view(np.uint32))


def test_small_and_other_axes_keep_numpy():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(NP.max(x, axis=1), [3, 7, 11]) and np.array_equal(NP.max(x, axis=0), [8, 9, 10, 11])
    big = np.ones((1 << 14, 2), np.int32)
    assert NP.max(big, axis=1).dtype == np.int32
