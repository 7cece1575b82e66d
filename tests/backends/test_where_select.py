"""``where`` on NumPy: the branch-free mask select (one thread below PARALLEL_SELECT entries, all
cores from it) copies the chosen entry's bits, NaN payloads and signed zeros included."""
import numpy as np
import pytest

import backends
from backends.numpy.elementwise import PARALLEL_SELECT

NP = backends.get("numpy")


@pytest.mark.parametrize("n", [0, 1, 17, (1 << 14) + 3, PARALLEL_SELECT + 5])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.uint64])
def test_where_copies_the_chosen_bits(n, dtype):
    rng = np.random.default_rng(n)
    u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    a = rng.integers(0, np.iinfo(u).max, n, dtype=u, endpoint=True).view(dtype)   # NaNs, -0.0, infs
    b = rng.integers(0, np.iinfo(u).max, n, dtype=u, endpoint=True).view(dtype)
    cond = rng.random(n) < 0.5
    got = NP.where(cond, a, b)
    assert got.dtype == np.dtype(dtype) and got.shape == (n,)
    assert np.array_equal(got.view(u), np.where(cond, a.view(u), b.view(u)))


def test_where_all_true_all_false_and_2d():
    a = np.arange(PARALLEL_SELECT + 1, dtype=np.float32).reshape(-1, 1)
    b = -a
    assert np.array_equal(NP.where(np.ones(a.shape, bool), a, b), a)
    assert np.array_equal(NP.where(np.zeros(a.shape, bool), a, b), b)
