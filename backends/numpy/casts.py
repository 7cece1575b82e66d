"""Casts of the NumPy binding that NumPy does slowly or differently:
float32 <-> float16 / bfloat16 on raw bits (NumPy's half casts run a slow
scalar loop; rounding is to nearest even, NaN stays NaN, payload not kept)
and the saturating float -> integer cast (trunc, clamp, NaN -> 0) of
``Ops.astype``, each one Numba pass, on all cores from ``PARALLEL_MIN``
entries (chunks of ``CHUNK`` entries; outputs from the buffer pool).
"""
from __future__ import annotations

import numba
import numpy as np

from backends.numpy import buffers
from backends.numpy.arrays import BF16
from backends.numpy.blocks import PARALLEL_MIN
from backends.numpy.intrinsics import bits_f32, f32_bits, f32_to_half_bits, half_bits_to_f32

CHUNK = 1 << 16  # entries per task of the threaded casts

_U = np.uint32  # Numba widens uint32 arithmetic to 64 bits (half-width vectors): cast back


@numba.njit(cache=True, nogil=True)
def f32_to_f16(x, out):
    """IEEE binary32 -> binary16 bits, round to nearest even, overflow to inf, gradual
    underflow: the CPU's conversion (``fptrunc``), except that a NaN becomes the quiet NaN
    0x7E00 with its sign (payload not kept, as JAX's). 25M float32 on one core 9.7 -> 4.4 ms,
    1e6 0.38 -> 0.07 ms; bits equal to the integer form it replaced for all 2**32 inputs."""
    for i in range(x.size):
        v = x[i]
        b = f32_bits(v)
        nan = np.uint16(_U(_U(b >> _U(16)) & _U(0x8000)) | _U(0x7E00))
        out[i] = nan if _U(b & _U(0x7FFFFFFF)) > _U(0x7F800000) else f32_to_half_bits(v)
    return out


@numba.njit(cache=True, nogil=True)
def f16_to_f32(h, out):
    """binary16 bits -> binary32 (exact): the CPU's conversion (``fpext``), with a signalling
    NaN's quiet bit cleared again so every payload keeps its bits (one core, 1e6: 0.27 ->
    0.07 ms; all 65536 inputs equal to the integer form it replaced)."""
    for i in range(h.size):
        b = _U(h[i])
        v = f32_bits(half_bits_to_f32(h[i]))
        signalling = (_U(b & _U(0x7E00)) == _U(0x7C00)) & (_U(b & _U(0x1FF)) != _U(0))
        out[i] = bits_f32(_U(v & _U(~_U(_U(signalling) << _U(22)))))
    return out


@numba.njit(cache=True, nogil=True)
def f32_to_bf16(x, out):
    """binary32 -> bfloat16 bits, round to nearest even; NaN stays NaN (quiet). Every
    operation cast back to uint32 (one core, 1e6: 0.20 -> 0.09 ms; all 2**32 inputs unchanged)."""
    for i in range(x.size):
        b = f32_bits(x[i])
        rounded = _U(_U(b + _U(0x7FFF) + _U(_U(b >> _U(16)) & _U(1))) >> _U(16))
        quiet = _U(_U(b >> _U(16)) | _U(0x40))
        out[i] = np.uint16(quiet if _U(b & _U(0x7FFFFFFF)) > _U(0x7F800000) else rounded)
    return out


@numba.njit(cache=True, nogil=True)
def bf16_to_f32(h, out):
    for i in range(h.size):
        out[i] = bits_f32(_U(_U(h[i]) << _U(16)))
    return out


@numba.njit(cache=True, nogil=True)
def saturating_cast_into(x, out, lo, hi_excl, out_min, out_max):
    """out = trunc(x) clamped to [out_min, out_max]; NaN -> 0. ``lo`` and
    ``hi_excl`` (= out_max + 1) are exact in x's float type."""
    for i in range(x.size):
        v = x[i]
        if v != v:
            out[i] = 0
        elif v >= hi_excl:
            out[i] = out_max
        elif v <= lo:
            out[i] = out_min
        else:
            out[i] = int(v)  # in range: C conversion truncates toward zero
    return out


# the same kernels over CHUNK-entry slices on all cores (an elementwise kernel's
# bits do not depend on how its range is cut)
@numba.njit(cache=True, parallel=True)
def _f32_to_f16_all(x, out):
    for c in numba.prange((x.size + CHUNK - 1) // CHUNK):
        f32_to_f16(x[c * CHUNK:(c + 1) * CHUNK], out[c * CHUNK:(c + 1) * CHUNK])
    return out


@numba.njit(cache=True, parallel=True)
def _f16_to_f32_all(h, out):
    for c in numba.prange((h.size + CHUNK - 1) // CHUNK):
        f16_to_f32(h[c * CHUNK:(c + 1) * CHUNK], out[c * CHUNK:(c + 1) * CHUNK])
    return out


@numba.njit(cache=True, parallel=True)
def _f32_to_bf16_all(x, out):
    for c in numba.prange((x.size + CHUNK - 1) // CHUNK):
        f32_to_bf16(x[c * CHUNK:(c + 1) * CHUNK], out[c * CHUNK:(c + 1) * CHUNK])
    return out


@numba.njit(cache=True, parallel=True)
def _bf16_to_f32_all(h, out):
    for c in numba.prange((h.size + CHUNK - 1) // CHUNK):
        bf16_to_f32(h[c * CHUNK:(c + 1) * CHUNK], out[c * CHUNK:(c + 1) * CHUNK])
    return out


@numba.njit(cache=True, parallel=True)
def _saturating_cast_all(x, out, lo, hi_excl, out_min, out_max):
    for c in numba.prange((x.size + CHUNK - 1) // CHUNK):
        saturating_cast_into(x[c * CHUNK:(c + 1) * CHUNK], out[c * CHUNK:(c + 1) * CHUNK], lo, hi_excl,
                             out_min, out_max)
    return out


NARROW = {np.dtype(np.float16): (f32_to_f16, f16_to_f32), BF16: (f32_to_bf16, bf16_to_f32)}
"""The 16-bit float dtypes: their (from float32, to float32) one-thread kernels."""

NARROW_ALL = {np.dtype(np.float16): (_f32_to_f16_all, _f16_to_f32_all), BF16: (_f32_to_bf16_all, _bf16_to_f32_all)}
"""The same, threaded (any size)."""


def _kernel(table, dtype, way: int, n: int):
    return (NARROW_ALL if n >= PARALLEL_MIN else table)[dtype][way]


def narrow(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float32 -> float16 / bf16 (a dtype of NARROW), rounded to nearest even."""
    bits = _kernel(NARROW, dtype, 0, x.size)(np.ascontiguousarray(x).reshape(-1), buffers.empty(x.size, np.uint16))
    return bits.view(dtype).reshape(x.shape)


def widen(x: np.ndarray) -> np.ndarray:
    """float16 / bf16 -> float32 (exact) with a Numba kernel."""
    bits = np.ascontiguousarray(x).reshape(-1).view(np.uint16)
    return _kernel(NARROW, x.dtype, 1, x.size)(bits, buffers.empty(x.size, np.float32)).reshape(x.shape)


def saturating_cast(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Float -> integer: truncate toward zero, saturate, NaN -> 0 (one Numba pass).

    The bounds min and max + 1 of every integer type are powers of two, so
    they are exact in float32/float64 and the comparisons are exact."""
    if x.dtype not in (np.float32, np.float64):
        x = widen(x)  # float16 / bf16 widen exactly
    info = np.iinfo(dtype)
    out = buffers.empty(x.shape, dtype)
    run = _saturating_cast_all if x.size >= PARALLEL_MIN else saturating_cast_into
    run(np.ascontiguousarray(x).reshape(-1), out.reshape(-1), x.dtype.type(info.min),
                         x.dtype.type(float(info.max) + 1.0), dtype.type(info.min), dtype.type(info.max))
    return out
