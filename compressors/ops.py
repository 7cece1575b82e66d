"""The backend-neutral ops namespace every compressor is written against.

A compressor never imports an array library. Each of its functions receives
``ops``, an object implementing :class:`Ops`, and only calls what is listed
here plus the small *array protocol* below. Backends (``backends.jax``,
``backends.numpy``, ``backends.mindspore``) bind this namespace; the
conformance suite proves they agree bit for bit.

Array protocol (usable directly on arrays):
    ``+ - * /`` and unary ``-`` between arrays of one dtype, or an array and a
    Python scalar (the array's dtype wins — except bf16 on NumPy, where
    ml_dtypes promotes ``bf16 * float`` to float32: do such arithmetic in
    ``upcast`` and cast back), broadcasting NumPy-style (0-d and
    ``(nb, 1)`` operands); comparisons ``< <= > >= ==`` (broadcasting too);
    ``& | ^ ~`` on bool and uint32; ``<< >>`` on uint32 with shift < 32;
    ``.shape``, ``.dtype``, ``.ndim``, ``.size``; static indexing ``x[i]`` and
    slicing ``x[a:b]`` with Python ints. ``maximum``, ``minimum`` and
    ``where`` also take a Python scalar or a 0-d array for an array
    argument (broadcast, in the other argument's dtype).

Integer arithmetic (int32 and uint32 arrays, same rules for an array and
a Python int):
    ``//`` and ``%`` are floor division and its remainder, as in Python:
    ``-7 // 2 == -4`` and ``-7 % 2 == 1`` (a nonzero remainder has the
    divisor's sign; ``x == (x // m) * m + x % m``). A zero divisor is
    undefined. ``+ - *`` and unary ``-`` on uint32 wrap around modulo
    2**32 (``0 - 1 == 2**32 - 1``), which is what multiply-xorshift hashes
    need; int32 overflow is outside the contract. A Python int operand must
    fit int32 (JAX rejects a larger one even next to a uint32 array): write
    a constant such as 0x85EBCA6B as ``ops.asarray(np.uint32(0x85EBCA6B))``.
    Float ``//`` and ``%`` are not in the protocol (use :meth:`Ops.floor`).

Not in the namespace, but built from it (``compressors/kit.py``): sorting
and order statistics (``top_k`` of all n entries is a sort), the elementwise
median of a few arrays (a min/max sorting network) and a 32-bit integer
hash. ``docs/next_compressor.md`` shows how to use them, the three kinds of
keys (per worker, shared per step, fixed for the whole run) and state in
single-round compressors.

Bit-exactness across backends holds for this protocol with two caveats a
compressor author must respect: never divide by a non-constant *broadcast*
scale when exact agreement matters (XLA turns ``x / c`` into ``x * (1/c)``;
multiply by a reciprocal yourself), and expect ``jax.jit`` to fuse ``a*b + c``
into one fused multiply-add (and ``a / sqrt(b)`` into ``a * rsqrt(b)``), so
jitted and eager results may differ in the last bit; XLA on CPU also
flushes float32/float64/bf16 subnormal results to zero, so subnormals are
outside the bit-identity contract.

Dtypes are NumPy dtype objects (``np.float32``, ``np.uint32``;
``ml_dtypes.bfloat16`` for bf16). Shapes are static Python tuples; every
size argument (``k``, ``capacity``, ``count``) is a static Python int, so all
payloads have static shapes and compile under ``jax.jit`` and MindSpore graph
mode. Indices are int32 (tensors above 2**31 - 1 elements are out of scope).

The exact semantics are in each method's docstring; ``docs/ops.md`` is the
reference for users writing a backend.
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np  # dtype objects only

Array = Any
Key = Any  # uint32 array of shape (2,), JAX's raw threefry2x32 key layout


class Ops(Protocol):
    """The ops namespace. ``name`` identifies the backend (``"jax"``, ...)."""

    name: str

    # -- creation and shape -------------------------------------------------
    def asarray(self, x: Any, dtype: Any = None) -> Array:
        """Array from a Python/NumPy value (for constants)."""

    def zeros(self, shape: Sequence[int], dtype: Any) -> Array:
        """Zeros of a static shape."""

    def full(self, shape: Sequence[int], value: float, dtype: Any) -> Array:
        """``value`` broadcast to a static shape."""

    def arange(self, n: int) -> Array:
        """``[0, 1, ..., n-1]`` as int32."""

    def reshape(self, x: Array, shape: Sequence[int]) -> Array:
        """Row-major reshape (C order)."""

    def concatenate(self, xs: Sequence[Array], axis: int = 0) -> Array:
        """Join arrays along an existing axis."""

    def stack(self, xs: Sequence[Array]) -> Array:
        """Join arrays along a new leading axis."""

    def pad(self, x: Array, after: int) -> Array:
        """Append ``after`` zeros to a 1-D array."""

    def transpose(self, x: Array) -> Array:
        """Swap the two axes of a 2-D array."""

    # -- elementwise --------------------------------------------------------
    def abs(self, x: Array) -> Array:
        """|x|; NaN stays NaN."""

    def sign(self, x: Array) -> Array:
        """-1, 0 or +1 in x's dtype; sign(NaN) is NaN."""

    def sqrt(self, x: Array) -> Array:
        """Correctly rounded square root (IEEE 754)."""

    def floor(self, x: Array) -> Array:
        """Round toward -inf, in x's dtype."""

    def maximum(self, a: Array, b: Array) -> Array:
        """Elementwise max; NaN if either is NaN."""

    def minimum(self, a: Array, b: Array) -> Array:
        """Elementwise min; NaN if either is NaN."""

    def where(self, cond: Array, a: Array, b: Array) -> Array:
        """``a`` where ``cond`` else ``b`` (broadcasting)."""

    def isfinite(self, x: Array) -> Array:
        """True where x is neither NaN nor +-inf."""

    def frexp(self, x: Array) -> tuple[Array, Array]:
        """(mantissa in [0.5, 1) with x's sign, int32 exponent); x = m * 2**e.
        frexp(0) = (0, 0); non-finite x gives mantissa x (exponent unspecified)."""

    def ldexp(self, m: Array, e: Array) -> Array:
        """m * 2**e exactly (int32 e; m and e broadcast)."""

    def astype(self, x: Array, dtype: Any) -> Array:
        """Convert dtype. Float -> integer *saturates* to the integer range
        after truncation toward zero, and NaN becomes 0. Float -> float rounds
        to nearest even (IEEE). Integer -> integer keeps the low bits. Bool ->
        number gives 0 or 1."""

    def bitcast(self, x: Array, dtype: Any) -> Array:
        """Reinterpret the bits as another dtype of the same width."""

    # -- reductions ---------------------------------------------------------
    def sum(self, x: Array, axis: int | None = None) -> Array:
        """Sum in a fixed order, so every backend gets the same bits: the
        reduced axis (or the flattened array) is zero-padded to a power of
        two m, then halved repeatedly, ``s = s[:m/2] + s[m/2:]``, until one
        element is left. The result keeps x's dtype."""

    def max(self, x: Array, axis: int | None = None) -> Array:
        """Maximum over an axis (or all); NaN if any element is NaN."""

    # -- linear algebra -----------------------------------------------------
    def matmul(self, a: Array, b: Array) -> Array:
        """Matrix product of 2-D arrays (accumulation order is the
        backend's: results agree to rounding, not bit for bit)."""

    # -- selection ----------------------------------------------------------
    def top_k(self, x: Array, k: int) -> tuple[Array, Array]:
        """The k largest elements of a 1-D array in descending order and
        their int32 indices; ties go to the lowest index first; NaN ranks
        above +inf (the order is IEEE totalOrder: +0 above -0, a negative
        NaN lowest). ``0 < k <= x.size``."""

    def gather(self, x: Array, idx: Array) -> Array:
        """``x[idx]`` for a 1-D x; an index outside ``[0, x.size)`` (the
        padding sentinel) reads 0."""

    def scatter_add(self, size: int, idx: Array, vals: Array) -> Array:
        """Dense 1-D array of ``size`` zeros (vals' dtype) with
        ``out[idx[i]] += vals[i]``; duplicates accumulate in index order of
        i; indices outside ``[0, size)`` are dropped."""

    def nonzero(self, mask: Array, capacity: int) -> Array:
        """int32 positions of the True entries of a 1-D bool mask in
        increasing order, the first ``capacity`` of them, padded with the
        sentinel ``mask.size`` up to ``capacity``."""

    # -- randomness (JAX threefry2x32, partitionable layout) ------------------
    def key(self, seed: int) -> Key:
        """uint32[2] key from an integer seed, as ``jax.random.PRNGKey``."""

    def fold_in(self, key: Key, data: int | Array) -> Key:
        """New key from a key and a uint32 datum, as ``jax.random.fold_in``."""

    def random_bits(self, key: Key, shape: Sequence[int]) -> Array:
        """uint32 bits, identical to ``jax.random.bits(key, shape)`` with
        ``jax_threefry_partitionable`` (JAX's default since 0.5)."""

    def uniform(self, key: Key, shape: Sequence[int]) -> Array:
        """float32 in [0, 1): ``bitcast((bits >> 9) | 0x3F800000) - 1``, the
        values of ``jax.random.uniform(key, shape)``."""

    # -- bit packing ----------------------------------------------------------
    def pack_bits(self, codes: Array, bits: int) -> Array:
        """Pack a 1-D uint32 array of codes < 2**bits into uint32 words,
        ``32 // bits`` codes per word, code j of a word at bit ``j * bits``;
        the tail is zero-padded. Length ``ceil(n / (32 // bits))``."""

    def unpack_bits(self, words: Array, bits: int, count: int) -> Array:
        """Inverse of :meth:`pack_bits`: the first ``count`` codes."""


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
        threefry word: with ``r = random_bits(key, (ceil(d / 2),))``,
        ``u_2m = (r_m & 0xFFFF + 0.5) / 2**16`` and ``u_2m+1 = (r_m >> 16 +
        0.5) / 2**16`` (float32, exact). So ``E[code_i] = y_i`` up to 2**-17
        (one half of the uniform's resolution), for half the random bits.

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

    def _uniform16(self, key: Key, n: int) -> Array:
        """n float32 uniforms of 16 bits each, two from every threefry word."""
        h = -(-n // 2)
        r = self.random_bits(key, (h,))
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
        """``x - scatter_add(x.size, idx, gather(x, idx))`` for a 1-D x and
        *distinct* int32 indices (those outside ``[0, x.size)`` drop): x with
        the entries it sends taken out, what error feedback keeps of top-k.
        Bits: entry i of idx becomes ``x_i - (0 + x_i)`` (+0 for finite
        nonzero x_i, x_i itself for +-0, NaN for +-inf and NaN), every other
        entry is x's own. Kernels write only the k entries into a copy of x
        (in place where x is dead)."""
        return x - self.scatter_add(x.size, idx, self.gather(x, idx))

    def sum_abs(self, x: Array) -> Array:
        """``sum(abs(x))`` of a 1-D float array, in :meth:`Ops.sum`'s halving
        order (the L1 norm; x's dtype)."""
        return self.sum(self.abs(x))

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

    def add(self, a: Array, b: Array) -> Array:
        """``a + b`` of two arrays of one shape and dtype (a single operator,
        listed for error feedback's full-size sums: an eager backend whose
        operators run on one core runs these on all of them). Same bits."""
        return a + b

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


OP_NAMES = tuple(
    name for name in Ops.__dict__ if not name.startswith("_") and callable(Ops.__dict__[name])
)
FUSED_NAMES = tuple(
    name for name in Fused.__dict__ if not name.startswith("_") and callable(Fused.__dict__[name])
)
