"""Memory bandwidth of the machine at hand: a copy's rate, and the cache's speedup over memory.

Two figures the codec model needs from the machine it prices (``kfsim.sim.codec``):

* :func:`copy_rate` — bytes read + written per second of the best of several
  copies of one float32 array (NumPy one thread, NumPy on every core, a Numba
  ``prange`` loop), best of ``repeat`` calls each: the streaming ceiling when
  the array is ≥ 1 GiB (``benchmarks/bench_compressors.py``'s t_min);
* :func:`cache_speedup` — the same copy of an array of 1/8 of the last-level
  cache (read + written: a quarter of it, well inside the half a resident
  kernel may use, ``compressors.cost.RESIDENT_FRACTION``) over the copy of
  1 GiB: how many times faster a kernel streams what the cache holds. Timed
  outside any compressor, so it is not fitted to the rows it then predicts.
"""
from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

STREAM_BYTES = 1 << 30     # the streaming copy: 1 GiB, far past any last-level cache
CACHE_FRACTION = 1 / 8     # the resident copy's array, as a fraction of the cache


def best_time(fn, repeat: int) -> float:
    """Least seconds of ``repeat`` calls of ``fn``."""
    best = math.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def copy_rate(nbytes: float, repeat: int = 5) -> tuple[float, str, dict]:
    """(best bytes/s, the way that reached it, {way: bytes/s}) of copying a float32 array of
    ``nbytes`` (read + written bytes per second)."""
    n = max(int(nbytes) // 4, 1)
    src = np.ones(n, dtype=np.float32)
    dst = np.zeros_like(src)
    cores = os.cpu_count() or 1
    bounds = np.linspace(0, n, cores + 1).astype(np.int64)
    rates = {}
    with ThreadPoolExecutor(cores) as pool:
        def threads():
            list(pool.map(lambda i: np.copyto(dst[bounds[i]:bounds[i + 1]], src[bounds[i]:bounds[i + 1]]),
                          range(cores)))

        ways = {"numpy.copyto, 1 thread": lambda: np.copyto(dst, src), f"numpy.copyto, {cores} threads": threads}
        try:
            import numba

            ways[f"numba prange, {numba.get_num_threads()} threads"] = lambda: _prange_copy(dst, src)
        except ImportError:
            pass
        for name, fn in ways.items():
            fn()
            rates[name] = 8.0 * n / best_time(fn, max(repeat, 1))
    best = max(rates, key=rates.get)
    return rates[best], best, rates


def cache_speedup(cache_bytes: float, repeat: int = 5) -> tuple[float, float, float]:
    """(speedup, resident copy bytes/s, streaming copy bytes/s): the copy of an array of
    :data:`CACHE_FRACTION` of ``cache_bytes`` over the copy of :data:`STREAM_BYTES`, at least 1.
    The resident copy repeats enough calls to last as long as the streaming one's."""
    if not cache_bytes > 0:
        raise ValueError(f"cache_speedup: cache_bytes must be > 0, got {cache_bytes}")
    stream, _, _ = copy_rate(STREAM_BYTES, repeat)
    small = CACHE_FRACTION * cache_bytes
    resident, _, _ = copy_rate(small, max(repeat, int(repeat * STREAM_BYTES / small)))
    return max(resident / stream, 1.0), resident, stream


def _prange_copy(dst, src):
    _kernel()(dst, src)


_KERNEL = []


def _kernel():
    if not _KERNEL:
        import numba

        @numba.njit(parallel=True, cache=True)
        def copy(d, s):
            for i in numba.prange(s.size):
                d[i] = s[i]
        _KERNEL.append(copy)
    return _KERNEL[0]
