"""Numba kernels as XLA typed-FFI CPU handlers (no Python, no copy per call).

``jax.pure_callback`` costs a ``device_put`` of every operand and a trip
through the interpreter (the GIL) per call. A handler here is a Numba
``cfunc`` registered with ``jax.ffi.register_ffi_target``: XLA calls it
with a call frame, read with the layout of ``xla/ffi/api/c_api.h`` that
jax ships (pinned by the jax version range in pyproject.toml), and the
kernel reads its operands and writes its results in place.

:func:`handler` wraps a *body*, an ``njit`` function ``body(args, rets)``
of the addresses of the frame's argument and result lists; the body reads
buffer i with :func:`buffer` (data address and dims) and views it with
``numba.carray(ptr(address), shape, dtype)``. :func:`target` registers a
handler under a name once per process.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def ptr(typingctx, addr):
    """int64 address -> void* (to view the call frame's structs with ``carray``)."""
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return types.voidptr(types.int64), codegen


# XLA's typed FFI (xla/ffi/api/c_api.h, the header ``jax.ffi.include_dir()`` ships),
# read as int64 words on a 64-bit host: XLA_FFI_CallFrame {struct_size, extension_start,
# api, ctx, stage, args {struct_size, extension_start, size, types, args}, rets {same}, ...};
# XLA_FFI_Buffer {struct_size, extension_start, dtype, data, rank, dims}.
FRAME_EXT, FRAME_STAGE, FRAME_ARGS, FRAME_RETS = 1, 4, 9, 14
BUF_DATA, BUF_RANK, BUF_DIMS = 3, 4, 5
STAGE_EXECUTE = 3
EXT_METADATA = 1
API_MAJOR, API_MINOR = 0, 1  # the API the handlers are written against (XLA accepts older minors)


@numba.njit(cache=True, nogil=True)
def buffer(list_addr, i):
    """(data address, dims) of buffer i of an args/rets list."""
    buf = numba.carray(ptr(numba.carray(ptr(list_addr), (i + 1,), np.int64)[i]), (6,), np.int64)
    return buf[BUF_DATA], numba.carray(ptr(buf[BUF_DIMS]), (buf[BUF_RANK],), np.int64)


@numba.njit(cache=True, nogil=True)
def size(dims):
    n = 1
    for d in dims:
        n *= d
    return n


@numba.njit(cache=True, nogil=True)
def answer_metadata(frame):
    """True (and the API version written) when the frame is XLA's metadata query."""
    cf = numba.carray(frame, (16,), np.int64)
    if cf[FRAME_EXT] == 0:
        return False
    ext = numba.carray(ptr(cf[FRAME_EXT]), (4,), np.int64)
    if np.int32(ext[1] & 0xFFFFFFFF) == EXT_METADATA:
        meta = numba.carray(ptr(ext[3]), (10,), np.int32)
        meta[6] = API_MAJOR  # api_version.major_version
        meta[7] = API_MINOR
        meta[8] = 0  # traits
    return True


def handler(body):
    """A typed-FFI handler (cfunc) running ``body(args, rets)`` at the execute stage."""
    @numba.cfunc(types.voidptr(types.voidptr), cache=True)
    def call(frame):
        if answer_metadata(frame):
            return ptr(0)
        cf = numba.carray(frame, (16,), np.int64)
        if np.int32(cf[FRAME_STAGE] & 0xFFFFFFFF) == STAGE_EXECUTE:
            body(cf[FRAME_ARGS], cf[FRAME_RETS])
        return ptr(0)

    return call


_REGISTERED: dict = {}  # name -> its handler (which must outlive the call sites)


def target(name: str, make) -> str:
    """Register ``handler(make())`` as the CPU FFI target ``name`` once per
    process (``make`` is called only the first time); the name."""
    if name not in _REGISTERED:
        import jax

        fn = handler(make())
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(fn.address), platform="cpu")
        _REGISTERED[name] = fn
    return name


def call(name: str, make, results, *args):
    """``jax.ffi.ffi_call`` of the target ``name`` (registered by :func:`target`)
    on ``args``, returning ``results`` (ShapeDtypeStructs); once per worker under vmap."""
    import jax

    return jax.ffi.ffi_call(target(name, make), results, vmap_method="sequential")(*args)
