"""The fused operations of the ops namespace (:class:`Fused`): each is
defined by a composition of the primitive ops of :class:`compressors.ops.Ops`
and may be replaced by a backend's one-pass kernel returning the same bits."""
from __future__ import annotations

import numpy as np  # dtype objects only

from compressors.ops import Array, Key


class Fused:
    """Fused operations. Each is *defined* by the composition of primitive
    ops in its body, which is also its implementation on every backend that
    inherits this class (JAX, where XLA fuses the composition anyway, and
    MindSpore, whose lowering traces through it). A backend may override a
    fused op with a one-pass kernel (NumPy/Numba does) that must return the
    same bits as the composition (the two built on ``matmul`` agree to
    rounding, as ``matmul`` does); ``tests/backends/test_fused.py`` checks it.

    They exist for eager backends, where every primitive op is a full pass
    over memory: a quantizer written with them reads the gradient twice and
    writes only its packed codes.

    Buckets: a 1-D array of d entries is cut into ``nb = ceil(d / B)``
    buckets of B consecutive entries (the last may be shorter); ``bucket=0``
    means one bucket of all d entries. Per-bucket arguments are 1-D of
    length nb.
    """

    def bucket_min_max(self, x: Array, bucket: int) -> tuple[Array, Array]:
        """(min, max) of each bucket of a 1-D float array, in x's dtype
        (an empty array has no buckets). A bucket holding a NaN gives NaN for both. When a bucket's
        extreme is a tie of -0.0 and +0.0, which zero comes back is
        unspecified (add +0.0 to normalise it)."""
        nb, b = bucket_grid(x.size, bucket)
        if nb * b > x.size:  # repeat the last entry: min and max are unchanged
            x = self.gather(x, self.minimum(self.arange(nb * b), x.size - 1))
        rows = self.reshape(x, (nb, b))
        return -self.max(-rows, axis=1), self.max(rows, axis=1)

    def quantize_pack(self, x: Array, offset: Array, inv_scale: Array, bucket: int, top: float, bits: int,
                      key: Key, signed: bool = False) -> Array:
        """Stochastic rounding of a per-bucket affine map, bit-packed. For
        entry i of the 1-D float32/float64 array x, in bucket b::

            y_i    = min(max((x_i - offset_b) * inv_scale_b, 0), top)     (NaN -> code 0)
            code_i = floor(y_i) + [u_i < y_i - floor(y_i)]

        returns ``pack_bits(code, bits)``; ``top <= 2**bits - 1``; offset and
        inv_scale are in x's dtype. The uniforms have 16 bits, two per
        word, four per threefry block: with ``r = random_words(key, (ceil(d / 2),))``,
        ``u_2m = (r_m & 0xFFFF + 0.5) / 2**16`` and ``u_2m+1 = (r_m >> 16 +
        0.5) / 2**16`` (float32, exact). So ``E[code_i] = y_i`` up to 2**-17
        (one half of the uniform's resolution), for a quarter of the threefry blocks.

        ``signed``: sign and magnitude (QSGD, TernGrad). The magnitude
        ``|x_i - offset_b| * inv_scale_b`` is rounded the same way (clamped
        to ``[0, top]``, ``top <= 2**(bits - 1) - 1``) and the top bit of
        the code is set where ``x_i - offset_b < 0`` (not for NaN or -0.0)."""
        d = x.size
        nb, b = bucket_grid(d, bucket)
        rows = self.reshape(self.pad(x, nb * b - d), (nb, b))
        v = rows - self.reshape(offset, (nb, 1))
        y = (self.abs(v) if signed else v) * self.reshape(inv_scale, (nb, 1))
        y = self.minimum(self.maximum(y, 0.0), top)
        f = self.floor(y)
        u = self.astype(self.reshape(self._uniform16(key, nb * b), (nb, b)), x.dtype)
        q = self.where(u < y - f, f + 1.0, f)
        if signed:
            q = q + self.where(v < 0.0, float(2 ** (bits - 1)), self.zeros(v.shape, v.dtype))
        codes = self.astype(self.reshape(q, (nb * b,))[:d], np.uint32)
        return self.pack_bits(codes, bits)

    def minmax_quantize_pack(self, x: Array, bucket: int, top: float, bits: int, key: Key) -> tuple:
        """Min-max stochastic quantization of a 1-D float array, scales and codes in one call
        (``quantize(bits)``'s encoder): ``(codes, lo_w, step_w)`` with, per bucket,

            (mins, maxs) = bucket_min_max(x, bucket)
            lo_w   = float32(mins + 0.0),              lo   = lo_w in x's dtype
            step_w = float32(max((maxs - lo) * (1 / top), 2^-126)),   step = step_w in x's dtype
            inv    = max(1 / step, 2^-126)
            codes  = quantize_pack(x, lo, inv, bucket, top, bits, key)

        (``maximum`` keeps a NaN: a bucket holding NaN or an overflowing range puts NaN on
        the wire). The scales are the float32 the wire carries, and the codes are rounded
        with those same scales. A kernel may read each bucket once from memory."""
        mins, maxs = self.bucket_min_max(x, bucket)
        lo_w = self.astype(mins + 0.0, np.float32)   # + 0.0: -0.0 -> +0.0
        lo = self.astype(lo_w, x.dtype)
        step_w = self.astype(self.maximum((maxs - lo) * (1.0 / top), 2.0**-126), np.float32)
        step = self.astype(step_w, x.dtype)
        inv = self.maximum(1.0 / step, 2.0**-126)
        return self.quantize_pack(x, lo, inv, bucket, top, bits, key), lo_w, step_w

    def _uniform16(self, key: Key, n: int) -> Array:
        """n float32 uniforms of 16 bits each, two from every word of :meth:`random_words`."""
        h = -(-n // 2)
        r = self.random_words(key, (h,))
        halves = self.stack([r & self.asarray(0xFFFF, np.uint32), r >> self.asarray(16, np.uint32)])
        codes = self.reshape(self.transpose(halves), (2 * h,))[:n]
        return (self.astype(codes, np.float32) + 0.5) * (1.0 / 65536.0)

    def dequantize(self, words: Array, bits: int, count: int, offset: Array, scale: Array,
                   bucket: int, signed: bool = False) -> Array:
        """The inverse map of :meth:`quantize_pack`: ``offset_b + code_i *
        scale_b`` (two roundings, in that order) for the first ``count``
        codes of ``unpack_bits(words, bits, count)``, 1-D in offset's dtype
        (float32/float64; scale has the same dtype). ``signed``: a code with
        its top bit h = 2**(bits - 1) set stands for ``-(code_i - h)``."""
        nb, b = bucket_grid(count, bucket)
        codes = self.astype(self.unpack_bits(words, bits, count), offset.dtype)
        if signed:
            h = float(2 ** (bits - 1))
            codes = self.where(codes >= h, h - codes, codes)
        rows = self.reshape(self.pad(codes, nb * b - count), (nb, b))
        out = self.reshape(offset, (nb, 1)) + rows * self.reshape(scale, (nb, 1))
        return self.reshape(out, (nb * b,))[:count]

    def bucket_norm(self, x: Array, bucket: int) -> Array:
        """The L2 norm of each bucket of a 1-D float array without overflow,
        in x's dtype: ``m * sqrt(sum((v / m)^2))`` with ``m = max(max|v|,
        2**-126)``; ``v / m`` is ``ldexp(v, -e) * (1 / f)`` for ``m = f * 2**e``
        (``frexp``: exact scaling, a reciprocal that is never subnormal), the
        sum in :meth:`Ops.sum`'s halving order over the bucket zero-padded
        to B entries. A bucket holding NaN or +-inf gives NaN."""
        nb, b = bucket_grid(x.size, bucket)
        rows = self.reshape(self.pad(x, nb * b - x.size), (nb, b))
        m = self.maximum(self.max(self.abs(rows), axis=1), 2.0**-126)
        f, e = self.frexp(m)
        scaled = self.ldexp(rows, self.reshape(-e, (nb, 1))) * self.reshape(1.0 / f, (nb, 1))
        return m * self.sqrt(self.sum(scaled * scaled, axis=1))

    def top_k_abs(self, x: Array, k: int) -> Array:
        """int32 indices of the k largest ``|x_i|`` of a 1-D float array
        (lowest index first among ties, NaN above inf), in ascending index
        order: the set ``top_k(abs(x), k)`` picks, listed as ``nonzero``
        lists a mask. (A set in index order needs no sort: kernels select
        it with one threshold pass, and scatters of it write memory in order.)"""
        picked = self.top_k(self.abs(x), k)[1]
        chosen = self.scatter_add(x.size, picked, self.full((k,), 1, "int32"))
        return self.nonzero(chosen > 0, k)

    def clear_at(self, x: Array, idx: Array) -> Array:
        """``x - scatter_add(x.size, idx, gather(x, idx))`` on x's flat view (x of
        any shape; *distinct* int32 row-major positions, those outside ``[0,
        x.size)`` drop), in x's shape: x with the entries it sends taken out,
        what error feedback keeps of top-k. Bits: entry i of idx becomes ``x_i -
        (0 + x_i)`` (+0 for finite nonzero x_i, x_i itself for +-0, NaN for
        +-inf and NaN), every other entry is x's own. Kernels write only the k
        entries into a copy of x (in place where x is dead; a reshape around
        the write, under XLA, made it a copy of all of x)."""
        flat = self.reshape(x, (-1,))
        return self.reshape(flat - self.scatter_add(flat.size, idx, self.gather(flat, idx)), x.shape)

    def sum_abs(self, x: Array, scale: float = 1.0) -> Array:
        """``sum(abs(x * scale))`` of a 1-D float array, in :meth:`Ops.sum`'s
        halving order (the L1 norm; x's dtype). ``scale``, a power of two
        (exact), keeps a long sum of large entries finite without a scaled
        copy of x."""
        return self.sum(self.abs(x if scale == 1.0 else x * scale))

    def sum_abs_pack(self, x: Array, scale: float = 1.0) -> tuple[Array, Array]:
        """``(sum_abs(x, scale), pack_signs(x))`` of a 1-D float array: the
        scaled sign's encoder (EF-signSGD), whose two parts read the same x
        (a backend may make them one pass over it)."""
        return self.sum_abs(x, scale), self.pack_signs(x)

    def sign_split_sums(self, x: Array, scale: float) -> Array:
        """The sums of the two sides of a 1-D float array, ``pos = x >= 0``
        (NaN falls on the negative side), scaled by ``scale`` (a power of two,
        so exactly): ``[sum(where(pos, x*scale, 0)), sum(where(pos, 1, 0)),
        sum(where(pos, 0, -(x*scale))), sum(where(pos, 0, 1)), sum(x*0)]``
        in :meth:`Ops.sum`'s halving order, x's dtype; the last is 0 for a
        finite x and NaN otherwise (1-bit SGD's two means and their counts).
        A NaN sum is returned as +NaN: compilers may give ``-(x*scale)`` of
        a NaN either sign bit (LLVM folds it into ``x * -scale``)."""
        zero = self.zeros(x.shape, x.dtype)
        pos, xs = x >= 0, x * scale
        sums = self.stack([self.sum(self.where(pos, xs, zero)), self.sum(self.where(pos, 1.0, zero)),
                           self.sum(self.where(pos, zero, -xs)), self.sum(self.where(pos, zero, 1.0)),
                           self.sum(x * 0.0)])
        return self.where(sums == sums, sums, float("nan"))

    def sign_split_pack(self, x: Array, scale: float) -> tuple[Array, Array]:
        """``(sign_split_sums(x, scale), pack_signs(x))`` of a 1-D float array:
        1-bit SGD's encoder, whose two parts read the same x (a backend may
        make them one pass over it)."""
        return self.sign_split_sums(x, scale), self.pack_signs(x)

    def pack_signs(self, x: Array) -> Array:
        """One bit per entry of a 1-D float array, 1 where ``x < 0`` (so
        -0.0 and NaN give 0): ``pack_bits(astype(x < 0, uint32), 1)``."""
        return self.pack_bits(self.astype(x < 0, np.uint32), 1)

    def unpack_signs(self, words: Array, count: int, pos: Array, neg: Array) -> Array:
        """``neg`` where bit i of :meth:`pack_signs`'s words is 1, else
        ``pos``: 1-D of ``count`` entries in the dtype of the 0-d arrays pos
        and neg (same dtype), their exact bits."""
        bit = self.unpack_bits(words, 1, count)
        return self.where(bit > 0, neg, pos)

    def natural_pack(self, x: Array, key: Key) -> tuple[Array, Array]:
        """Natural compression's encoder (``compressors/natural.py`` states
        the rule and the wire format) of a 1-D float32/float64 array:
        ``(signs, exps)`` = (``pack_bits(sign, 1)``, ``pack_bits(E, 8)``),
        each entry rounded at random, with the 23-bit uniform ``u_i = (w_i >> 9) / 2**23``
        of word i of ``random_words(key, x.shape)`` (two per threefry block), to one
        of its two neighbouring powers of two. float64 entries go to the
        float32 exponent range (beyond it: inf, or the two neighbours 0 and
        2^-126)."""
        a = self.abs(x)
        u = self.astype(self.astype(self.random_words(key, a.shape) >> self.asarray(9, np.uint32), np.float32)
                        * (1.0 / 2**23), a.dtype)
        m, e = self.frexp(a)
        normal = self.minimum(self.where(u < m * 2.0 - 1.0, e, e - 1) + 127, 255)
        tiny = self.astype(u < self.ldexp(a, self.full(a.shape, 126, np.int32)), np.int32)
        biased = self.where(a < 2.0**-126, tiny, normal)
        biased = self.where(self.isfinite(a), biased, 255)
        nan = ~(a == a)
        biased = self.where(nan, 0, biased)
        negative = (x < 0) & (biased > 0)  # a zero is sent as (0, 0), even -0.0 or a tiny -x
        sign = self.astype(negative | nan, np.uint32)
        return self.pack_bits(sign, 1), self.pack_bits(self.astype(biased, np.uint32), 8)

    def natural_unpack(self, signs: Array, exps: Array, count: int) -> Array:
        """The inverse of :meth:`natural_pack`: ``count`` float32 values with
        bits ``sign << 31 | E << 23``, except (sign 1, E 0), which is NaN."""
        sign = self.unpack_bits(signs, 1, count)
        biased = self.unpack_bits(exps, 8, count)
        value = self.bitcast((sign << 31) | (biased << 23), np.float32)
        return self.where((sign == 1) & (biased == 0), float("nan"), value)

    def add(self, a: Array, b: Array) -> Array:
        """``a + b`` of two arrays of one shape and dtype (a single operator,
        listed for error feedback's full-size sums: an eager backend whose
        operators run on one core runs these on all of them). Same bits."""
        return a + b

    def matmul_tn(self, a: Array, b: Array) -> Array:
        """``matmul(transpose(a), b)`` for a (n, m) and b (n, r): the (m, r)
        projection of a full-size matrix onto thin factors (PowerSGD's
        M^T P), without a transposed copy of a. Agrees with the composition
        to rounding, as ``matmul`` does."""
        return self.matmul(self.transpose(a), b)

    def matmul_nt(self, a: Array, b: Array) -> Array:
        """``matmul(a, transpose(b))`` for a (n, r) and b (m, r): the (n, m)
        product of two thin factors (a low-rank payload decoded). Like
        ``matmul``, it agrees with the composition to rounding: each entry
        is an r-term dot product whose accumulation order is the backend's."""
        return self.matmul(a, self.transpose(b))

    def sub_matmul_nt(self, c: Array, a: Array, b: Array) -> Array:
        """``c - matmul_nt(a, b)`` for c (n, m): what is left of c after its
        low-rank part is sent, in one pass over c (agrees to rounding)."""
        return c - self.matmul_nt(a, b)


def bucket_grid(d: int, bucket: int) -> tuple[int, int]:
    """(nb, B): number of buckets and bucket length for d entries (bucket 0: one bucket)."""
    b = bucket if bucket else max(d, 1)
    return -(-d // b), b


FUSED_NAMES = tuple(
    name for name in Fused.__dict__ if not name.startswith("_") and callable(Fused.__dict__[name])
)
