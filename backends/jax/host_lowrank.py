"""PowerSGD's products on the CPU as XLA custom calls: the NumPy binding's
row kernels (``backends.numpy.fused_lowrank``) behind ``matmul_nt``,
``sub_matmul_nt`` and ``matmul_tn`` (``backends.jax.ffi``).

XLA:CPU computes the projection M^T P of a 5000 x 5000 float32 M onto
rank-4 factors in 14 ms whatever form it is written in (``m.T @ p``,
``(p.T @ m).T``, ``dot_general`` contracting axis 0), where the Numba
kernel reading M once takes 3.3 ms; its ``c - a @ b.T`` takes 9.7 ms
against 5.6 (one run, 2-core machine). Each call reads its operands where
XLA keeps them and writes XLA's result buffer; the results agree with the
compositions to rounding, as ``matmul`` promises (the kernels' own
accumulation order). :func:`usable` says when a product qualifies.
"""
from __future__ import annotations

import functools

import numba
import numpy as np

from backends.jax import host_kernels
from backends.jax.ffi import buffer, call, ptr
from backends.numpy.blocks import CUSTOM_CALL_MIN
from backends.numpy.fused_lowrank import LOW_RANK_MAX, THIN_MAX, THIN_PARTS, cols_dot, low_rank_into


@numba.njit(cache=True, nogil=True, inline="always")
def _matrix(addr, dims, dtype):
    return numba.carray(ptr(addr), (dims[0], dims[1]), dtype)


def _low_rank_body(dt, subtract):
    """``a @ b.T`` (args a, b) or ``c - a @ b.T`` (args c, a, b)."""
    @numba.njit(cache=True, nogil=True)
    def body(args, rets):
        first = 1 if subtract else 0
        aa, ad = buffer(args, first)
        ba, bd = buffer(args, first + 1)
        ra, rd = buffer(rets, 0)
        a, b, out = _matrix(aa, ad, dt), _matrix(ba, bd, dt), _matrix(ra, rd, dt)
        c = out
        if subtract:
            ca, cd = buffer(args, 0)
            c = _matrix(ca, cd, dt)
        low_rank_into(c, a, np.ascontiguousarray(b.T), out, subtract)
    return body


def _tn_body(dt):
    """``a.T @ b`` for a (n, m), b (n, r): the (m, r) result."""
    @numba.njit(cache=True, nogil=True)
    def body(args, rets):
        aa, ad = buffer(args, 0)
        ba, bd = buffer(args, 1)
        ra, rd = buffer(rets, 0)
        a, b, out = _matrix(aa, ad, dt), _matrix(ba, bd, dt), _matrix(ra, rd, dt)
        t = cols_dot(a, b, THIN_PARTS)  # (r, m)
        for j in range(t.shape[0]):
            for i in range(t.shape[1]):
                out[i, j] = t[j, i]
    return body


def usable(entries: int, *arrays, max_rank: int) -> bool:
    """Whether a product of the 2-D ``arrays`` (one float32/float64 dtype; thin
    factors of rank 1..max_rank, ``arrays[-1]``'s columns) whose full-size
    matrix has ``entries`` (at least ``CUSTOM_CALL_MIN``) runs as a custom call
    (and the host kernels can run at all: ``host_kernels.usable``)."""
    dt = arrays[0].dtype
    return (all(a.ndim == 2 and a.dtype == dt for a in arrays) and 1 <= arrays[-1].shape[1] <= max_rank
            and entries >= CUSTOM_CALL_MIN and host_kernels.usable(entries, *arrays))


def _call(name, make, shape, dtype, *args):
    import jax

    return call(name, make, jax.ShapeDtypeStruct(shape, dtype), *args)


def matmul_nt(a, b):
    t = np.dtype(a.dtype)
    return _call(f"kfsim_matmul_nt_{t.name}", functools.partial(_low_rank_body, t.type, False),
                 (a.shape[0], b.shape[0]), t, a, b)


def sub_matmul_nt(c, a, b):
    t = np.dtype(a.dtype)
    return _call(f"kfsim_sub_matmul_nt_{t.name}", functools.partial(_low_rank_body, t.type, True),
                 c.shape, t, c, a, b)


def matmul_tn(a, b):
    t = np.dtype(a.dtype)
    return _call(f"kfsim_matmul_tn_{t.name}", functools.partial(_tn_body, t.type), (a.shape[1], b.shape[1]), t,
                 a, b)

