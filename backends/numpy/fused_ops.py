"""The fused ops (``compressors.fused.Fused``) of the NumPy binding: each runs
its one-pass Numba kernel (``fused_minmax``, ``fused_norm``, ``fused_quant``, ``fused_topk``,
``sums``, ``fused_sign``, ``fused_natural``, ``fused_add``, ``fused_lowrank``) where the kernel
takes the arguments, and the reference composition otherwise.
:class:`backends.numpy.ops.NumpyOps` inherits them.
"""
from __future__ import annotations

import numpy as np

from backends.common import check_bits
from backends.numpy import buffers, fused_add, fused_lowrank, fused_minmax, fused_minmax_quant, fused_natural, \
    fused_norm, fused_quant, fused_sign, fused_topk, indexing, threefry
from backends.numpy.arrays import KERNEL_FLOATS, as_array, vector
from backends.numpy.blocks import ROWS_PARALLEL_MIN
from backends.numpy.sign_sums import abs_sum_pack, split_sums
from backends.numpy.sums import SUM_ROW, kernel_sum
from compressors.fused import Fused


class NumpyFused(Fused):
    """``Fused`` with the NumPy binding's one-pass kernels."""

    def bucket_min_max(self, x, bucket):
        x = vector(x, "bucket_min_max")
        if x.dtype not in KERNEL_FLOATS or x.size == 0:
            return Fused.bucket_min_max(self, x, bucket)
        return fused_minmax.bucket_min_max(np.ascontiguousarray(x), int(bucket))

    def quantize_pack(self, x, offset, inv_scale, bucket, top, bits, key, signed=False):
        x = vector(x, "quantize_pack")
        check_bits(bits)
        if x.dtype not in KERNEL_FLOATS:
            return Fused.quantize_pack(self, x, offset, inv_scale, bucket, top, bits, key, signed)
        c = lambda v: np.ascontiguousarray(as_array(v), dtype=x.dtype)
        return fused_quant.quantize_pack(np.ascontiguousarray(x), c(offset), c(inv_scale), int(bucket), top,
                                         int(bits), threefry.check_key(key), signed)

    def minmax_quantize_pack(self, x, bucket, top, bits, key):
        x = vector(x, "minmax_quantize_pack")
        check_bits(bits)
        if not fused_minmax_quant.applies(x, int(bucket), int(bits)):
            return Fused.minmax_quantize_pack(self, x, bucket, top, bits, key)
        return fused_minmax_quant.minmax_quantize_pack(np.ascontiguousarray(x), int(bucket), float(top), int(bits),
                                                       threefry.check_key(key))

    def dequantize(self, words, bits, count, offset, scale, bucket, signed=False):
        offset = as_array(offset)
        check_bits(bits)
        if offset.dtype not in KERNEL_FLOATS:
            return Fused.dequantize(self, words, bits, count, offset, scale, bucket, signed)
        words = np.ascontiguousarray(as_array(words), dtype=np.uint32)
        if not 0 <= count <= words.size * (32 // bits):
            raise ValueError(f"dequantize: {count} codes do not fit in {words.size} words of {32 // bits}")
        return fused_quant.dequantize(words, int(bits), int(count), np.ascontiguousarray(offset),
                                      np.ascontiguousarray(as_array(scale), dtype=offset.dtype), int(bucket), signed)

    def bucket_norm(self, x, bucket):
        x = vector(x, "bucket_norm")
        if x.dtype not in KERNEL_FLOATS or not x.size:
            return Fused.bucket_norm(self, x, bucket)
        if not fused_norm.applies(x, int(bucket)):
            out = fused_norm.long_buckets(np.ascontiguousarray(x), int(bucket))
            return Fused.bucket_norm(self, x, bucket) if out is None else out
        return fused_norm.bucket_norm(np.ascontiguousarray(x), int(bucket))

    def top_k_abs(self, x, k):
        x = vector(x, "top_k_abs")
        if not (isinstance(k, (int, np.integer)) and 0 < k <= x.size):
            raise ValueError(f"top_k_abs: need 0 < k <= {x.size}, got {k!r}")
        idx = fused_topk.top_k_abs(np.ascontiguousarray(x), int(k)) if x.dtype in KERNEL_FLOATS else None
        return Fused.top_k_abs(self, x, k) if idx is None else idx

    def clear_at(self, x, idx):
        # a copy of x and k writes (on its flat view), not a dense scatter and a dense subtraction
        x = as_array(x)
        idx = np.asarray(as_array(idx)).reshape(-1)
        if not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"clear_at: indices must be integers, got {idx.dtype}")
        if x.dtype in KERNEL_FLOATS and x.flags.c_contiguous:
            out = buffers.empty(x.shape, x.dtype)
            indexing.clear_at(x.reshape(-1), np.ascontiguousarray(idx), out.reshape(-1))
            return out
        out = np.array(x, copy=True, order="C")
        flat = out.reshape(-1)
        at = idx[(idx >= 0) & (idx < x.size)]
        v = flat[at]
        with np.errstate(invalid="ignore"):  # inf - inf is the NaN the composition gives
            flat[at] = np.where(v == 0, v, v - v)
        return out

    def sum_abs(self, x, scale=1.0):
        x = vector(x, "sum_abs")
        if x.dtype not in KERNEL_FLOATS or x.size < 2 * SUM_ROW:
            return Fused.sum_abs(self, x, scale)
        return kernel_sum(x, True, scale)

    def sum_abs_pack(self, x, scale=1.0):
        x = vector(x, "sum_abs_pack")
        if x.dtype not in KERNEL_FLOATS or x.size < 2 * SUM_ROW:
            return Fused.sum_abs_pack(self, x, scale)
        return abs_sum_pack(x, scale)

    def sign_split_sums(self, x, scale):
        x = vector(x, "sign_split_sums")
        if x.dtype not in KERNEL_FLOATS or x.size < 2 * SUM_ROW:
            return Fused.sign_split_sums(self, x, scale)
        return split_sums(x, scale)

    def sign_split_pack(self, x, scale):
        x = vector(x, "sign_split_pack")
        if x.dtype not in KERNEL_FLOATS or x.size < 2 * SUM_ROW:
            return Fused.sign_split_pack(self, x, scale)
        return split_sums(x, scale, signs=True)

    def pack_signs(self, x):
        x = vector(x, "pack_signs")
        if x.dtype not in KERNEL_FLOATS:
            return Fused.pack_signs(self, x)
        return fused_sign.pack_signs(np.ascontiguousarray(x))

    def unpack_signs(self, words, count, pos, neg):
        pos, neg = as_array(pos), as_array(neg)
        if pos.dtype != neg.dtype or pos.shape != () or neg.shape != ():
            raise ValueError(f"unpack_signs: pos and neg must be 0-d arrays of one dtype, "
                             f"got {pos.dtype}{list(pos.shape)} and {neg.dtype}{list(neg.shape)}")
        words = np.ascontiguousarray(as_array(words), dtype=np.uint32)
        if not 0 <= count <= words.size * 32:
            raise ValueError(f"unpack_signs: {count} bits do not fit in {words.size} words")
        return fused_sign.unpack_signs(words, int(count), pos, neg)

    def natural_pack(self, x, key):
        x = vector(x, "natural_pack")
        if x.dtype not in KERNEL_FLOATS:
            return Fused.natural_pack(self, x, key)
        return fused_natural.natural_pack(np.ascontiguousarray(x), threefry.check_key(key))

    def natural_unpack(self, signs, exps, count):
        signs = np.ascontiguousarray(as_array(signs), dtype=np.uint32)
        exps = np.ascontiguousarray(as_array(exps), dtype=np.uint32)
        if not (0 <= count <= signs.size * 32 and count <= exps.size * 4):
            raise ValueError(f"natural_unpack: {count} entries do not fit in {signs.size} sign words "
                             f"and {exps.size} exponent words")
        return fused_natural.natural_unpack(signs, exps, int(count))

    def add(self, a, b):
        a, b = as_array(a), as_array(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            raise ValueError(f"add: needs one shape and dtype, got {a.dtype}{list(a.shape)} "
                             f"and {b.dtype}{list(b.shape)}")
        if a.dtype not in KERNEL_FLOATS or a.size < ROWS_PARALLEL_MIN:
            return Fused.add(self, a, b)
        return fused_add.add(np.ascontiguousarray(a), np.ascontiguousarray(b))

    def matmul_nt(self, a, b):
        a, b = as_array(a), as_array(b)
        if not fused_lowrank.low_rank_applies(a, b, None):
            return Fused.matmul_nt(self, a, b)
        return fused_lowrank.low_rank(None, np.ascontiguousarray(a), np.ascontiguousarray(b))

    def sub_matmul_nt(self, c, a, b):
        c, a, b = as_array(c), as_array(a), as_array(b)
        if not fused_lowrank.low_rank_applies(a, b, c):
            return Fused.sub_matmul_nt(self, c, a, b)
        return fused_lowrank.low_rank(np.ascontiguousarray(c), np.ascontiguousarray(a), np.ascontiguousarray(b))
