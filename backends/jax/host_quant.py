"""``Fused.minmax_quantize_pack`` (quantize's encoder) as a CPU custom call: the NumPy
one-pass kernel (``backends.numpy.fused_minmax_quant``) on float32 buckets it takes, from
``host_kernels.HOST_MIN`` entries; JAX's composition otherwise."""
from __future__ import annotations

import numba
import numpy as np

from backends.jax import ffi, host_kernels
from backends.jax.ffi import buffer, size
from backends.jax.host_kernels import view
from backends.numpy import fused_minmax_quant
from backends.numpy.blocks import PARALLEL_MIN


def _minmax_quantize_body():
    """``minmax_quantize_pack`` of float32 x (buckets the kernel takes: the caller checks)."""
    @numba.njit(cache=True, nogil=True)
    def body(args, rets):
        xa, xd = buffer(args, 0)
        ka, _ = buffer(args, 1)
        pa, _ = buffer(args, 2)
        ra, rd = buffer(rets, 0)
        la, ld = buffer(rets, 1)
        sa, _ = buffer(rets, 2)
        n, nb = size(xd), size(ld)
        p = view(pa, 3, np.int32)
        key = view(ka, 2, np.uint32)
        bits, top = np.int64(p[1]), np.float32(p[2])
        B = np.int64(p[0]) if p[0] else np.int64(n)
        x, out = view(xa, n, np.float32), view(ra, size(rd), np.uint32)
        los, steps = view(la, nb, np.float32), view(sa, nb, np.float32)
        inv_top = np.float32(1.0) / top
        if n >= PARALLEL_MIN:
            fused_minmax_quant.run_parallel(x, B, top, inv_top, bits, key[0], key[1], out, los, steps)
        elif n:
            fused_minmax_quant.run_serial(x, B, top, inv_top, bits, key[0], key[1], out, los, steps)
    return body


def usable(x, bucket: int, top: float, bits: int, key) -> bool:
    """Whether :func:`minmax_quantize_pack` takes the call: a 1-D float32 array the kernels serve
    (:func:`host_kernels.usable`) whose buckets the kernel takes (``fused_minmax_quant.applies``),
    an integer ``top`` and a uint32[2] key."""
    return (x.ndim == 1 and float(top) == int(top) and host_kernels.usable(x.size, x)
            and fused_minmax_quant.applies(x, bucket, bits)
            and np.dtype(key.dtype) == np.uint32 and tuple(key.shape) == (2,))


def minmax_quantize_pack(x, bucket: int, top: float, bits: int, key):
    """``Fused.minmax_quantize_pack`` as a custom call (where :func:`usable`)."""
    import jax

    nb = -(-x.size // (bucket or x.size))
    scales = jax.ShapeDtypeStruct((nb,), np.float32)
    return ffi.call("kfsim_minmax_quantize_pack", _minmax_quantize_body,
                    (jax.ShapeDtypeStruct((-(-x.size // (32 // bits)),), np.uint32), scales, scales), x, key,
                    np.array([int(bucket), int(bits), int(top)], np.int32))
