"""NumPy/Numba binding of the ops namespace (``backends.get("numpy")``).

Arrays in and out are plain ``numpy.ndarray`` (0-d results too; bf16 is
``ml_dtypes.bfloat16``). Every op gives the same dtype, shape and bits as the
JAX binding (``backends/jax/ops.py``, eager), except ``matmul`` (BLAS
accumulation order) and two things XLA:CPU does differently from IEEE: it
flushes subnormal float32/float64/bf16 results of arithmetic to zero (NumPy
keeps them), and NaN payload bits are not part of the contract.
``tests/backends/test_ops_semantics.py`` checks each op on both backends.

Note for compressor authors: the *array operators* are NumPy's own. XLA
rewrites ``a / b`` into ``a * (1 / b)`` whenever ``b`` is broadcast (a Python
scalar, a 0-d array, an ``(n, 1)`` column), which NumPy does not; write the
reciprocal product yourself to get the same bits on every backend.

Dtype rule for :meth:`asarray` of Python scalars and lists (no ``dtype``):
float -> float32, int -> int32, as JAX in its default 32-bit mode. NumPy
arrays keep their dtype (including float64).

Numba kernels (``backends.numpy.kernels``, ``backends.numpy.threefry``) do the
heavy or awkward work in one pass: top-k by sampled threshold, threefry
random bits and uniforms, the halving-order sum of long vectors, float32 <->
float16/bf16 casts (NumPy's half casts run a slow scalar loop), saturating
float -> int casts, gather, scatter-add and bit packing.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from backends.numpy import buffers
from backends.numpy import fused as F
from backends.numpy import kernels as K
from backends.numpy import threefry
from backends.common import is_float, check_bits, next_pow2
from compressors.ops import Fused

_BF16 = np.dtype(ml_dtypes.bfloat16)
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _arr(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else np.asarray(x)


def _compute_float(dtype: np.dtype) -> np.dtype:
    """bf16 goes through float32 for ufuncs ml_dtypes lacks or runs slowly."""
    return np.dtype(np.float32) if dtype == _BF16 else dtype


class NumpyOps(Fused):
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
        return np.reshape(_arr(x), tuple(shape))

    @staticmethod
    def concatenate(xs, axis=0):
        return np.concatenate([_arr(x) for x in xs], axis=axis)

    @staticmethod
    def stack(xs):
        return np.stack([_arr(x) for x in xs])

    @staticmethod
    def pad(x, after):
        x = _arr(x)
        out = np.zeros(x.shape[0] + after, x.dtype)
        out[: x.shape[0]] = x
        return out

    @staticmethod
    def transpose(x):
        return np.transpose(_arr(x))  # a view: BLAS reads it transposed, no copy

    # -- elementwise --------------------------------------------------------
    @staticmethod
    def abs(x):
        return np.asarray(np.abs(_arr(x)))

    @staticmethod
    def sign(x):
        x = _arr(x)
        if x.dtype in _KERNEL_FLOATS:
            return K.sign_into(np.ascontiguousarray(x).reshape(-1), np.empty(x.size, x.dtype)).reshape(x.shape)
        s = np.asarray(np.sign(x))
        if is_float(x.dtype):
            # sign(-0.0) is -0.0 in JAX (NumPy gives +0.0): keep zeros as they are
            np.copyto(s, x, where=(x == 0))
        return s

    @staticmethod
    def sqrt(x):
        return np.asarray(np.sqrt(_arr(x)))

    @staticmethod
    def floor(x):
        return np.asarray(np.floor(_arr(x)))

    @staticmethod
    def maximum(a, b):
        return np.asarray(np.maximum(a, b))

    @staticmethod
    def minimum(a, b):
        return np.asarray(np.minimum(a, b))

    @staticmethod
    def where(cond, a, b):
        if (isinstance(cond, np.ndarray) and isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                and cond.dtype == np.bool_ and a.dtype == b.dtype and a.dtype.itemsize in (2, 4, 8)
                and cond.shape == a.shape == b.shape and a.size >= _SELECT_MIN):
            u = _UINT[a.dtype.itemsize]
            flat = lambda v: np.ascontiguousarray(v).reshape(-1)
            out = np.empty(a.shape, a.dtype)
            K.select(flat(cond), flat(a).view(u), flat(b).view(u), out.reshape(-1).view(u))
            return out
        return np.asarray(np.where(cond, a, b))

    @staticmethod
    def isfinite(x):
        return np.asarray(np.isfinite(_arr(x)))

    @staticmethod
    def frexp(x):
        x = _arr(x)
        c = _compute_float(x.dtype)
        m, e = np.frexp(x.astype(c, copy=False))
        return np.asarray(m.astype(x.dtype, copy=False)), np.asarray(e.astype(np.int32, copy=False))

    @staticmethod
    def ldexp(m, e):
        m = _arr(m)
        c = _compute_float(m.dtype)
        out = np.ldexp(m.astype(c, copy=False), _arr(e).astype(np.int32, copy=False))
        return np.asarray(out.astype(m.dtype, copy=False))

    @staticmethod
    def astype(x, dtype):
        x = _arr(x)
        dtype = np.dtype(dtype)
        if x.dtype == dtype:
            return x
        if is_float(x.dtype) and np.issubdtype(dtype, np.integer):
            return _saturating_cast(x, dtype)
        if x.dtype == np.float32 and dtype in _NARROW:
            return _NARROW[dtype][0](np.ascontiguousarray(x).reshape(-1),
                                     np.empty(x.size, np.uint16)).view(dtype).reshape(x.shape)
        if x.dtype in _NARROW and dtype.kind == "f" and dtype.itemsize >= 4:
            wide = _widen(x)
            return wide if dtype == np.float32 else wide.astype(dtype)
        return np.asarray(x.astype(dtype))

    @staticmethod
    def bitcast(x, dtype):
        x = _arr(x)
        dtype = np.dtype(dtype)
        if dtype.itemsize != x.dtype.itemsize:
            raise ValueError(f"bitcast: {x.dtype} and {dtype} differ in width")
        return x.view(dtype)

    # -- reductions ---------------------------------------------------------
    @staticmethod
    def sum(x, axis=None):
        return _halving_sum(_arr(x), axis)

    @staticmethod
    def max(x, axis=None):
        x = _arr(x)
        return np.asarray(np.max(x, axis=axis))

    # -- linear algebra -----------------------------------------------------
    @staticmethod
    def matmul(a, b):
        a, b = _arr(a), _arr(b)
        out = F.thin_matmul(a, b) if a.dtype in _KERNEL_FLOATS else None  # rank-r projections
        return np.asarray(np.matmul(a, b)) if out is None else out

    # -- selection ----------------------------------------------------------
    @staticmethod
    def top_k(x, k):
        x = _arr(x)
        if x.ndim != 1:
            raise ValueError(f"top_k: expects a 1-D array, got shape {x.shape}")
        if not (isinstance(k, (int, np.integer)) and 0 < k <= x.size):
            raise ValueError(f"top_k: need 0 < k <= {x.size}, got {k!r}")
        if is_float(x.dtype):
            idx = K.top_k_indices(np.ascontiguousarray(x), int(k))
        elif np.issubdtype(x.dtype, np.integer):
            idx = K.top_k_indices_int(np.ascontiguousarray(x), int(k))
        else:
            raise ValueError(f"top_k: unsupported dtype {x.dtype}")
        return x[idx], idx

    @staticmethod
    def gather(x, idx):
        x = _arr(x)
        idx = _arr(idx)
        if x.ndim != 1:
            raise ValueError(f"gather: expects a 1-D array, got shape {x.shape}")
        flat_idx = np.ascontiguousarray(idx.reshape(-1))
        if not np.issubdtype(flat_idx.dtype, np.integer):
            raise ValueError(f"gather: indices must be integers, got {idx.dtype}")
        bits = np.ascontiguousarray(x).view(_UINT[x.dtype.itemsize])
        return K.gather_bits(bits, flat_idx).view(x.dtype).reshape(idx.shape)

    @staticmethod
    def scatter_add(size, idx, vals):
        idx = np.ascontiguousarray(_arr(idx).reshape(-1))
        vals = np.ascontiguousarray(_arr(vals).reshape(-1))
        if idx.size != vals.size:
            raise ValueError(f"scatter_add: {idx.size} indices for {vals.size} values")
        out = buffers.zeros(int(size), vals.dtype)
        if vals.dtype in (np.float16, _BF16):
            # per-add rounding to the narrow type, in index order (as XLA)
            ok = (idx >= 0) & (idx < size)
            np.add.at(out, idx[ok], vals[ok])
            return out
        return K.scatter_add_into(out, idx, vals)

    @staticmethod
    def nonzero(mask, capacity):
        mask = _arr(mask)
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
    def uniform(key, shape):
        return threefry.uniform(key, shape)  # (bits >> 9 | 0x3F800000) - 1, fused

    # -- bit packing ----------------------------------------------------------
    @staticmethod
    def pack_bits(codes, bits):
        check_bits(bits)
        codes = np.ascontiguousarray(_arr(codes))
        if codes.ndim != 1:
            raise ValueError(f"pack_bits: codes must be 1-D, got shape {codes.shape}")
        if codes.dtype != np.uint32:
            codes = codes.astype(np.uint32)
        return K.pack_bits(codes, int(bits))

    @staticmethod
    def unpack_bits(words, bits, count):
        check_bits(bits)
        words = np.ascontiguousarray(_arr(words), dtype=np.uint32)
        per = 32 // bits
        if not 0 <= count <= words.size * per:
            raise ValueError(f"unpack_bits: {count} codes do not fit in {words.size} words of {per}")
        return K.unpack_bits(words, int(bits), int(count))

    # -- fused (compressors.ops.Fused): one-pass Numba kernels -----------------
    def bucket_min_max(self, x, bucket):
        x = _vector(x, "bucket_min_max")
        if x.dtype not in _KERNEL_FLOATS or x.size == 0:
            return Fused.bucket_min_max(self, x, bucket)
        return F.bucket_min_max(np.ascontiguousarray(x), int(bucket))

    def quantize_pack(self, x, offset, inv_scale, bucket, top, bits, key):
        x = _vector(x, "quantize_pack")
        check_bits(bits)
        if x.dtype not in _KERNEL_FLOATS:
            return Fused.quantize_pack(self, x, offset, inv_scale, bucket, top, bits, key)
        c = lambda v: np.ascontiguousarray(_arr(v), dtype=x.dtype)
        return F.quantize_pack(np.ascontiguousarray(x), c(offset), c(inv_scale), int(bucket), top, int(bits),
                               threefry.check_key(key))

    def dequantize(self, words, bits, count, offset, scale, bucket):
        offset = _arr(offset)
        check_bits(bits)
        if offset.dtype not in _KERNEL_FLOATS:
            return Fused.dequantize(self, words, bits, count, offset, scale, bucket)
        words = np.ascontiguousarray(_arr(words), dtype=np.uint32)
        if not 0 <= count <= words.size * (32 // bits):
            raise ValueError(f"dequantize: {count} codes do not fit in {words.size} words of {32 // bits}")
        return F.dequantize(words, int(bits), int(count), np.ascontiguousarray(offset),
                            np.ascontiguousarray(_arr(scale), dtype=offset.dtype), int(bucket))

    def top_k_abs(self, x, k):
        x = _vector(x, "top_k_abs")
        if not (isinstance(k, (int, np.integer)) and 0 < k <= x.size):
            raise ValueError(f"top_k_abs: need 0 < k <= {x.size}, got {k!r}")
        idx = F.top_k_abs(np.ascontiguousarray(x), int(k)) if x.dtype in _KERNEL_FLOATS else None
        return Fused.top_k_abs(self, x, k) if idx is None else idx

    def sum_abs(self, x):
        x = _vector(x, "sum_abs")
        if x.dtype not in _KERNEL_FLOATS or x.size < 2 * _SUM_ROW:
            return Fused.sum_abs(self, x)
        return _kernel_sum(x, True)

    def pack_signs(self, x):
        x = _vector(x, "pack_signs")
        if x.dtype not in _KERNEL_FLOATS:
            return Fused.pack_signs(self, x)
        return F.pack_signs(np.ascontiguousarray(x))

    def unpack_signs(self, words, count, pos, neg):
        pos, neg = _arr(pos), _arr(neg)
        if pos.dtype != neg.dtype or pos.shape != () or neg.shape != ():
            raise ValueError(f"unpack_signs: pos and neg must be 0-d arrays of one dtype, "
                             f"got {pos.dtype}{list(pos.shape)} and {neg.dtype}{list(neg.shape)}")
        words = np.ascontiguousarray(_arr(words), dtype=np.uint32)
        if not 0 <= count <= words.size * 32:
            raise ValueError(f"unpack_signs: {count} bits do not fit in {words.size} words")
        return F.unpack_signs(words, int(count), pos, neg)

    def add(self, a, b):
        a, b = _arr(a), _arr(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            raise ValueError(f"add: needs one shape and dtype, got {a.dtype}{list(a.shape)} "
                             f"and {b.dtype}{list(b.shape)}")
        if a.dtype not in _KERNEL_FLOATS or a.size < F.ROWS_PARALLEL_MIN:
            return Fused.add(self, a, b)
        return F.add(np.ascontiguousarray(a), np.ascontiguousarray(b))

    def matmul_nt(self, a, b):
        a, b = _arr(a), _arr(b)
        if not _low_rank_args(a, b, None):
            return Fused.matmul_nt(self, a, b)
        return F.low_rank(None, np.ascontiguousarray(a), np.ascontiguousarray(b))

    def sub_matmul_nt(self, c, a, b):
        c, a, b = _arr(c), _arr(a), _arr(b)
        if not _low_rank_args(a, b, c):
            return Fused.sub_matmul_nt(self, c, a, b)
        return F.low_rank(np.ascontiguousarray(c), np.ascontiguousarray(a), np.ascontiguousarray(b))


_KERNEL_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))  # the Numba kernels' dtypes
LOW_RANK_MAX = 32  # widest factors the row kernel takes (BLAS is faster beyond)


def _low_rank_args(a, b, c) -> bool:
    """Whether the low-rank kernel applies (else the composition runs, and
    reports any shape error itself)."""
    ok = a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[1] and 1 <= a.shape[1] <= LOW_RANK_MAX \
        and a.dtype in _KERNEL_FLOATS and a.dtype == b.dtype
    if c is not None:
        ok = ok and c.shape == (a.shape[0], b.shape[0]) and c.dtype == a.dtype
    return ok


def _vector(x, op: str) -> np.ndarray:
    x = _arr(x)
    if x.ndim != 1:
        raise ValueError(f"{op}: expects a 1-D array, got shape {x.shape}")
    return x


_NARROW = {np.dtype(np.float16): (K.f32_to_f16, K.f16_to_f32), _BF16: (K.f32_to_bf16, K.bf16_to_f32)}


def _widen(x: np.ndarray) -> np.ndarray:
    """float16 / bf16 -> float32 (exact) with a Numba kernel."""
    bits = np.ascontiguousarray(x).reshape(-1).view(np.uint16)
    return _NARROW[x.dtype][1](bits, np.empty(x.size, np.float32)).reshape(x.shape)


def _saturating_cast(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Float -> integer: truncate toward zero, saturate, NaN -> 0 (one Numba pass).

    The bounds min and max + 1 of every integer type are powers of two, so
    they are exact in float32/float64 and the comparisons are exact."""
    if x.dtype not in (np.float32, np.float64):
        x = _widen(x)  # float16 / bf16 widen exactly
    info = np.iinfo(dtype)
    out = np.empty(x.shape, dtype)
    K.saturating_cast(x.reshape(-1), out.reshape(-1), x.dtype.type(info.min),
                      x.dtype.type(float(info.max) + 1.0), dtype.type(info.min), dtype.type(info.max))
    return out


_SELECT_MIN = 1 << 14  # below this np.where is as fast as the kernel call
_SUM_ROW = 1024  # row length of the one-pass kernel (a power of two)


def _kernel_sum(x: np.ndarray, absolute: bool) -> np.ndarray:
    """The one-pass halving-sum kernel (of |x| if ``absolute``), threaded for long vectors."""
    parts = _SUM_PARTS if x.size >= _SUM_PARALLEL_MIN else 1
    return np.asarray(K.halving_sum(np.ascontiguousarray(x), _SUM_ROW, parts, absolute), dtype=x.dtype)


_SUM_PARTS = 8  # subtrees summed in parallel (a power of two; the bits do not depend on it)
_SUM_PARALLEL_MIN = 1 << 20


def _halving_sum(x: np.ndarray, axis) -> np.ndarray:
    """Sum with the halving order of ``Ops.sum``, without materialising the
    zero padding: the first level adds the upper part onto a copy of the
    lower one and adds +0.0 to the lanes that have no partner (so -0.0
    becomes +0.0 exactly as ``x + 0`` does in the padded version)."""
    if axis is None or (x.ndim == 1 and axis in (0, -1)):
        x = x.reshape(-1)
        axis = 0
        if x.size >= 2 * _SUM_ROW and x.dtype in _KERNEL_FLOATS:
            return _kernel_sum(x, False)
    x = np.moveaxis(x, axis, -1)
    m = x.shape[-1]
    if m == 0:
        return np.zeros(x.shape[:-1], x.dtype)
    if m == 1:
        return np.array(x[..., 0])
    p = next_pow2(m)
    h = p // 2
    s = x[..., :h].copy()
    s[..., : m - h] += x[..., h:m]
    if m - h < h:
        s[..., m - h :] += np.zeros((), x.dtype)
    while h > 1:
        h //= 2
        s[..., :h] += s[..., h : 2 * h]
    return np.array(s[..., 0])


OPS = NumpyOps()
