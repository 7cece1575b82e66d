"""JAX binding of the ops namespace (default backend; jit/vmap/grad-safe)."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from compressors.ops import Fused
from backends.common import UNIFORM_ONE_BITS, is_float, check_bits, int_bounds, next_pow2


HOST_TOP_K_MIN = 1 << 15  # below this lax.top_k is as fast as a host callback


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


def _host_top_k_abs(x, k):
    """NumPy's top_k_abs (the same indices as the reference composition) of
    each row (last axis), on the host; all rows (a vmap over workers) in one
    parallel kernel call (:func:`_rows_kernel`)."""
    from backends.numpy.ops import OPS

    x = np.asarray(x)
    rows = np.ascontiguousarray(x.reshape(-1, x.shape[-1]))
    got = _top_k_abs_rows(rows, k) if x.dtype in (np.float32, np.float64) else None
    if got is None:
        return _host_rows(OPS.top_k_abs, x, k)
    out, ok = got
    for i in np.flatnonzero(~ok):
        out[i] = OPS.top_k_abs(rows[i], k)
    return out.reshape(x.shape[:-1] + (k,))


@functools.lru_cache(maxsize=None)
def _rows_kernel():
    """The Numba kernel of :func:`_top_k_abs_rows` (compiled on first use).

    It is ``backends.numpy.fused_topk``'s selection (sampled threshold on
    magnitude keys, one collecting pass, radix selection of the survivors;
    exact for any sample) with a *stratified* sample: sample j is a hashed
    position inside the j-th of s equal strata rather than the stratum's
    first entry. A plain stride (n/s = 64 for a 784x256 layer) aliases with
    the tensor's rows (it reads only 4 of its 256 columns); when those
    columns are atypical (dead ReLU units, small deltas) the threshold
    misses, the survivors overflow or fall short, and the row drops to the
    reference composition (~20x slower). Rows run one per thread."""
    import numba

    from backends.numpy.fused_topk import collect, kth_largest
    from backends.numpy.topk import sampled_threshold

    @numba.njit(cache=True, nogil=True)
    def row(bits, k, mask, nbits, nsample, out):
        n = bits.size
        s = min(n, nsample)
        sample = np.empty(s, bits.dtype)
        for j in range(s):
            lo = (j * n) // s
            width = ((j + 1) * n) // s - lo
            sample[j] = bits[lo + (j * 2654435761) % width] & mask
        t, rank = sampled_threshold(sample, k, n)
        if rank < 0:
            return False
        cap = int(2.0 * n * (rank + 1) / s) + 1024 + 64
        gi = np.empty((1, cap + 1), np.int32)
        gk = np.empty((1, cap + 1), bits.dtype)
        ties = np.empty(k, np.int32)
        ng, ne = collect(bits, mask, t, 0, n, k, gi[0], gk[0], ties)
        if ng < 0:
            return False
        at = 0
        if ng >= k:
            counts = np.full(1, ng, np.int64)
            big = kth_largest(gk, counts, k, nbits)
            above = 0
            for j in range(ng):
                above += gk[0, j] > big
            equal = k - above  # keys == big to keep, lowest index first
            for j in range(ng):
                v = gk[0, j]
                if v > big or (v == big and equal > 0):
                    equal -= v == big
                    out[at] = gi[0, j]
                    at += 1
            return True
        need = k - ng  # every survivor, and this many keys == t, lowest index first
        if ne < need:
            return False
        a = 0
        b = 0
        while a < ng or (b < ne and need > 0):
            if b < ne and need > 0 and (a == ng or ties[b] < gi[0, a]):
                out[at] = ties[b]
                b += 1
                need -= 1
            else:
                out[at] = gi[0, a]
                a += 1
            at += 1
        return True

    @numba.njit(cache=True, parallel=True)
    def rows(bits, k, mask, nbits, nsample, out, ok):
        for i in numba.prange(bits.shape[0]):
            ok[i] = row(bits[i], k, mask, nbits, nsample, out[i])

    return rows


def _top_k_abs_rows(x, k):
    """(indices (rows, k), ok per row) of top_k_abs of every row of a
    C-ordered 2-D float array, or None where the sampled selection does not
    apply (a row with ok False needs the reference)."""
    from backends.numpy.fused_topk import TOPK_MIN, magnitude_keys, sample_size

    nrows, n = x.shape
    if n < TOPK_MIN or 4 * k > n:
        return None
    bits, mask, nbits = magnitude_keys(x)
    out = np.empty((nrows, k), np.int32)
    ok = np.empty(nrows, np.bool_)
    _rows_kernel()(bits, k, mask, nbits, sample_size(n), out, ok)
    return out, ok


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
        if x.dtype in (jnp.float32, jnp.float64) and x.size >= HOST_TOP_K_MIN and 0 < k <= x.size \
                and jax.default_backend() == "cpu":
            # the composition's sort-based top_k and index sort cost far more on
            # CPU than the NumPy backend's one-pass selection of the same indices
            return jax.pure_callback(functools.partial(_host_top_k_abs, k=k),
                                     jax.ShapeDtypeStruct(x.shape[:-1] + (k,), jnp.int32), x,
                                     vmap_method="expand_dims")
        return Fused.top_k_abs(self, x, k)

    @staticmethod
    def gather(x, idx):
        # jnp.take wraps negative indices; the namespace reads them as 0
        return jnp.take(x, jnp.where(idx < 0, x.size, idx), mode="fill", fill_value=0)

    @staticmethod
    def scatter_add(size, idx, vals):
        # .at[] wraps negative indices; the namespace drops them
        return jnp.zeros((size,), vals.dtype).at[jnp.where(idx < 0, size, idx)].add(vals, mode="drop")

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
