"""Large output arrays of the NumPy binding: pooled and reused once nothing
refers to them (``empty``), or zeroed with their pages faulted in on all cores
(``zeros``).

A fresh multi-megabyte array costs a page fault per page, and the kernel
zeroes every page it hands out: about 6 ms per 100 MB on the 2-core test
machine, as long as writing the data itself. Training loops and benchmarks
allocate the same sizes step after step, so the NumPy binding allocates its
large kernel outputs here (as a caching allocator does): the pool keeps the
base bytes of up to ``POOL_MAX`` buffers and hands one out again, as a new
view, once every array viewing it has been freed — its reference count is
back to the pool's own. Memory a caller still holds is never reused.
"""
from __future__ import annotations

import math
import sys
import threading

import numba
import numpy as np

FAULT_IN_MIN = 1 << 24  # bytes from which fresh zero arrays are faulted in on all cores
POOL_MIN = 1 << 24  # bytes from which outputs are pooled (smaller ones cost little)
POOL_MAX = 8  # buffers the pool keeps (up to 8 x the largest output size)

_lock = threading.Lock()
_pool: list[np.ndarray] = []  # uint8 bases


def empty(shape, dtype) -> np.ndarray:
    """An uninitialised C-ordered array, like ``np.empty``; large ones may be
    a reused buffer (never one that any live array still views)."""
    dtype = np.dtype(dtype)
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < POOL_MIN:
        return np.empty(shape, dtype)
    with _lock:
        for i in range(len(_pool)):
            if _pool[i].nbytes == nbytes and _is_free(i):
                return _pool[i].view(dtype).reshape(shape)
        base = np.empty(nbytes, np.uint8)
        if len(_pool) >= POOL_MAX:
            _drop_one_free()
        if len(_pool) < POOL_MAX:
            _pool.append(base)
    return base.view(dtype).reshape(shape)


def zeros(shape, dtype) -> np.ndarray:
    """np.zeros, with the pages of large arrays faulted in on all cores
    (a fresh mapping: the kernel zeroes each page once, in parallel)."""
    out = np.zeros(shape, dtype)
    if out.nbytes >= FAULT_IN_MIN:
        fault_in_zeros(out.reshape(-1).view(np.uint8), numba.get_num_threads())
    return out


@numba.njit(cache=True, parallel=True)
def fault_in_zeros(buf, parts):
    """Write 0 to one byte per 4 KiB page of the all-zero byte array ``buf``
    from all cores: a fresh allocation's pages are faulted in (and zeroed
    by the kernel) in parallel instead of one by one by the next writer."""
    m = buf.size
    for p in numba.prange(parts):
        for i in range(((m * p) // parts) & ~4095, (m * (p + 1)) // parts, 4096):
            buf[i] = 0


def _is_free(i: int) -> bool:
    """No array views pooled buffer i: it has only the references of a
    buffer that nothing else holds (the pool's list, getrefcount's argument)."""
    return sys.getrefcount(_pool[i]) == _FREE_REFS


def _refs_when_free() -> int:
    probe = [np.empty(1, np.uint8)]
    return sys.getrefcount(probe[0])  # measured, not assumed: the count differs across Python versions


_FREE_REFS = _refs_when_free()


def _drop_one_free() -> None:
    """Forget the oldest free buffer (sizes change: make room for the new one)."""
    for i in range(len(_pool)):
        if _is_free(i):
            del _pool[i]
            return


def clear() -> None:
    """Forget every pooled buffer (memory in use stays with its arrays)."""
    with _lock:
        _pool.clear()
