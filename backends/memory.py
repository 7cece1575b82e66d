"""Large CPU buffers (XLA's above all) without a page fault per page on every call.

XLA allocates every result and temporary of a CPU program with ``malloc``
and frees it after the run. glibc serves blocks above its mmap threshold
(128 KiB to 32 MiB, adjusted as the program runs) with a fresh ``mmap``
and gives them back with ``munmap``: each call of a program on a 100 MB
gradient then faults in and zeroes ~25,000 fresh pages. On the 2-core test
machine that costs 26 ms per 50 MB written, 5x the kernel that writes
them (``benchmarks/bench_compressors.py``: the JAX rows). NumPy's binding
pools its large outputs for the same reason (``backends.numpy.buffers``).

:func:`keep_freed_memory` raises glibc's mmap threshold to ``MMAP_MAX``
and its trim threshold to ``TRIM_MAX`` (``mallopt``), so blocks up to
1 GiB come from the heap and freed ones stay mapped for the next call,
as a caching allocator keeps them. It also limits glibc to one arena
(``M_ARENA_MAX``): XLA runs a program on its own threads, and a thread
served by a secondary arena gets every block above that arena's 64 MiB
heap from a fresh ``mmap`` whatever the threshold (a 25M-entry float32
quantize round trip: 57 -> 24 ms, 24,000 -> 0 page faults per call). The
cost is memory the process keeps after freeing it: up to ``TRIM_MAX`` of
free heap at its top, and threads that share one allocator lock (the
kernels allocate nothing in their loops). It runs once when
``backends`` is imported, before any binding starts a thread pool,
on glibc only: a thread that allocated before keeps the arena it has
(a threaded Numba kernel run first is enough to bring the faults back).
Set ``KFSIM_KEEP_FREED_MEMORY=0`` to leave the allocator as it was.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

MMAP_MAX = 1 << 30  # blocks up to this size come from the heap
TRIM_MAX = 1 << 29  # free heap kept at its top before glibc returns it
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8  # glibc's malloc.h

applied: bool | None = None  # True once set, False when refused or not glibc, None before


def keep_freed_memory() -> bool:
    """Apply the thresholds (once); True when glibc took them."""
    global applied
    if applied is None:
        applied = False
        if os.environ.get("KFSIM_KEEP_FREED_MEMORY", "1") != "0":
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                applied = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_MAX)) and \
                    bool(libc.mallopt(_M_TRIM_THRESHOLD, TRIM_MAX)) and bool(libc.mallopt(_M_ARENA_MAX, 1))
            except (OSError, AttributeError):  # not glibc (musl, macOS): mallopt is absent
                applied = False
    return applied
