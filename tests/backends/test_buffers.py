"""The NumPy binding's pool of large output buffers (backends.numpy.buffers):
memory comes back only when no live array views it."""
from __future__ import annotations

import threading
import weakref

import numpy as np
import pytest

from backends.numpy import buffers

SIZE = 1 << 14  # float32 entries: 64 KiB, pooled once POOL_MIN is lowered below


@pytest.fixture(autouse=True)
def small_pool(monkeypatch):
    monkeypatch.setattr(buffers, "POOL_MIN", 1 << 12)
    buffers.clear()
    yield
    buffers.clear()


def test_freed_buffer_is_reused_with_any_shape_and_dtype():
    a = buffers.empty((SIZE,), np.float32)
    base = weakref.ref(a.base)
    del a
    b = buffers.empty((SIZE // 4, 2), np.float64)  # same bytes
    assert b.base is base() and b.shape == (SIZE // 4, 2) and b.dtype == np.float64
    assert b.flags.c_contiguous and b.flags.writeable


def test_memory_still_viewed_is_never_reused():
    a = buffers.empty(SIZE, np.float32)
    a[:] = 1.0
    view = a[100:200]
    del a
    b = buffers.empty(SIZE, np.float32)
    b[:] = 2.0
    assert not np.shares_memory(b, view)
    np.testing.assert_array_equal(view, 1.0)


def test_a_jax_array_made_from_an_output_keeps_its_values():
    jnp = pytest.importorskip("jax.numpy")
    a = buffers.empty(SIZE, np.float32)
    a[:] = 3.0
    j = jnp.asarray(a)  # may share the host memory on CPU
    del a
    b = buffers.empty(SIZE, np.float32)
    b[:] = 4.0
    np.testing.assert_array_equal(np.asarray(j), 3.0)


def test_small_arrays_and_a_full_pool_get_plain_memory():
    small = buffers.empty(8, np.float32)
    assert small.base is None  # np.empty's own
    live = [buffers.empty(SIZE, np.float32) for _ in range(buffers.POOL_MAX + 3)]
    for i, x in enumerate(live):
        x[:] = i
    for i, x in enumerate(live):
        np.testing.assert_array_equal(x, i)
    assert len({x.__array_interface__["data"][0] for x in live}) == len(live)


def test_new_sizes_replace_free_buffers_of_old_ones():
    for k in range(buffers.POOL_MAX + 2):
        x = buffers.empty(SIZE + 64 * k, np.float32)  # each size once, freed at once
        del x
    assert len(buffers._pool) <= buffers.POOL_MAX
    y = buffers.empty(SIZE + 64 * (buffers.POOL_MAX + 1), np.float32)
    assert any(y.base is b for b in buffers._pool)


def test_threads_never_share_a_buffer():
    out: list[list[np.ndarray]] = [[], []]

    def work(t):
        for _ in range(50):
            x = buffers.empty(SIZE, np.float32)
            x[:] = t
            out[t].append(x)
            if len(out[t]) > 2:
                y = out[t].pop(0)
                assert np.all(y == t)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t in range(2):
        for x in out[t]:
            assert np.all(x == t)
