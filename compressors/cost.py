"""What a compressor's encode and decode *do*, counted from its own op program.

No compressor is named here: a compressor (built-in or a user's) is traced
(:func:`compressors.program.trace_codec`) into the equations of one tensor's
single-worker encode and n-worker decode, and every equation is counted:

* **bytes** read and written, from its Vars' shapes and dtypes: every
  distinct array input is read once, every output written once; ``gather``
  reads its indices and the gathered elements only (not all of x);
* **FLOPs** for the matrix products (the only ops that can be compute-bound):
  ``matmul`` of (m, k)·(k, n) is 2mkn, ``matmul_nt`` of (n, r), (m, r) and
  ``matmul_tn`` of (n, m), (n, r) are 2nmr, ``sub_matmul_nt`` 2nmr + nm;
  the FLOPs' dtype is the inputs';
* a **cost class**, which a device profile turns into a throughput:

  ==================  =================================================================
  ``elementwise``     arithmetic, comparisons, where, fills, copies (pad,
                      concatenate, stack, transpose), ``add``
  ``reduction``       ``sum``, ``max``, ``bucket_min_max``, ``sum_abs``,
                      ``bucket_norm``, ``sign_split_sums``, ``sign_split_pack``,
                      ``sum_abs_pack``
  ``matmul``          ``matmul``, ``matmul_nt``, ``matmul_tn``, ``sub_matmul_nt``
  ``select``          ``top_k``, ``nonzero``, ``top_k_abs`` (selection / sort-like)
  ``gather/scatter``  ``gather``, ``scatter_add``, ``clear_at`` (data-dependent addresses)
  ``rng``             ``random_bits``, ``uniform``, ``random_words``, ``fold_in``
                      (threefry; 4 bytes per block computed: ``random_words`` takes
                      both words of a block, so half as many per word)
  ``pack``            ``pack_bits``, ``unpack_bits``, ``quantize_pack``,
                      ``dequantize``, ``pack_signs``, ``unpack_signs``
  ``convert``         ``astype`` (a dtype conversion: fp16/bf16 casts, int <-> float)
  ==================  =================================================================

* **scattered accesses** of ``gather``, ``scatter_add`` and ``clear_at``
  whose indices are not known to ascend (``OpCost.scattered``: one line
  transfer per index read, two per index updated; ``OpCost.table_bytes``:
  the array they address). Indices ascend when they come from
  ``top_k_abs``, ``nonzero`` or ``arange`` (through reshapes, casts,
  slices, concatenation, sums, scaling by a non-negative scalar, and a
  collective: :func:`ascending_vars`), so those accesses walk memory
  forward and share lines; hashed, sampled and rank-ordered (``top_k``)
  indices do not, nor does index arithmetic past those rules. On a device with a cache of C
  bytes and lines of L bytes, a scattered access to a table of T bytes
  misses with probability ``max(0, 1 - C / T)`` and moves a whole line:
  :meth:`OpCost.missed_bytes` (priced in the op's own class);
* the **number of ops** (kernels): each costs a launch/dispatch overhead;
* the **bucket segments** a bucketed kernel walks (``OpCost.segments``: an op with a
  ``bucket`` attribute — ``bucket_min_max``, ``quantize_pack``, ``dequantize``,
  ``bucket_norm``, ... — over c entries walks ceil(c / bucket) buckets, one for bucket 0):
  each loads its bucket's scale and restarts the kernel's inner loop, a fixed cost per
  bucket that a byte count does not see (buckets of 50 or 64 entries);
* **random words drawn inside a fused kernel** (``quantize_pack`` draws one
  threefry block per four entries, ``natural_pack`` one per two, see
  ``compressors.fused``): threefry is arithmetic, not memory traffic, so a
  kernel that draws while it packs is priced as its pack bytes *plus* 4
  bytes per block in the ``rng`` class (``OpCost.rng_bytes``), as if
  ``random_bits`` had written a word per block; it is still one kernel.

Free (no kernel, no bytes, not counted): ``reshape``, ``bitcast`` and static
slicing ``x[a:b]`` (views), constants (``asarray``; static key arithmetic is
folded into constants at trace time) and a cast to the dtype an array
already has. Ops whose result reaches no output are dropped (a compiled
backend never runs them). Fused ops (``compressors.fused.Fused``:
``bucket_min_max``, ``quantize_pack``, ``top_k_abs``, ...) are traced as one
equation each, at their own inputs and outputs — the one-pass kernel a
backend may give them — never as the composition that defines them.

**Decode scales with n.** A GATHER round hands decode a stacked payload
(leading axis n); its decode either loops over the payloads (the same
equations once per payload) or runs vectorised ops over the stack (bytes
linear in n). Either way the decode program is linear in n, so
:func:`codec_cost` traces decode at two worker counts and takes the
difference: ``decode_per_worker = D(3) − D(2)`` and the intercept
``decode = D(2) − 2·decode_per_worker``, so ``decode_at(n) = decode +
n·decode_per_worker`` for every n ≥ 2 without retracing (a test checks n = 4
against a trace). Why two traces rather than tracing "the per-payload part":
that part is not separable in general (a vectorised decode has no
per-payload equations, only bigger ones), while the difference of two
traces is exact for both styles and needs nothing from the compressor.
n = 1 is not on the line (``mean_of`` skips the 1/n scaling there, a
custom aggregate may do less): a third trace gives ``decode_one``, what
``decode_at(1)`` returns (a worker decoding its own payload: the loopback
round trip the benchmarks and ``kfsim calibrate`` time). Counts are signed
(the intercept may hold, e.g., minus one ``add`` of a loop ``total + d_i``).
SUM rounds decode one summed payload: their per-worker slope is empty.

A dense SUM exchange (``none()``) has an empty encode and a decode of one
elementwise op, the 1/n scaling of the summed gradient (what an all-reduce
with averaging does inside the collective; the simulator therefore charges
tensors sent dense nothing, see ``kfsim.sim.codec``).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from compressors.fused import FUSED_NAMES
from compressors.ops import OP_NAMES
from compressors.ordering import ascending_vars, distinct
from compressors.program import BINARY, UNARY, Var, trace_codec, vars_of

CLASSES = ("elementwise", "reduction", "matmul", "select", "gather/scatter", "rng", "pack", "convert")
FREE = "free"

OP_CLASS: dict[str, str] = {
    **{op: "elementwise" for op in BINARY}, **{op: "elementwise" for op in UNARY},
    **{op: "elementwise" for op in ("abs", "sign", "sqrt", "floor", "maximum", "minimum", "where",
                                    "isfinite", "frexp", "ldexp", "concatenate", "stack", "pad",
                                    "transpose", "zeros", "full", "arange")},
    "astype": "convert",
    "reshape": FREE, "bitcast": FREE, "getitem": FREE, "asarray": FREE,
    "sum": "reduction", "max": "reduction", "bucket_min_max": "reduction", "sum_abs": "reduction",
    "bucket_norm": "reduction", "sign_split_sums": "reduction", "sign_split_pack": "reduction",
    "sum_abs_pack": "reduction",
    "matmul": "matmul", "matmul_nt": "matmul", "matmul_tn": "matmul", "sub_matmul_nt": "matmul",
    "top_k": "select", "nonzero": "select", "top_k_abs": "select",
    "gather": "gather/scatter", "scatter_add": "gather/scatter", "clear_at": "gather/scatter",
    "key": "rng", "fold_in": "rng", "random_bits": "rng", "uniform": "rng", "random_words": "rng",
    **{op: "pack" for op in ("pack_bits", "unpack_bits", "quantize_pack", "dequantize", "minmax_quantize_pack",
                             "pack_signs", "unpack_signs", "natural_pack", "natural_unpack")},
}
_unclassified = (set(OP_NAMES) | set(FUSED_NAMES)) - set(OP_CLASS)
assert not _unclassified, f"ops without a cost class: {sorted(_unclassified)}"


class OpCost(NamedTuple):
    """One kernel: its op, cost class, bytes in and out, FLOPs (and their
    dtype), and the bytes of random words it draws inside (``rng`` class)."""

    op: str
    cls: str
    bytes_read: float
    bytes_written: float
    flops: float = 0.0
    flop_dtype: str = ""
    rng_bytes: float = 0.0
    scattered: float = 0.0     # line transfers of unordered accesses (per index: 1 read, 2 updated)
    table_bytes: float = 0.0   # the array those accesses address
    segments: float = 0.0      # bucket segments a bucketed kernel walks (0: not bucketed)

    def missed_bytes(self, cache_bytes: float, line_bytes: float) -> float:
        """Bytes of the lines the scattered accesses move past a cache of ``cache_bytes``."""
        if not self.scattered or self.table_bytes <= cache_bytes:
            return 0.0
        return self.scattered * (1.0 - cache_bytes / self.table_bytes) * line_bytes

    def streamed(self, cache_bytes: float, speedup: float, share: float = 1.0) -> float:
        """Its bytes read and written, a :meth:`resident` kernel's counted 1/speedup for the
        ``share`` of them the cache serves (:meth:`OpCounts.resident_share`)."""
        b = self.bytes_read + self.bytes_written
        if speedup != 1.0 and self.resident(cache_bytes):
            b *= 1.0 - share * (1.0 - 1.0 / speedup)
        return b

    def resident(self, cache_bytes: float) -> bool:
        """Whether the kernel streams its bytes from a cache of ``cache_bytes``: its class is one
        of :data:`STREAMING` and its bytes fit in a fraction :data:`RESIDENT_FRACTION` of the
        cache (its input and output stay there between kernels)."""
        return self.cls in STREAMING and 0.0 < self.bytes_read + self.bytes_written <= RESIDENT_FRACTION * cache_bytes


# A kernel whose bytes (read + written) fit in half the last-level cache streams them from the
# cache: its inputs were just written by the kernel before, and the other half holds that kernel's
# inputs and whatever else shares the cache. Measured on the development machine (32 MiB L3): a
# threaded copy of a 4 MiB array moves 180 GB/s, of an 8 MiB one 187, of 16 MiB 162, of 32 MiB 92
# (the cliff starts past half the cache), of 1 GiB 45-49.
RESIDENT_FRACTION = 0.5
# The classes whose time is the streaming of their bytes (a faster source speeds them up); select,
# scattered accesses, threefry and packing are bound by their own work (docs/simulator.md, step 3).
# The halving sums joined on 2026-12-06, threaded from 2**18: 42-70 GB/s at 2**20, 23 at 2.5e7.
STREAMING = frozenset({"elementwise", "convert", "matmul", "reduction"})


# Fused ops that draw threefry words inside their one pass: entries of x (their
# first argument) per uint32 word drawn (compressors.fused states the draws).
DRAWS_PER_BLOCK = {"quantize_pack": 4, "minmax_quantize_pack": 4, "natural_pack": 2}
# Ops that take more than one word from each threefry block: the rng class prices 4 bytes per block.
WORDS_PER_BLOCK = {"random_words": 2}


class ClassTotals(NamedTuple):
    count: float
    bytes_read: float
    bytes_written: float
    flops: float


class OpCounts(NamedTuple):
    """A multiset of kernels: ``entries`` are (OpCost, count) with signed float
    counts (identical kernels merged, first appearance first)."""

    entries: tuple = ()

    @classmethod
    def of(cls, eqns, ordered: frozenset = frozenset()) -> "OpCounts":
        """The kernels of ``eqns``; ``ordered``: ids of index arrays known to ascend
        (:func:`ascending_vars`), whose accesses are not scattered."""
        counts: dict = {}
        for e in eqns:
            c = op_cost(e, ordered)
            if c is not None:
                counts[c] = counts.get(c, 0.0) + 1.0
        return cls(tuple(counts.items()))

    def plus(self, other: "OpCounts", scale: float = 1.0) -> "OpCounts":
        """self + scale · other (zero counts dropped)."""
        counts = dict(self.entries)
        for c, k in other.entries:
            counts[c] = counts.get(c, 0.0) + scale * k
        return OpCounts(tuple((c, k) for c, k in counts.items() if abs(k) > 1e-9))

    def times(self, scale: float) -> "OpCounts":
        return OpCounts(tuple((c, k * scale) for c, k in self.entries if k * scale))

    @property
    def n_ops(self) -> float:
        return sum(k for _, k in self.entries)

    bytes_read = property(lambda self: sum(k * c.bytes_read for c, k in self.entries))
    bytes_written = property(lambda self: sum(k * c.bytes_written for c, k in self.entries))

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def flops(self) -> float:
        return sum(k * c.flops for c, k in self.entries)

    @property
    def segments(self) -> float:
        return sum(k * c.segments for c, k in self.entries)

    def by_class(self, cache_bytes: float | None = None, line_bytes: float = 64.0) -> dict[str, ClassTotals]:
        """Totals per cost class; a kernel's internal draws count as bytes
        written in ``rng`` (no op: the kernel is counted in its own class);
        with ``cache_bytes``, the lines its scattered accesses miss count as
        bytes read in its class (:meth:`OpCost.missed_bytes`)."""
        out: dict = {}
        for c, k in self.entries:
            t = out.get(c.cls, ClassTotals(0.0, 0.0, 0.0, 0.0))
            missed = c.missed_bytes(cache_bytes, line_bytes) if cache_bytes is not None else 0.0
            out[c.cls] = ClassTotals(t.count + k, t.bytes_read + k * (c.bytes_read + missed),
                                     t.bytes_written + k * c.bytes_written, t.flops + k * c.flops)
            if c.rng_bytes:
                t = out.get("rng", ClassTotals(0.0, 0.0, 0.0, 0.0))
                out["rng"] = t._replace(bytes_written=t.bytes_written + k * c.rng_bytes)
        return out

    def class_bytes(self, cache_bytes: float | None = None, line_bytes: float = 64.0,
                    speedup: float = 1.0, share: float | None = None) -> dict[str, float]:
        """Bytes per cost class (read + written, internal draws in ``rng``, missed lines
        with ``cache_bytes``: :meth:`by_class`); with ``speedup`` > 1 and ``cache_bytes``, the
        streamed bytes of a :meth:`OpCost.resident` kernel count 1/speedup (the time they take at
        the class's streaming rate when the cache serves them ``speedup`` times faster), for the
        ``share`` of them the cache serves (default: :meth:`resident_share` of these counts)."""
        out = {c: t.bytes_read + t.bytes_written for c, t in self.by_class(cache_bytes, line_bytes).items()}
        if speedup != 1.0 and cache_bytes is not None:
            share = self.resident_share(cache_bytes) if share is None else share
            for c, k in self.entries:
                out[c.cls] -= k * (c.bytes_read + c.bytes_written - c.streamed(cache_bytes, speedup, share))
        return out

    def resident_share(self, cache_bytes: float) -> float:
        """The share of its resident kernels' bytes a cache of ``cache_bytes`` serves: all of
        them while the bytes the program writes fit in the half of the cache a resident kernel
        may use (:data:`RESIDENT_FRACTION`); past that, every byte written beyond it evicts a
        line the cache would have served, and the dirty lines go back to memory: budget / written
        (1e6-entry countsketch, dgc, sumquant, doublesqueeze write 35-900 MiB: 1.8-2.3x slower)."""
        written = self.bytes_written
        budget = RESIDENT_FRACTION * cache_bytes
        return 1.0 if written <= budget else budget / written

    def ops(self) -> dict[str, float]:
        """Count per op name."""
        out: dict = {}
        for c, k in self.entries:
            out[c.op] = out.get(c.op, 0.0) + k
        return out


SCATTERED = {"gather": 1.0, "scatter_add": 2.0, "clear_at": 2.0}   # line transfers per index
INDEX_ARG = {"gather": 1, "scatter_add": 0, "clear_at": 1}   # the index array among the traced args


def op_cost(eqn, ordered: frozenset = frozenset()) -> OpCost | None:
    """The cost of one equation (None: free); ``ordered``: :func:`ascending_vars`."""
    cls = OP_CLASS.get(eqn.op)
    if cls is None:
        raise ValueError(f"op {eqn.op!r} has no cost class (compressors.cost.OP_CLASS)")
    if cls == FREE:
        return None
    ins = distinct(vars_of(eqn.args))
    if eqn.op == "astype" and ins and ins[0].dtype == eqn.outs[0].dtype:
        return None  # a cast to the array's own dtype is no kernel
    written = float(sum(o.nbytes for o in eqn.outs))
    if eqn.op == "gather":
        x, idx = eqn.args
        read = float(idx.nbytes + eqn.outs[0].size * x.dtype.itemsize)
    else:
        read = float(sum(v.nbytes for v in ins))
    flops, fdt = 0.0, ""
    if cls == "matmul":
        flops, fdt = _matmul_flops(eqn)
    per = DRAWS_PER_BLOCK.get(eqn.op)
    drawn = 4.0 * -(-eqn.args[0].size // per) if per else 0.0
    if eqn.op in WORDS_PER_BLOCK:
        written = 4.0 * -(-eqn.outs[0].size // WORDS_PER_BLOCK[eqn.op])
    scattered = table = 0.0
    idx = eqn.args[INDEX_ARG[eqn.op]] if eqn.op in SCATTERED else None
    if isinstance(idx, Var) and idx.id not in ordered:
        scattered = SCATTERED[eqn.op] * idx.size
        table = float(eqn.outs[0].nbytes if eqn.op == "scatter_add" else eqn.args[0].nbytes)
    return OpCost(eqn.op, cls, read, written, flops, fdt, drawn, scattered, table, bucket_segments(eqn))


def bucket_segments(eqn) -> float:
    """Buckets a bucketed op walks: ceil(c / bucket) over its c entries (its ``count``
    attribute, else its first argument's size), one for bucket 0 (the whole array); 0 for an
    op without a ``bucket`` attribute."""
    attrs = eqn.attrs or {}
    bucket = attrs.get("bucket")
    if bucket is None:
        return 0.0
    count = attrs.get("count")
    if count is None:
        count = eqn.args[0].size if eqn.args and isinstance(eqn.args[0], Var) else 0
    return float(-(-int(count) // int(bucket))) if bucket else 1.0


def _matmul_flops(eqn) -> tuple[float, str]:
    arrays = [a for a in eqn.args if isinstance(a, Var)]
    if eqn.op == "matmul":
        a, b = arrays
        (m, k), n = a.shape, b.shape[-1]
        return 2.0 * m * k * n, a.dtype.name
    if eqn.op == "matmul_nt":
        a, b = arrays
        return 2.0 * a.shape[0] * b.shape[0] * a.shape[1], a.dtype.name
    if eqn.op == "matmul_tn":
        a, b = arrays
        return 2.0 * a.shape[0] * a.shape[1] * b.shape[1], a.dtype.name
    c, a, b = arrays  # sub_matmul_nt
    return 2.0 * a.shape[0] * b.shape[0] * a.shape[1] + c.size, a.dtype.name


class CodecCost(NamedTuple):
    """One tensor's codec: the encode of one worker, and its decode of n
    workers' payloads: ``decode + n · decode_per_worker`` (n >= 2), ``decode_one`` (n = 1)."""

    encode: OpCounts
    decode: OpCounts
    decode_per_worker: OpCounts
    decode_one: OpCounts

    def decode_at(self, n: int) -> OpCounts:
        return self.decode_one if n == 1 else self.decode.plus(self.decode_per_worker, float(n))

    def decode_share(self, cache_bytes: float) -> float:
        """The resident share (:meth:`OpCounts.resident_share`) of every decode, whatever its n:
        that of one payload's (``decode_one``), so the decode's price stays linear in n >= 2."""
        return self.decode_one.resident_share(cache_bytes)


TRACE_N = (2, 3)   # the two worker counts decode's line is traced at (see the module docstring)


def trace_cost(comp, shape, dtype, reference_ops) -> CodecCost:
    """Trace ``comp`` on one tensor (at n = 1, 2 and 3) and count its ops (uncached)."""
    (ea, da), (_, db), (_, d1) = (_counted(trace_codec(comp, shape, dtype, reference_ops, n=n))
                                  for n in (*TRACE_N, 1))
    a, b = TRACE_N
    per = db.plus(da, -1.0).times(1.0 / (b - a))
    return CodecCost(ea, da.plus(per, -float(a)), per, d1)


def _counted(prog) -> tuple:
    """(encode, decode) OpCounts of a traced program."""
    up = ascending_vars(prog.encode + prog.decode, prog.links)
    return OpCounts.of(prog.encode, up), OpCounts.of(prog.decode, up)


_CACHE: dict = {}


def codec_cost(comp, shape, dtype, reference_ops) -> CodecCost:
    """:func:`trace_cost`, cached per (spec, shape, dtype, reference binding):
    every compressor is traced once per distinct tensor shape. A spec string
    names one compressor (the registry's canonical specs are unique), so two
    different programs must not share a spec."""
    key = (comp.spec, tuple(int(s) for s in shape), np.dtype(dtype).name, getattr(reference_ops, "name", id(reference_ops)))
    found = _CACHE.get(key)
    if found is None:
        found = _CACHE[key] = trace_cost(comp, shape, dtype, reference_ops)
    return found


def clear_cache() -> None:
    _CACHE.clear()
