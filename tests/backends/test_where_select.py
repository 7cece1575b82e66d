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


SCALARS = [0.0, -0.0, 1.5, float("nan"), float("inf"), 3, True, np.float32(2.5), np.array(-7.0, np.float32),
           np.float64(0.1), np.array(1, np.int64)]


@pytest.mark.parametrize("n", [(1 << 14) + 3, PARALLEL_SELECT + 5])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.uint16])
@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
@pytest.mark.parametrize("scalar_first", [False, True])
def test_where_with_a_scalar_is_numpys_where(n, dtype, scalar, scalar_first):
    """An array and a scalar: the value, dtype and promotion (a 0-d float64 makes the result float64;
    a weak Python scalar keeps the array's dtype) of np.where, through the select where it applies."""
    rng = np.random.default_rng(n)
    u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    arr = rng.integers(0, np.iinfo(u).max, n, dtype=u, endpoint=True).view(dtype)
    cond = rng.random(n) < 0.3
    args = (scalar, arr) if scalar_first else (arr, scalar)
    try:
        want = np.where(cond, *args)
    except (OverflowError, ValueError, TypeError) as exc:   # e.g. nan or 1.5 into an int array
        with pytest.raises(type(exc)):
            NP.where(cond, *args)
        return
    got = NP.where(cond, *args)
    assert got.dtype == want.dtype and got.shape == want.shape
    w = {2: np.uint16, 4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
    assert np.array_equal(got.view(w), want.view(w))


def test_where_python_int_beyond_the_arrays_dtype_widens_as_numpy_does():
    arr = np.zeros(PARALLEL_SELECT + 1, np.int16)
    cond = np.arange(arr.size) % 2 == 0
    want = np.where(cond, 70000, arr)
    got = NP.where(cond, 70000, arr)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_where_scalar_takes_the_select():
    """The scalar form goes through the kernel (not np.where): a mutated kernel would show."""
    from backends.numpy import elementwise
    n = PARALLEL_SELECT + 1
    cond = np.arange(n) % 3 == 0
    calls = []
    real = elementwise.select_scalar
    try:
        elementwise.select_scalar = lambda *a, **k: (calls.append(1), real(*a, **k))[1]
        out = NP.where(cond, 0.0, np.ones(n, np.float32))
    finally:
        elementwise.select_scalar = real
    assert calls and out.dtype == np.float32 and out[0] == 0.0 and out[1] == 1.0 and out.sum() == n - (n + 2) // 3
