"""``top_k_abs`` of big float rows on the CPU as an XLA custom call (no Python per call).

``jax.pure_callback`` costs a ``device_put`` of every operand and a trip
through the interpreter (the GIL) per call: at 16 simulated workers that is
16 copies of each 200k-entry layer and 16 Python calls per step. Here the
selection is a Numba ``cfunc`` registered as an XLA typed-FFI CPU handler
(``jax.ffi.register_ffi_target``; the call frame is read with the layout of
``xla/ffi/api/c_api.h`` that jax ships, pinned by the jax version range in
pyproject.toml): it reads the rows in place and writes the int32
(..., k) result; with ``vmap_method="broadcast_all"`` one call serves every
worker under ``jax.vmap``.

Each row is ``backends.numpy.fused_topk``'s selection (sampled threshold on
magnitude keys at ``backends.numpy.topk.stratified_positions``, one
collecting pass, radix selection of the survivors). A missed threshold
(rare) reruns the row with every key a survivor, the same radix selection
and walk: the indices of the k largest ``|x|``, lowest index first among
ties, ascending, exactly what the reference composition
``nonzero(scatter(top_k(abs(x), k)))`` lists.
"""
from __future__ import annotations

import functools

import numba
import numpy as np
from numba import types

from backends.jax.ffi import FRAME_ARGS, FRAME_RETS, FRAME_STAGE, STAGE_EXECUTE, answer_metadata, buffer, ptr
from backends.numpy.fused_topk import collect, keep_top, magnitude_threshold
from backends.numpy.topk import SAMPLE


@numba.njit(cache=True, nogil=True)
def _finish(bits, k, mask, nbits, t, cap, out):
    """Survivors (keys > t; the first k keys == t) in index order, then the
    k largest of them into ``out``; False when the survivors overflow
    ``cap`` or fall short of k."""
    gi = np.empty((1, cap + 65), np.int32)
    gk = np.empty((1, cap + 65), bits.dtype)
    ties = np.empty((1, k), np.int32)
    ng, ne = collect(bits, mask, t, 0, bits.size, k, gi[0], gk[0], ties[0])
    return ng >= 0 and keep_top(gi, gk, np.full(1, ng, np.int64), ties, np.full(1, ne, np.int64), k, nbits, out)


@numba.njit(cache=True, nogil=True)
def select_row(bits, k, mask, nbits, out):
    """``out`` = the indices of the k largest keys ``bits & mask`` of one row
    (module doc); exact for any sample."""
    n = bits.size
    s = min(n, SAMPLE, max(1024, n // 64))
    if 4 * k <= n:
        t, rank = magnitude_threshold(bits, k, mask, nbits, s)
        if rank >= 0 and _finish(bits, k, mask, nbits, t, int(2.0 * n * (rank + 1) / s) + 1024, out):
            return
    _finish(bits, k, mask, nbits, -1, n, out)  # every key survives


@numba.njit(cache=True, nogil=True, parallel=True)
def _select_rows(bits, k, mask, nbits, idx):
    """:func:`select_row` of every row, the rows shared among the threads."""
    for i in numba.prange(bits.shape[0]):
        select_row(bits[i], k, mask, nbits, idx[i])


def _handler(width: int, threaded: bool):
    bits_t = np.int32 if width == 4 else np.int64
    mask = bits_t((1 << (8 * width - 1)) - 1)
    nbits = 8 * width - 1

    @numba.cfunc(types.voidptr(types.voidptr), cache=True)
    def call(frame):
        if answer_metadata(frame):
            return ptr(0)
        cf = numba.carray(frame, (16,), np.int64)
        if np.int32(cf[FRAME_STAGE] & 0xFFFFFFFF) != STAGE_EXECUTE:
            return ptr(0)
        x_addr, xd = buffer(cf[FRAME_ARGS], 0)
        o_addr, od = buffer(cf[FRAME_RETS], 0)
        n = xd[xd.size - 1]
        k = od[od.size - 1]
        rows = 1
        for j in range(xd.size - 1):
            rows *= xd[j]
        bits = numba.carray(ptr(x_addr), (rows, n), bits_t)
        idx = numba.carray(ptr(o_addr), (rows, k), np.int32)
        if threaded and rows > 1:
            _select_rows(bits, k, mask, nbits, idx)
        else:
            for i in range(rows):
                select_row(bits[i], k, mask, nbits, idx[i])
        return ptr(0)

    return call


@functools.lru_cache(maxsize=None)
def _target(width: int) -> str:
    """Register the handler for float rows of ``width`` bytes (once); its name. Several rows
    (a vmapped call) are shared among Numba's threads where its thread pool may be entered
    from XLA's threads at once (``host_kernels.thread_safe``: OpenMP or TBB)."""
    import jax

    from backends.jax.host_kernels import thread_safe

    threaded = thread_safe()
    name = f"kfsim_top_k_abs_f{8 * width}" + ("_mt" if threaded else "")
    fn = _handler(width, threaded)
    _KEEP.append(fn)  # the registered pointer must outlive the call sites
    jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(fn.address), platform="cpu")
    return name


_KEEP: list = []


def top_k_abs(x, k: int):
    """int32 indices (..., k): ``Fused.top_k_abs`` of each row (last axis) of a
    float32/float64 JAX array on the CPU, jit- and vmap-safe (not differentiable);
    under ``jax.vmap`` the one call takes every row."""
    import jax
    import jax.numpy as jnp

    f = jax.ffi.ffi_call(_target(x.dtype.itemsize), jax.ShapeDtypeStruct(x.shape[:-1] + (int(k),), jnp.int32),
                         vmap_method="broadcast_all")
    return f(x)
