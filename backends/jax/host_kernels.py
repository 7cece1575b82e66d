"""The NumPy binding's one-pass Numba kernels as XLA custom calls, so the JAX
binding's fused ops run as fast on the CPU as NumPy's (``backends.jax.ffi``).

XLA:CPU runs the reference compositions of ``compressors.fused.Fused`` as
several loops with threefry, transposes and reductions that it does not
fuse well (``quantize_pack`` about 10x slower than the NumPy kernel). The
kernels return the bits of those compositions (``tests/backends/test_fused.py``),
so routing a fused op here changes its speed, not its result. Each call
reads its operands where XLA keeps them and writes XLA's result buffer;
the threaded kernels run on Numba's thread pool (``omp`` or ``tbb``, which
may be entered from several threads; with the ``workqueue`` layer, which
may not, :func:`usable` is False and the compositions run).

Under ``jax.vmap`` a call runs once per worker (``vmap_method="sequential"``).
Scalar arguments travel as an int32 operand (``params``); :func:`usable`
says when an op qualifies (CPU, float32/float64, at least ``HOST_MIN`` entries).
"""
from __future__ import annotations

import functools

import numba
import numpy as np

from backends.jax import ffi
from backends.jax.ffi import buffer, ptr, size
from backends.numpy import fused_minmax, fused_natural, fused_norm, fused_quant, fused_sign, sign_sums, sums
from backends.numpy.arrays import BF16
from backends.numpy.blocks import PARALLEL_MIN
from backends.numpy.casts import NARROW_ALL

HOST_MIN = 1 << 15  # entries from which a custom call beats XLA's composition
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@numba.njit(cache=True, nogil=True, inline="always")
def view(addr, n, dtype):
    return numba.carray(ptr(addr), (n,), dtype)


# -- bodies (one per dtype; closures over it, as the carray dtype must be a constant) ----------

def _quantize_body(dt):
    @numba.njit(cache=True, nogil=True)
    def body(args, rets):
        xa, xd = buffer(args, 0)
        oa, od = buffer(args, 1)
        ia, _ = buffer(args, 2)
        ka, _ = buffer(args, 3)
        pa, _ = buffer(args, 4)
        ra, rd = buffer(rets, 0)
        n, nb = size(xd), size(od)
        p = view(pa, 4, np.int32)
        key = view(ka, 2, np.uint32)
        bucket, bits, signed, top = p[0], p[1], p[2] != 0, dt(p[3])
        x, out = view(xa, n, dt), view(ra, size(rd), np.uint32)
        off, inv = view(oa, nb, dt), view(ia, nb, dt)
        if n:
            fused_quant._quantize_parallel(x, off, inv, bucket if bucket else n, top, bits, signed, key[0], key[1],
                                           out)
    return body


def _dequantize_body(dt):
    @numba.njit(cache=True, nogil=True)
    def body(args, rets):
        wa, wd = buffer(args, 0)
        oa, od = buffer(args, 1)
        sa, _ = buffer(args, 2)
        pa, _ = buffer(args, 3)
        ra, rd = buffer(rets, 0)
        nb, count = size(od), size(rd)
        p = view(pa, 3, np.int32)
        bucket, bits, signed = p[0], p[1], p[2] != 0
        out = view(ra, count, dt)
        if count:
            fused_quant._dequantize_parallel(view(wa, size(wd), np.uint32), bits, view(oa, nb, dt),
                                             view(sa, nb, dt), bucket if bucket else count, signed, out)
    return body


def _min_max_body(dt):
    it, inf_key, neg_inf_key = fused_minmax.SIGNED[np.dtype(dt)]
    lo_nan, hi_nan = it(neg_inf_key), it(inf_key)

    @numba.njit(cache=True, nogil=True)
    def body(args, rets):
        xa, xd = buffer(args, 0)
        pa, _ = buffer(args, 1)
        la, ld = buffer(rets, 0)
        ha, _ = buffer(rets, 1)
        n, nb = size(xd), size(ld)
        bucket = view(pa, 1, np.int32)[0]
        fused_minmax.min_max_into(view(xa, n, it), bucket if bucket else n, lo_nan, hi_nan, view(la, nb, it),
                                  view(ha, nb, it))
    return body


def _norm_body(dt):
    it, inf_key, _ = fused_minmax.SIGNED[np.dtype(dt)]
    inf_bits = it(inf_key)

    @numba.njit(cache=True, nogil=True)
    def body(args, rets):
        xa, xd = buffer(args, 0)
        pa, _ = buffer(args, 1)
        ra, rd = buffer(rets, 0)
        n, nb = size(xd), size(rd)
        B = view(pa, 1, np.int32)[0]
        B = B if 0 < B < n else n
        P = 1
        while P < B:
            P <<= 1
        x, xi, out = view(xa, n, dt), view(xa, n, it), view(ra, nb, dt)
        if n >= PARALLEL_MIN and nb > 1:
            fused_norm._norms_parallel(x, xi, inf_bits, B, P, out)
        elif nb:
            fused_norm._norms(x, xi, inf_bits, B, P, 0, nb, out)
    return body


def _sum_body(dt, absolute):
    @numba.njit(cache=True, nogil=True)
    def body(args, rets):
        xa, xd = buffer(args, 0)
        sa, _ = buffer(args, 1)
        ra, _ = buffer(rets, 0)
        n = size(xd)
        view(ra, 1, dt)[0] = sums.halving_sum(view(xa, n, dt), n >= sums.SUM_PARALLEL_MIN, absolute,
                                               view(sa, 1, dt)[0])
    return body


def _sums_body(dt, kernel, nsums, signs):
    """A one-pass sum kernel ``kernel(x, scale, sums, words)`` of ``backends.numpy.sign_sums``:
    ``nsums`` sums its first result and, with ``signs``, the sign words its second
    (``sign_split_sums``, ``sign_split_pack``, ``sum_abs_pack``)."""
    @numba.njit(cache=True, nogil=True)
    def body(args, rets):
        xa, xd = buffer(args, 0)
        sa, _ = buffer(args, 1)
        ra, _ = buffer(rets, 0)
        words = np.empty(0, np.uint32)
        if signs:
            wa, wd = buffer(rets, 1)
            words = view(wa, size(wd), np.uint32)
        kernel(view(xa, size(xd), dt), view(sa, 1, dt)[0], view(ra, nsums, dt), words)
    return body


def _pack_signs_body(dt):
    @numba.njit(cache=True, nogil=True)
    def body(args, rets):
        xa, xd = buffer(args, 0)
        ra, rd = buffer(rets, 0)
        fused_sign.pack_signs_into(view(xa, size(xd), dt), view(ra, size(rd), np.uint32))
    return body


def _unpack_signs_body(width):
    @numba.njit(cache=True, nogil=True)
    def body(args, rets):
        wa, wd = buffer(args, 0)
        pa, _ = buffer(args, 1)
        na, _ = buffer(args, 2)
        ra, rd = buffer(rets, 0)
        fused_sign.unpack_signs_into(view(wa, size(wd), np.uint32), view(pa, 1, width)[0], view(na, 1, width)[0],
                                     view(ra, size(rd), width))
    return body


def _natural_pack_body(dt):
    bits_type = np.uint64 if np.dtype(dt) == np.float64 else np.uint32
    wide = np.dtype(dt) == np.float64

    @numba.njit(cache=True, nogil=True)
    def body(args, rets):
        xa, xd = buffer(args, 0)
        ka, _ = buffer(args, 1)
        sa, sd = buffer(rets, 0)
        ea, ed = buffer(rets, 1)
        n = size(xd)
        key = view(ka, 2, np.uint32)
        fused_natural.pack_into(view(xa, n, bits_type), view(xa, n, dt), wide, key[0], key[1],
                                view(sa, size(sd), np.uint32), view(ea, size(ed), np.uint32))
    return body


@numba.njit(cache=True, nogil=True)
def _natural_unpack_body(args, rets):
    sa, sd = buffer(args, 0)
    ea, ed = buffer(args, 1)
    ra, rd = buffer(rets, 0)
    fused_natural.unpack_into(view(sa, size(sd), np.uint32), view(ea, size(ed), np.uint32),
                              view(ra, size(rd), np.uint32))


def _cast_body(kernel, src, dst):
    @numba.njit(cache=True, nogil=True)
    def body(args, rets):
        xa, xd = buffer(args, 0)
        ra, _ = buffer(rets, 0)
        n = size(xd)
        kernel(view(xa, n, src), view(ra, n, dst))
    return body


# -- the calls -------------------------------------------------------------------------------

def usable(n: int, *floats) -> bool:
    """The kernels serve a call of ``n`` entries on these float arrays: the CPU
    default backend, float32/float64, at least HOST_MIN entries."""
    import jax

    return (n >= HOST_MIN and all(a.dtype in FLOATS for a in floats) and jax.default_backend() == "cpu"
            and thread_safe())


@functools.lru_cache(maxsize=None)
def thread_safe() -> bool:
    """Whether Numba's threading layer lets XLA's threads call threaded kernels at once
    (the pool, and so the layer, is started when ``backends.numpy`` is imported)."""
    return numba.threading_layer() in ("omp", "tbb")


def _tag(dtype) -> str:
    return np.dtype(dtype).name


def _params(*values) -> np.ndarray:
    return np.array([int(v) for v in values], np.int32)


def quantize_pack(x, offset, inv_scale, bucket: int, top: float, bits: int, key, signed: bool):
    import jax

    t = np.dtype(x.dtype)
    words = -(-x.size // (32 // bits))
    return ffi.call(f"kfsim_quantize_pack_{_tag(t)}", functools.partial(_quantize_body, t.type),
                 jax.ShapeDtypeStruct((words,), np.uint32), x, offset, inv_scale, key,
                 _params(bucket, bits, signed, top))


def dequantize(words, bits: int, count: int, offset, scale, bucket: int, signed: bool):
    import jax

    t = np.dtype(offset.dtype)
    return ffi.call(f"kfsim_dequantize_{_tag(t)}", functools.partial(_dequantize_body, t.type),
                 jax.ShapeDtypeStruct((count,), t), words, offset, scale, _params(bucket, bits, signed))


def bucket_min_max(x, bucket: int):
    import jax

    t = np.dtype(x.dtype)
    nb = -(-x.size // (bucket or x.size))
    out = jax.ShapeDtypeStruct((nb,), t)  # the body reads and writes the float bits as integers
    return ffi.call(f"kfsim_bucket_min_max_{_tag(t)}", functools.partial(_min_max_body, t.type), (out, out), x,
                 _params(bucket))


def bucket_norm(x, bucket: int):
    import jax

    t = np.dtype(x.dtype)
    nb = -(-x.size // (bucket if 0 < bucket < x.size else x.size))
    return ffi.call(f"kfsim_bucket_norm_{_tag(t)}", functools.partial(_norm_body, t.type),
                 jax.ShapeDtypeStruct((nb,), t), x, _params(bucket))


def halving_sum(x, absolute: bool, scale: float = 1.0):
    """The halving sum of x (of |x * scale| if ``absolute``; scale a power of two)."""
    import jax

    t = np.dtype(x.dtype)
    return ffi.call(f"kfsim_sum{'_abs' if absolute else ''}_{_tag(t)}", functools.partial(_sum_body, t.type, absolute),
                 jax.ShapeDtypeStruct((), t), x, np.asarray(scale, t))


def sign_split_sums(x, scale):
    import jax

    t = np.dtype(x.dtype)
    body = functools.partial(_sums_body, t.type, sign_sums.split_sums_into, 5, False)
    return ffi.call(f"kfsim_sign_split_sums_{_tag(t)}", body,
                 jax.ShapeDtypeStruct((5,), t), x, np.asarray(scale, t))


def sum_abs_pack(x, scale):
    import jax

    t = np.dtype(x.dtype)
    outs = (jax.ShapeDtypeStruct((), t), jax.ShapeDtypeStruct((-(-x.size // 32),), np.uint32))
    body = functools.partial(_sums_body, t.type, sign_sums.abs_sum_pack_into, 1, True)
    return ffi.call(f"kfsim_sum_abs_pack_{_tag(t)}", body, outs, x,
                 np.asarray(scale, t))


def sign_split_pack(x, scale):
    import jax

    t = np.dtype(x.dtype)
    outs = (jax.ShapeDtypeStruct((5,), t), jax.ShapeDtypeStruct((-(-x.size // 32),), np.uint32))
    body = functools.partial(_sums_body, t.type, sign_sums.split_sums_into, 5, True)
    return ffi.call(f"kfsim_sign_split_pack_{_tag(t)}", body, outs, x,
                 np.asarray(scale, t))


def pack_signs(x):
    import jax

    t = np.dtype(x.dtype)
    return ffi.call(f"kfsim_pack_signs_{_tag(t)}", functools.partial(_pack_signs_body, t.type),
                 jax.ShapeDtypeStruct((-(-x.size // 32),), np.uint32), x)


def unpack_signs(words, count: int, pos, neg):
    import jax
    from jax import lax

    t = np.dtype(pos.dtype)
    width = {4: np.uint32, 8: np.uint64}[t.itemsize]
    # the result is declared as floats and written as their bits: an XLA bitcast_convert of a
    # large array is a copy on the CPU
    return ffi.call(f"kfsim_unpack_signs_{_tag(t)}", functools.partial(_unpack_signs_body, width),
                 jax.ShapeDtypeStruct((count,), t), words, lax.bitcast_convert_type(pos, width),
                 lax.bitcast_convert_type(neg, width))


def natural_pack(x, key):
    import jax

    t = np.dtype(x.dtype)
    words = (jax.ShapeDtypeStruct((-(-x.size // 32),), np.uint32), jax.ShapeDtypeStruct((-(-x.size // 4),), np.uint32))
    return ffi.call(f"kfsim_natural_pack_{_tag(t)}", functools.partial(_natural_pack_body, t.type), words, x, key)


def natural_unpack(signs, exps, count: int):
    import jax

    # declared as float32 and written as its bits (an XLA bitcast of a large array is a copy)
    return ffi.call("kfsim_natural_unpack", lambda: _natural_unpack_body, jax.ShapeDtypeStruct((count,), np.float32),
                 signs, exps)


NARROWS = (np.dtype(np.float16), BF16)


def cast16(x, dtype):
    """float32 -> float16/bf16 (round to nearest even) or back (exact), as the NumPy kernels;
    the 16-bit side is read and written as its bits."""
    import jax

    src, dst = np.dtype(x.dtype), np.dtype(dtype)
    if dst in NARROWS:
        return ffi.call(f"kfsim_narrow_{dst.name}", functools.partial(_cast_body, NARROW_ALL[dst][0], np.float32,
                                                                   np.uint16),
                     jax.ShapeDtypeStruct(x.shape, dst), x)
    return ffi.call(f"kfsim_widen_{src.name}", functools.partial(_cast_body, NARROW_ALL[src][1], np.uint16, np.float32),
                 jax.ShapeDtypeStruct(x.shape, np.float32), x)
