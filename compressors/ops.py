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

    def random_words(self, key: Key, shape: Sequence[int]) -> Array:
        """uint32 words, both outputs of each threefry block: flat word 2j is y0
        and 2j + 1 is y1 of ``threefry2x32(key, (0, j))`` (``jax.extend.random.
        threefry2x32_p``), the blocks :meth:`random_bits` xors (its word j is
        ``y0 ^ y1``): half the blocks per word."""

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


OP_NAMES = tuple(
    name for name in Ops.__dict__ if not name.startswith("_") and callable(Ops.__dict__[name])
)
