"""NumPy/Numba binding of the ops namespace (``backends.get("numpy")``).

Arrays in and out are plain ``numpy.ndarray`` (0-d results too; bf16 is
``ml_dtypes.bfloat16``). Every op gives the same dtype, shape and bits as the
JAX binding (``backends/jax/ops.py``, eager), except ``matmul`` (BLAS
accumulation order) and two things XLA:CPU does differently from IEEE: it
flushes subnormal float32/float64/bf16 results of arithmetic to zero (NumPy
keeps them), and NaN payload bits are not part of the contract.
``tests/backends/test_ops_*.py`` check each op on both backends.

Note for compressor authors: the *array operators* are NumPy's own. XLA
rewrites ``a / b`` into ``a * (1 / b)`` whenever ``b`` is broadcast (a Python
scalar, a 0-d array, an ``(n, 1)`` column), which NumPy does not; write the
reciprocal product yourself to get the same bits on every backend.

Dtype rule for :meth:`asarray` of Python scalars and lists (no ``dtype``):
float -> float32, int -> int32, as JAX in its default 32-bit mode. NumPy
arrays keep their dtype (including float64).

Numba kernels do the heavy or awkward work in one pass: top-k by sampled
threshold (``topk``), threefry random bits and uniforms (``threefry``), the
halving-order sum of long vectors (``sums``), float32 <-> float16/bf16 casts
(NumPy's half casts run a slow scalar loop) and saturating float -> int
casts (``casts``), sign and select (``elementwise``), gather and
scatter-add (``indexing``) and bit packing (``packing``), all modules of
``backends.numpy``; the fused ops come from :class:`NumpyFused`
(``backends.numpy.fused_ops``).
"""
from __future__ import annotations

import numpy as np

from backends.common import check_bits, is_float
from backends.numpy import buffers, fused_minmax, packing, threefry
from backends.numpy.arrays import BF16, KERNEL_FLOATS, UINT, as_array, compute_float
from backends.numpy.casts import NARROW, narrow, saturating_cast, widen
from backends.numpy.elementwise import sign_into, where_select
from backends.numpy.fused_lowrank import thin_matmul
from backends.numpy.fused_ops import NumpyFused
from backends.numpy.indexing import gather_bits, scatter_add_into
from backends.numpy.sums import sum_halving
from backends.numpy.topk import top_k_indices, top_k_indices_int

_SELECT_MIN = 1 << 14  # below this np.where is as fast as the kernel call


def _ufunc(fn, name: str):
    """The op ``name``: NumPy's elementwise ``fn``, its result an ndarray (0-d too)."""
    def op(x):
        return np.asarray(fn(as_array(x)))
    op.__name__ = op.__qualname__ = name
    return staticmethod(op)


class NumpyOps(NumpyFused):
    name = "numpy"

    # -- creation and shape -------------------------------------------------
    @staticmethod
    def asarray(x, dtype=None):
        if dtype is not None:
            return np.asarray(x, dtype=np.dtype(dtype))
        if isinstance(x, np.ndarray):
            return x
        a = np.asarray(x)
        if a.dtype == np.float64 and not isinstance(x, np.floating):
            return a.astype(np.float32)
        if a.dtype == np.int64 and not isinstance(x, np.integer):
            return a.astype(np.int32)
        return a

    @staticmethod
    def zeros(shape, dtype):
        return buffers.zeros(tuple(shape), np.dtype(dtype))

    @staticmethod
    def full(shape, value, dtype):
        return np.full(tuple(shape), value, np.dtype(dtype))

    @staticmethod
    def arange(n):
        return np.arange(n, dtype=np.int32)

    @staticmethod
    def reshape(x, shape):
        return np.reshape(as_array(x), tuple(shape))

    @staticmethod
    def concatenate(xs, axis=0):
        return np.concatenate([as_array(x) for x in xs], axis=axis)

    @staticmethod
    def stack(xs):
        return np.stack([as_array(x) for x in xs])

    @staticmethod
    def pad(x, after):
        x = as_array(x)
        out = np.zeros(x.shape[0] + after, x.dtype)
        out[: x.shape[0]] = x
        return out

    @staticmethod
    def transpose(x):
        return np.transpose(as_array(x))  # a view: BLAS reads it transposed, no copy

    # -- elementwise --------------------------------------------------------
    abs = _ufunc(np.abs, "abs")
    sqrt = _ufunc(np.sqrt, "sqrt")
    floor = _ufunc(np.floor, "floor")
    isfinite = _ufunc(np.isfinite, "isfinite")

    @staticmethod
    def sign(x):
        x = as_array(x)
        if x.dtype in KERNEL_FLOATS:
            return sign_into(np.ascontiguousarray(x).reshape(-1), np.empty(x.size, x.dtype)).reshape(x.shape)
        s = np.asarray(np.sign(x))
        if is_float(x.dtype):
            # sign(-0.0) is -0.0 in JAX (NumPy gives +0.0): keep zeros as they are
            np.copyto(s, x, where=(x == 0))
        return s

    @staticmethod
    def maximum(a, b):
        return np.asarray(np.maximum(a, b))

    @staticmethod
    def minimum(a, b):
        return np.asarray(np.minimum(a, b))

    @staticmethod
    def where(cond, a, b):
        out = where_select(cond, a, b, _SELECT_MIN)
        if out is not None:
            return out
        return np.asarray(np.where(cond, a, b))

    @staticmethod
    def frexp(x):
        x = as_array(x)
        c = compute_float(x.dtype)
        m, e = np.frexp(x.astype(c, copy=False))
        return np.asarray(m.astype(x.dtype, copy=False)), np.asarray(e.astype(np.int32, copy=False))

    @staticmethod
    def ldexp(m, e):
        m = as_array(m)
        c = compute_float(m.dtype)
        out = np.ldexp(m.astype(c, copy=False), as_array(e).astype(np.int32, copy=False))
        return np.asarray(out.astype(m.dtype, copy=False))

    @staticmethod
    def astype(x, dtype):
        x = as_array(x)
        dtype = np.dtype(dtype)
        if x.dtype == dtype:
            return x
        if is_float(x.dtype) and np.issubdtype(dtype, np.integer):
            return saturating_cast(x, dtype)
        if x.dtype == np.float32 and dtype in NARROW:
            return narrow(x, dtype)
        if x.dtype in NARROW and dtype.kind == "f" and dtype.itemsize >= 4:
            wide = widen(x)
            return wide if dtype == np.float32 else wide.astype(dtype)
        return np.asarray(x.astype(dtype))

    @staticmethod
    def bitcast(x, dtype):
        x = as_array(x)
        dtype = np.dtype(dtype)
        if dtype.itemsize != x.dtype.itemsize:
            raise ValueError(f"bitcast: {x.dtype} and {dtype} differ in width")
        return x.view(dtype)

    # -- reductions ---------------------------------------------------------
    @staticmethod
    def sum(x, axis=None):
        return sum_halving(as_array(x), axis)

    @staticmethod
    def max(x, axis=None):
        x = as_array(x)
        if (axis in (1, -1) and x.ndim == 2 and x.dtype in fused_minmax.SIGNED and x.shape[1] > 0
                and x.size >= _SELECT_MIN):
            # rows of a bucketed array (from where's size threshold): the vectorized per-bucket
            # kernel (np.max over short rows paid ~60 ns a row: 0.94 ms on 1e6 float32 in rows
            # of 64); a -0/+0 tie gives +0
            return fused_minmax.bucket_min_max(np.ascontiguousarray(x).reshape(-1), x.shape[1])[1]
        return np.asarray(np.max(x, axis=axis))

    # -- linear algebra -----------------------------------------------------
    @staticmethod
    def matmul(a, b):
        a, b = as_array(a), as_array(b)
        out = thin_matmul(a, b) if a.dtype in KERNEL_FLOATS else None  # rank-r projections
        return np.asarray(np.matmul(a, b)) if out is None else out

    # -- selection ----------------------------------------------------------
    @staticmethod
    def top_k(x, k):
        x = as_array(x)
        if x.ndim != 1:
            raise ValueError(f"top_k: expects a 1-D array, got shape {x.shape}")
        if not (isinstance(k, (int, np.integer)) and 0 < k <= x.size):
            raise ValueError(f"top_k: need 0 < k <= {x.size}, got {k!r}")
        if is_float(x.dtype):
            idx = top_k_indices(np.ascontiguousarray(x), int(k))
        elif np.issubdtype(x.dtype, np.integer):
            idx = top_k_indices_int(np.ascontiguousarray(x), int(k))
        else:
            raise ValueError(f"top_k: unsupported dtype {x.dtype}")
        return x[idx], idx

    @staticmethod
    def gather(x, idx):
        x = as_array(x)
        idx = as_array(idx)
        if x.ndim != 1:
            raise ValueError(f"gather: expects a 1-D array, got shape {x.shape}")
        flat_idx = np.ascontiguousarray(idx.reshape(-1))
        if not np.issubdtype(flat_idx.dtype, np.integer):
            raise ValueError(f"gather: indices must be integers, got {idx.dtype}")
        bits = np.ascontiguousarray(x).view(UINT[x.dtype.itemsize])
        return gather_bits(bits, flat_idx).view(x.dtype).reshape(idx.shape)

    @staticmethod
    def scatter_add(size, idx, vals):
        idx = np.ascontiguousarray(as_array(idx).reshape(-1))
        vals = np.ascontiguousarray(as_array(vals).reshape(-1))
        if idx.size != vals.size:
            raise ValueError(f"scatter_add: {idx.size} indices for {vals.size} values")
        out = buffers.zeros(int(size), vals.dtype)
        if vals.dtype in (np.float16, BF16):
            # per-add rounding to the narrow type, in index order (as XLA)
            ok = (idx >= 0) & (idx < size)
            np.add.at(out, idx[ok], vals[ok])
            return out
        return scatter_add_into(out, idx, vals)

    @staticmethod
    def nonzero(mask, capacity):
        mask = as_array(mask)
        pos = np.flatnonzero(mask)[:capacity].astype(np.int32)
        if pos.size == capacity:
            return pos
        out = np.full(capacity, mask.size, np.int32)
        out[: pos.size] = pos
        return out

    # -- randomness ---------------------------------------------------------
    @staticmethod
    def key(seed):
        return threefry.key(seed)

    @staticmethod
    def fold_in(key, data):
        return threefry.fold_in(key, data)

    @staticmethod
    def random_bits(key, shape):
        return threefry.random_bits(key, shape)

    @staticmethod
    def random_words(key, shape):
        return threefry.random_words(key, shape)

    @staticmethod
    def uniform(key, shape):
        return threefry.uniform(key, shape)  # (bits >> 9 | 0x3F800000) - 1, fused

    # -- bit packing ----------------------------------------------------------
    @staticmethod
    def pack_bits(codes, bits):
        check_bits(bits)
        codes = np.ascontiguousarray(as_array(codes))
        if codes.ndim != 1:
            raise ValueError(f"pack_bits: codes must be 1-D, got shape {codes.shape}")
        if codes.dtype != np.uint32:
            codes = codes.astype(np.uint32)
        return packing.pack_bits(codes, int(bits))

    @staticmethod
    def unpack_bits(words, bits, count):
        check_bits(bits)
        words = np.ascontiguousarray(as_array(words), dtype=np.uint32)
        per = 32 // bits
        if not 0 <= count <= words.size * per:
            raise ValueError(f"unpack_bits: {count} codes do not fit in {words.size} words of {per}")
        return packing.unpack_bits(words, int(bits), int(count))


OPS = NumpyOps()
