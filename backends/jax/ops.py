"""JAX binding of the ops namespace (default backend; jit/vmap/grad-safe)."""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.random import threefry2x32_p

from compressors.fused import Fused
from backends.jax import host_kernels as host, host_lowrank, host_quant, host_topk
from backends.common import UNIFORM_ONE_BITS, is_float, check_bits, int_bounds, next_pow2


HOST_TOP_K_MIN = 1 << 15  # below this lax.top_k is as fast as a host callback
HOST_TOP_K_ABS_MIN = 1  # the custom call enters no Python: at any size it beats top_k + scatter + nonzero


def _host_rows(select, x, k):
    """int32 [..., k]: ``select(row, k)`` of each row (last axis) of x, on the host."""
    x = np.asarray(x)
    rows = x.reshape(-1, x.shape[-1])
    out = np.stack([select(np.ascontiguousarray(r), k) for r in rows]) if len(rows) else \
        np.zeros((0, k), np.int32)
    return out.astype(np.int32).reshape(x.shape[:-1] + (k,))


def _host_top_k(x, k):
    """Indices of the k largest of each row (last axis), on the host (Numba)."""
    from backends.numpy.topk import top_k_indices

    return _host_rows(top_k_indices, x, k)


class JaxOps(Fused):
    name = "jax"

    asarray = staticmethod(lambda x, dtype=None: jnp.asarray(x, dtype=dtype))
    zeros = staticmethod(lambda shape, dtype: jnp.zeros(tuple(shape), dtype))
    full = staticmethod(lambda shape, value, dtype: jnp.full(tuple(shape), value, dtype))
    arange = staticmethod(lambda n: jnp.arange(n, dtype=jnp.int32))
    reshape = staticmethod(lambda x, shape: jnp.reshape(x, tuple(shape)))
    concatenate = staticmethod(lambda xs, axis=0: jnp.concatenate(list(xs), axis=axis))
    stack = staticmethod(lambda xs: jnp.stack(list(xs)))
    pad = staticmethod(lambda x, after: jnp.pad(x, (0, after)))
    transpose = staticmethod(lambda x: jnp.transpose(x))
    abs = staticmethod(jnp.abs)
    sign = staticmethod(jnp.sign)
    sqrt = staticmethod(jnp.sqrt)
    floor = staticmethod(jnp.floor)
    maximum = staticmethod(jnp.maximum)
    minimum = staticmethod(jnp.minimum)
    where = staticmethod(jnp.where)
    isfinite = staticmethod(jnp.isfinite)
    matmul = staticmethod(jnp.matmul)

    @staticmethod
    def frexp(x):
        m, e = jnp.frexp(x)
        return m, e.astype(jnp.int32)

    @staticmethod
    def ldexp(m, e):
        return jnp.ldexp(m, e.astype(jnp.int32))

    @staticmethod
    def astype(x, dtype):
        dtype = np.dtype(dtype)
        if ((x.dtype == np.float32 and dtype in host.NARROWS) or (x.dtype in host.NARROWS and dtype == np.float32)) \
                and host.usable(x.size):
            return host.cast16(x, dtype)  # XLA:CPU's half casts are scalar loops
        if is_float(x.dtype) and np.issubdtype(dtype, np.integer):
            lo, hi = int_bounds(dtype)
            t = jnp.trunc(x)
            safe = jnp.where((t >= lo) & (t <= hi), t, 0)
            out = safe.astype(dtype)
            out = jnp.where(t > hi, jnp.array(np.iinfo(dtype).max, dtype), out)
            return jnp.where(t < lo, jnp.array(np.iinfo(dtype).min, dtype), out)
        return x.astype(dtype)

    @staticmethod
    def bitcast(x, dtype):
        return lax.bitcast_convert_type(x, np.dtype(dtype))

    @staticmethod
    def sum(x, axis=None):
        if (axis is None or x.ndim == 1) and host.usable(x.size, x):
            return host.halving_sum(jnp.reshape(x, (-1,)), False)  # one pass at memory speed, the same bits
        if axis is None:
            x, axis = jnp.reshape(x, (-1,)), 0
        x = jnp.moveaxis(x, axis, -1)
        m = x.shape[-1]
        if m == 0:
            return jnp.zeros(x.shape[:-1], x.dtype)
        p = next_pow2(m)
        if p != m:
            x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, p - m)])
        while p > 1:
            p //= 2
            x = x[..., :p] + x[..., p:]
        return x[..., 0]

    @staticmethod
    def max(x, axis=None):
        m = jnp.max(x, axis=axis)
        if not jnp.issubdtype(x.dtype, jnp.floating):
            return m
        # XLA:CPU's vectorized max reduction drops NaN (jnp.max of 4099 normals
        # and one NaN is finite); the contract says NaN
        return jnp.where(jnp.any(jnp.isnan(x), axis=axis), jnp.asarray(jnp.nan, x.dtype), m)

    @staticmethod
    def top_k(x, k):
        if x.dtype == jnp.float32 and x.shape[-1] >= HOST_TOP_K_MIN and jax.default_backend() == "cpu":
            # lax.top_k costs ~10 ns/element on CPU; the Numba sampled-threshold
            # select of the NumPy backend gives the same indices far faster
            idx = jax.pure_callback(functools.partial(_host_top_k, k=k),
                                    jax.ShapeDtypeStruct(x.shape[:-1] + (k,), jnp.int32), x,
                                    vmap_method="expand_dims")
            return jnp.take_along_axis(x, idx, axis=-1), idx
        v, i = lax.top_k(x, k)
        return v, i.astype(jnp.int32)

    def top_k_abs(self, x, k):
        if x.dtype in (jnp.float32, jnp.float64) and x.size >= HOST_TOP_K_ABS_MIN and 0 < k <= x.size \
                and jax.default_backend() == "cpu":
            # the composition's sort-based top_k and index sort cost far more on
            # CPU than a one-pass selection of the same indices, run as a custom
            # call (a pure_callback would copy x and enter Python on every call);
            # on small tensors it is one kernel instead of the composition's ~8
            return host_topk.top_k_abs(x, k)
        return Fused.top_k_abs(self, x, k)

    # -- fused ops: the NumPy binding's kernels as custom calls on the CPU (backends.jax.host_kernels)
    def bucket_min_max(self, x, bucket):
        if x.ndim == 1 and host.usable(x.size, x):
            return host.bucket_min_max(x, int(bucket))
        return Fused.bucket_min_max(self, x, bucket)

    def quantize_pack(self, x, offset, inv_scale, bucket, top, bits, key, signed=False):
        check_bits(bits)
        if x.ndim == 1 and float(top) == int(top) and host.usable(x.size, x) and offset.dtype == x.dtype \
                and inv_scale.dtype == x.dtype and key.dtype == jnp.uint32 and key.shape == (2,):
            return host.quantize_pack(x, offset, inv_scale, int(bucket), top, int(bits), key, signed)
        return Fused.quantize_pack(self, x, offset, inv_scale, bucket, top, bits, key, signed)

    def minmax_quantize_pack(self, x, bucket, top, bits, key):
        check_bits(bits)
        if host_quant.usable(x, bucket, top, bits, key):
            return host_quant.minmax_quantize_pack(x, int(bucket), top, int(bits), key)
        return Fused.minmax_quantize_pack(self, x, bucket, top, bits, key)

    def dequantize(self, words, bits, count, offset, scale, bucket, signed=False):
        check_bits(bits)
        if host.usable(count, offset, scale) and offset.dtype == scale.dtype \
                and words.dtype == jnp.uint32 and 0 <= count <= words.size * (32 // bits):
            return host.dequantize(words, int(bits), int(count), offset, scale, int(bucket), signed)
        return Fused.dequantize(self, words, bits, count, offset, scale, bucket, signed)

    def bucket_norm(self, x, bucket):
        b = bucket if 0 < bucket < x.size else x.size
        if x.ndim == 1 and 0 < b <= host.fused_norm.ROW_MAX and host.usable(x.size, x):
            return host.bucket_norm(x, int(bucket))
        return Fused.bucket_norm(self, x, bucket)

    def sum_abs(self, x, scale=1.0):
        if x.ndim == 1 and host.usable(x.size, x):
            return host.halving_sum(x, True, float(scale))
        return Fused.sum_abs(self, x, scale)

    def matmul_nt(self, a, b):
        if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[1] \
                and host_lowrank.usable(a.shape[0] * b.shape[0], a, b, max_rank=host_lowrank.LOW_RANK_MAX):
            return host_lowrank.matmul_nt(a, b)
        return Fused.matmul_nt(self, a, b)

    def sub_matmul_nt(self, c, a, b):
        if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[1] and c.shape == (a.shape[0], b.shape[0]) \
                and host_lowrank.usable(c.size, c, a, b, max_rank=host_lowrank.LOW_RANK_MAX):
            return host_lowrank.sub_matmul_nt(c, a, b)
        return Fused.sub_matmul_nt(self, c, a, b)

    def matmul_tn(self, a, b):
        if a.ndim == 2 and b.ndim == 2 and a.shape[0] == b.shape[0] \
                and host_lowrank.usable(a.size, a, b, max_rank=host_lowrank.THIN_MAX):
            return host_lowrank.matmul_tn(a, b)
        return Fused.matmul_tn(self, a, b)

    def sum_abs_pack(self, x, scale=1.0):
        if x.ndim == 1 and host.usable(x.size, x):
            return host.sum_abs_pack(x, float(scale))
        return Fused.sum_abs_pack(self, x, scale)

    def sign_split_sums(self, x, scale):
        if x.ndim == 1 and host.usable(x.size, x):
            return host.sign_split_sums(x, float(scale))
        return Fused.sign_split_sums(self, x, scale)

    def sign_split_pack(self, x, scale):
        if x.ndim == 1 and host.usable(x.size, x):
            return host.sign_split_pack(x, float(scale))
        return Fused.sign_split_pack(self, x, scale)

    def pack_signs(self, x):
        if x.ndim == 1 and host.usable(x.size, x):
            return host.pack_signs(x)
        return Fused.pack_signs(self, x)

    def unpack_signs(self, words, count, pos, neg):
        pos, neg = jnp.asarray(pos), jnp.asarray(neg)
        if pos.shape == () and neg.shape == () and pos.dtype == neg.dtype \
                and host.usable(count, pos, neg) and words.dtype == jnp.uint32 and count <= words.size * 32:
            return host.unpack_signs(words, int(count), pos, neg)
        return Fused.unpack_signs(self, words, count, pos, neg)

    def natural_pack(self, x, key):
        if x.ndim == 1 and host.usable(x.size, x) and key.dtype == jnp.uint32 and key.shape == (2,):
            return host.natural_pack(x, key)
        return Fused.natural_pack(self, x, key)

    def natural_unpack(self, signs, exps, count):
        if host.usable(count) and signs.dtype == jnp.uint32 and exps.dtype == jnp.uint32 \
                and 0 <= count <= signs.size * 32 and count <= exps.size * 4:
            return host.natural_unpack(signs, exps, int(count))
        return Fused.natural_unpack(self, signs, exps, count)

    @staticmethod
    def gather(x, idx):
        # jnp.take wraps negative indices; the namespace reads them as 0 (every index of an empty x)
        if x.size == 0:
            return jnp.zeros(jnp.shape(idx), x.dtype)
        return jnp.take(x, jnp.where(idx < 0, x.size, idx), mode="fill", fill_value=0)

    @staticmethod
    def scatter_add(size, idx, vals):
        # .at[] wraps negative indices; the namespace drops them
        return jnp.zeros((size,), vals.dtype).at[jnp.where(idx < 0, size, idx)].add(vals, mode="drop")

    @staticmethod
    def clear_at(x, idx):
        # one scatter of the k entries into x (XLA updates x in place where it is dead);
        # the composition's x_i - (0 + x_i): NaN for +-inf and NaN (v - v), the zero of x_i's
        # sign for +-0 (v * 0: also where XLA:CPU reads a subnormal as zero, as the composition does)
        # an x of several axes is written at its unravelled positions, not through a flat
        # reshape: XLA copies all of x around a scatter into a reshaped (donated) buffer
        idx = jnp.asarray(idx).reshape(-1)
        if x.ndim == 0 or x.size == 0:  # (no axis to unravel onto; nothing to clear)
            return x if x.size == 0 else JaxOps.clear_at(x.reshape(1), idx).reshape(())
        safe = jnp.where((idx < 0) | (idx >= x.size), x.size, idx)
        at, rest = [], safe  # row-major coordinates; x.size lands past axis 0 (dropped)
        for d in x.shape[:0:-1]:
            at.insert(0, rest % d)
            rest = rest // d
        at = tuple([rest] + at) if x.ndim > 1 else safe
        v = x.at[at].get(mode="fill", fill_value=0)
        return x.at[at].set(jnp.where(v == 0, v * 0, v - v), mode="drop")

    @staticmethod
    def nonzero(mask, capacity):
        return jnp.nonzero(mask, size=capacity, fill_value=mask.size)[0].astype(jnp.int32)

    @staticmethod
    def key(seed):
        return jax.random.PRNGKey(seed)

    @staticmethod
    def fold_in(key, data):
        return jax.random.fold_in(key, data)

    @staticmethod
    def random_bits(key, shape):
        return jax.random.bits(key, tuple(shape), jnp.uint32)

    @staticmethod
    def random_words(key, shape):
        shape = tuple(int(s) for s in shape)
        n = math.prod(shape)
        blocks = jnp.arange(-(-n // 2), dtype=jnp.uint32)
        key = jnp.asarray(key, jnp.uint32)
        y0, y1 = threefry2x32_p.bind(key[0], key[1], jnp.zeros_like(blocks), blocks)
        return jnp.stack([y0, y1], axis=1).reshape(-1)[:n].reshape(shape)

    @staticmethod
    def uniform(key, shape):
        bits = jax.random.bits(key, tuple(shape), jnp.uint32)
        one = lax.bitcast_convert_type((bits >> 9) | UNIFORM_ONE_BITS, jnp.float32)
        return one - jnp.float32(1.0)

    @staticmethod
    def pack_bits(codes, bits):
        check_bits(bits)
        per = 32 // bits
        n = codes.shape[0]
        nw = -(-n // per)
        c = jnp.pad(codes.astype(jnp.uint32), (0, nw * per - n)).reshape(nw, per)
        shifts = (jnp.arange(per, dtype=jnp.uint32) * bits)
        return jnp.sum(c << shifts, axis=1, dtype=jnp.uint32)

    @staticmethod
    def unpack_bits(words, bits, count):
        check_bits(bits)
        per = 32 // bits
        mask = jnp.uint32(0xFFFFFFFF if bits == 32 else (1 << bits) - 1)
        shifts = (jnp.arange(per, dtype=jnp.uint32) * bits)
        return ((words[:, None] >> shifts) & mask).reshape(-1)[:count]


OPS = JaxOps()
