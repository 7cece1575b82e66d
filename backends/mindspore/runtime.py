"""MindSpore process set-up and the host kernels the lowering calls.

``setup(device)`` is the only safe start-up order seen with MindSpore 2.10 on
NumPy 2 (see docs): pick the device, absorb the one-time ``SystemError`` from a
throw-away reshape, and only then ``init()`` collectives.

Host kernels are ``ops.Custom(func_type="pyfunc")`` primitives: NumPy
functions MindSpore calls from inside a compiled graph, on CPU only. CPU graphs
use them where MindSpore has no single exact op: JAX's threefry2x32 bits (exact
RNG mode), float <-> int bit casts, frexp/ldexp, float64 top-k, bf16 scatter-add;
graphs for GPU/Ascend use ``backends.mindspore.native`` instead (all but the
last, which ``backends.mindspore.device`` refuses). threefry2x32 (Salmon et al. 2011, 20
rounds, rotations R = (13,15,26,6 | 17,29,16,24), key schedule
k2 = k0 ^ k1 ^ 0x1BD11BDA)::

    random_bits(key, shape)[i] = x0 ^ x1,  (x0, x1) = threefry2x32(key, (0, i))
    fold_in(key, d)            = threefry2x32(key, (0, d))
"""
from __future__ import annotations

import math

import numpy as np

_READY = {"device": None}
_ROT = ((13, 15, 26, 6), (17, 29, 16, 24))


def absorb_numpy_error(probe) -> None:
    """Call ``probe()`` (a throw-away MindSpore op) once, with stderr silenced: the
    NumPy-1 build of MindSpore prints a long ImportError notice and raises
    SystemError (or, for an argument error, TypeError) on its first tensor op."""
    import os
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
        try:
            probe()
        except (SystemError, TypeError):
            pass
        sys.stderr.flush()
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def setup(device: str = "CPU", op_threads: int | None = None) -> None:
    """Select the device once per process and absorb MindSpore's NumPy-2 start-up error.

    ``op_threads``: threads of MindSpore's CPU kernel pool (default: MindSpore's, up to 25). Ranks
    sharing a host's cores each need their share: with its default, a 2-rank job on 2 cores took
    110.9 ms a PowerSGD step, with 1 thread each 72.3 ms (``benchmarks/bench_op_threads.py``;
    ``kfsim.launch.worker --op-threads``). A value
    set earlier in the process (e.g. by an ``--import``) is kept."""
    import mindspore as ms

    if _READY["device"] is not None:
        return
    ms.set_device(device)
    if op_threads is not None:
        from mindspore.device_context.cpu import op_tuning
        try:
            op_tuning.threads_num(int(op_threads))
        except RuntimeError:   # "can not be set repeatedly": the user's own setting stands
            pass
    absorb_numpy_error(lambda: ms.Tensor(np.zeros(2, np.float32)).reshape(1, 2))
    _READY["device"] = device


# -- threefry2x32 in NumPy (exact JAX bits) ----------------------------------

def threefry2x32(key, c0, c1):
    """The 20-round threefry2x32 block function on uint32 counter arrays."""
    k0, k1 = np.uint32(key[0]), np.uint32(key[1])
    ks = (k0, k1, np.uint32(k0 ^ k1 ^ np.uint32(0x1BD11BDA)))
    with np.errstate(over="ignore"):
        x0 = (c0 + ks[0]).astype(np.uint32)
        x1 = (c1 + ks[1]).astype(np.uint32)
        for i in range(5):
            for r in _ROT[i % 2]:
                x0 = x0 + x1
                x1 = (x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))
                x1 = x1 ^ x0
            x0 = x0 + ks[(i + 1) % 3]
            x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def np_key(seed: int) -> np.ndarray:
    """``jax.random.PRNGKey(seed)`` for a Python int seed in [-2**31, 2**32)."""
    seed = int(seed)
    if not -(2 ** 31) <= seed < 2 ** 32:
        raise ValueError(f"key: seed must be in [-2**31, 2**32), got {seed}")
    return np.array([0, seed & 0xFFFFFFFF], np.uint32)


def np_fold_in(key, data) -> np.ndarray:
    d = np.asarray(data).astype(np.int64).astype(np.uint32).reshape(1)
    y0, y1 = threefry2x32(np.asarray(key, np.uint32), np.zeros(1, np.uint32), d)
    return np.concatenate([y0, y1]).astype(np.uint32)


def np_random_bits(key, shape) -> np.ndarray:
    n = math.prod(shape)
    key = np.asarray(key, np.uint32)
    fast = _numba_bits()
    if fast is not None and n >= 4096:
        return fast(key[0], key[1], n).reshape(shape)
    y0, y1 = threefry2x32(key, np.zeros(n, np.uint32), np.arange(n, dtype=np.uint32))
    return (y0 ^ y1).reshape(shape)


_NUMBA = {}


def _numba_bits():
    """threefry2x32 bits as one fused Numba loop (same arithmetic as :func:`threefry2x32`)."""
    if "bits" in _NUMBA:
        return _NUMBA["bits"]
    try:
        import numba
    except ImportError:  # NumPy path only
        _NUMBA["bits"] = None
        return None

    @numba.njit(cache=True, nogil=True)
    def bits(k0, k1, n):
        out = np.empty(n, np.uint32)
        k2 = np.uint32(k0 ^ k1 ^ np.uint32(0x1BD11BDA))
        ks = (np.uint32(k0), np.uint32(k1), k2)
        for i in range(n):
            x0 = np.uint32(0) + ks[0]
            x1 = np.uint32(i) + ks[1]
            for g in range(5):
                if g % 2 == 0:
                    r0, r1, r2, r3 = 13, 15, 26, 6
                else:
                    r0, r1, r2, r3 = 17, 29, 16, 24
                for r in (r0, r1, r2, r3):
                    x0 = np.uint32(x0 + x1)
                    x1 = np.uint32((x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r)))
                    x1 = np.uint32(x1 ^ x0)
                x0 = np.uint32(x0 + ks[(g + 1) % 3])
                x1 = np.uint32(x1 + ks[(g + 2) % 3] + np.uint32(g + 1))
            out[i] = x0 ^ x1
        return out

    _NUMBA["bits"] = bits
    return bits


# -- Custom primitives ----------------------------------------------------------

def ms_dtype(dtype):
    import mindspore as ms

    return {"float32": ms.float32, "float64": ms.float64, "float16": ms.float16, "int32": ms.int32,
            "uint32": ms.uint32, "int64": ms.int64, "uint64": ms.uint64, "int16": ms.int16, "uint16": ms.uint16,
            "int8": ms.int8, "uint8": ms.uint8, "bool": ms.bool_, "bfloat16": ms.bfloat16}[np.dtype(dtype).name]


def custom(fn, shape_fn, dtype_fn):
    from mindspore import ops

    return ops.Custom(fn, out_shape=shape_fn, out_dtype=dtype_fn, func_type="pyfunc")


def fold_in_prim():
    """(key uint32[2], data int scalar) -> uint32[2]."""
    def fn(key, data):
        return np_fold_in(key, data)
    return custom(fn, lambda k, d: (2,), lambda k, d: ms_dtype(np.uint32))


def random_bits_prim(shape):
    shape = tuple(int(s) for s in shape)

    def fn(key):
        return np_random_bits(key, shape)
    return custom(fn, lambda k: shape, lambda k: ms_dtype(np.uint32))


def random_words_prim(shape):
    """(key uint32[2]) -> uint32 of ``shape``: both words of each threefry block
    (``Ops.random_words``), by the NumPy backend's kernel."""
    shape = tuple(int(s) for s in shape)

    def fn(key):
        from backends.numpy.threefry import random_words
        return random_words(np.asarray(key, np.uint32), shape)
    return custom(fn, lambda k: shape, lambda k: ms_dtype(np.uint32))


def bitcast_prim(dtype):
    dtype = np.dtype(dtype)

    def fn(x):
        return np.ascontiguousarray(x).view(dtype)
    return custom(fn, lambda s: s, lambda t: ms_dtype(dtype))


def bf16_round_prim():
    """float32 -> float32: every value rounded to bfloat16 (nearest even, the NumPy backend's
    cast) and kept in float32, an exact carrier of it: on CPU a bf16 value lives as this
    upcast (MindSpore's CPU Cast to bfloat16 and back: 59.7 ms on 10.7M, benchmarks/bench_ms_floor.py)."""
    from backends.numpy.arrays import BF16
    from backends.numpy.casts import narrow, widen

    def fn(x):
        return widen(narrow(np.ascontiguousarray(x), BF16))
    return custom(fn, lambda s: s, lambda t: ms_dtype(np.float32))


def bf16_bits_prim():
    """A bf16-exact float32 -> the bfloat16's bits (uint16: the float's high half)."""
    def fn(x):
        return (np.ascontiguousarray(x).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return custom(fn, lambda s: s, lambda t: ms_dtype(np.uint16))


def bits_bf16_prim():
    """bfloat16 bits (uint16) -> the value as float32 (the bits as its high half: exact)."""
    def fn(u):
        return (np.ascontiguousarray(u).astype(np.uint32) << np.uint32(16)).view(np.float32)
    return custom(fn, lambda s: s, lambda t: ms_dtype(np.float32))


def frexp_prim(dtype):
    dtype = np.dtype(dtype)

    def fn(x):
        m, e = np.frexp(np.asarray(x, dtype))
        return m.astype(dtype), e.astype(np.int32)
    return custom(fn, lambda s: (s, s), lambda t: (ms_dtype(dtype), ms_dtype(np.int32)))


def ldexp_prim(dtype):
    dtype = np.dtype(dtype)

    def fn(m, e):
        with np.errstate(over="ignore"):
            return np.ldexp(np.asarray(m, dtype), np.asarray(e).astype(np.int32)).astype(dtype)
    return custom(fn, lambda a, b: a, lambda a, b: ms_dtype(dtype))


def scatter_add_bf16_prim(size):
    """scatter_add accumulating in bfloat16 (rounded after every add, in index order);
    float32 in and out (exact carriers of bf16 values)."""
    import ml_dtypes
    size = int(size)

    def fn(idx, vals):
        out = np.zeros(size + 1, ml_dtypes.bfloat16)
        i = np.where((idx >= 0) & (idx < size), idx, size)
        np.add.at(out, i, vals.astype(ml_dtypes.bfloat16))
        return out[:size].astype(np.float32)
    return custom(fn, lambda a, b: (size,), lambda a, b: ms_dtype(np.float32))
