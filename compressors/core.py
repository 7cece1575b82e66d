"""The compressor type: a multi-round exchange protocol made of pure functions.

Every compressor, including one-shot ones like top-k, is a *protocol* of one
or more communication rounds. Round ``r`` has an aggregation law:

* ``Law.SUM``: payloads are linear; an all-reduce may add them. The round's
  *received* value is the elementwise sum of all workers' payloads.
* ``Law.GATHER``: payloads must travel whole (all-gather or parameter
  server). The received value stacks every worker's payload on a new
  leading axis of size n.
* ``Law.MAX``: the received value is the elementwise maximum of all
  workers' payloads (an all-reduce with MAX; shared scales of summable
  quantization).
* ``Law.SCATTER``: an all-to-all. Each payload array is split along axis 0
  into n parts (``compressors.communicators``); worker j receives part j of
  every worker's payload, stacked on a new leading axis of size n, and owns
  that shard (a compressed all-reduce's server for 1/n of the tensor).
  A round whose ``Round.shard`` is set carries only this worker's shard:
  its ``bits`` are the whole tensor's, each worker sends ⌈1/n⌉ of them.

A worker runs, for r = 0 .. R-1, ``encode(..., received[:r], r)`` and hands
the payload to a communicator; when all rounds are received, ``decode``
(given this worker's own payloads and what it received) returns the
mean-gradient estimate, identical on every worker. ``local`` returns what
this worker's own payloads decode to (error feedback needs it).

Compressor authors write these per *leaf* (one array). :class:`Compressor`
describes a whole pytree — its rounds, DDP buckets and collectives
(:meth:`Compressor.exchange_plan`), its fresh state (a pytree mirroring the
gradients, one named state per leaf) — and the one runner that drives the
rounds for every life is :func:`compressors.protocol.run`. Nothing here
communicates and nothing is mutated: state is a pytree that goes in and
comes out, randomness comes from explicit :class:`Keys`.
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from compressors.buckets import DEFAULT_BUCKET_BYTES, assign_buckets, bucket_members
from compressors.exchange_plan import Collective, ExchangePlan, Law, Round  # noqa: F401  (re-exported)
from compressors.ops import Array, Key, Ops

State = Any
Payload = Any


class Keys(NamedTuple):
    """Randomness for one step: ``worker`` differs between workers and steps
    (stochastic rounding), ``shared`` is the same on every worker and new
    every step (random-k indices), ``fixed`` is the same on every worker *and
    every step* of a run (hash functions of a sketch that is accumulated
    across steps). The runner folds each leaf's index into all three."""

    worker: Key
    shared: Key
    fixed: Key


FIXED_DATUM = 0xFFFFFFFF  # fixed = fold_in(key(seed), FIXED_DATUM); no step is 2**32 - 1


def make_keys(ops: Ops, seed: int, step: int, rank: int = 0) -> Keys:
    """The keys every driver uses: shared = fold_in(key(seed), step),
    worker = fold_in(shared, rank + 1), fixed = fold_in(key(seed), 2**32 - 1)
    (the step is not in it)."""
    root = ops.key(seed)
    shared = ops.fold_in(root, step)
    return Keys(ops.fold_in(shared, rank + 1), shared, ops.fold_in(root, FIXED_DATUM))


def fold_keys(ops: Ops, keys: Keys, data: int) -> Keys:
    """Derive independent keys for a sub-part (leaf, block, round)."""
    return Keys(*(ops.fold_in(k, data) for k in keys))


class Leaf(NamedTuple):
    """The per-tensor protocol a compressor author writes.

    init(ops, x) -> state
    encode(ops, x, state, keys, received, r) -> (payload, state)
    local(ops, x, state, own, received) -> x_hat of this worker's payloads
    decode(ops, x, state, own, received, n) -> (mean estimate, state)
    plan(shape, dtype) -> tuple[Round, ...]
    residual(ops, x, state, own, received) -> x - local(...)   (optional)

    Every round's ``encode`` runs before ``local``, ``residual`` and
    ``decode``, which see the state the last encode returned. ``residual``
    is what error feedback keeps; a leaf gives it when it can compute it in
    fewer passes than ``x - local(...)`` (PowerSGD: one fused pass).
    """

    init: Callable[..., State]
    encode: Callable[..., tuple[Payload, State]]
    local: Callable[..., Array]
    decode: Callable[..., tuple[Array, State]]
    plan: Callable[[tuple, Any], tuple[Round, ...]]
    residual: Callable[..., Array] | None = None


class Compressor(NamedTuple):
    """An immutable compressor.

    ``spec`` is its canonical spec string (``compressors.parse`` reads it
    back); ``for_leaf(shape, dtype)`` picks the :class:`Leaf` protocol for a
    tensor (filters use this to leave small tensors alone); ``at(step)``
    returns the compressor in force at a training step (warm-up and DGC's
    sparsity schedule change the payload shape, so a driver re-plans when
    ``phase(step)`` changes). ``unbiased``/``contractive`` state the
    compressor's contract; ``doc`` is a one-line description. ``paths``
    (per-tensor plans, ``compressors.paths``) pairs tensor path names
    (``compressors.state.path_name``: ``w1``, ``layers/0/w``) with the
    compressor used on that tensor, ``"*"`` with the one for all others.
    """

    spec: str
    for_leaf: Callable[[tuple, Any], Leaf]
    at: Callable[[int], "Compressor"] | None = None
    phase: Callable[[int], Any] | None = None
    unbiased: bool = False
    contractive: bool = False
    doc: str = ""
    paths: tuple = ()  # ((path name, Compressor), ...)

    # -- static metadata -----------------------------------------------------
    def plan(self, shape: Sequence[int], dtype: Any = np.float32) -> tuple[Round, ...]:
        """Rounds (law, exact wire bits) this compressor uses on one tensor."""
        shape = tuple(int(s) for s in shape)
        return tuple(self.leaf(shape, dtype).plan(shape, np.dtype(dtype)))

    def wire_bits(self, shape: Sequence[int], dtype: Any = np.float32) -> int:
        """Total bits one worker sends for one tensor, all rounds together."""
        return sum(r.bits for r in self.plan(shape, dtype))

    def rounds(self, shape: Sequence[int], dtype: Any = np.float32) -> int:
        return len(self.plan(shape, dtype))

    def ratio(self, shape: Sequence[int], dtype: Any = np.float32) -> float:
        """Compression ratio against the dense tensor in its own dtype."""
        dense = math.prod(shape) * np.dtype(dtype).itemsize * 8
        bits = self.wire_bits(shape, dtype)
        return dense / bits if bits else math.inf

    def step(self, step: int) -> "Compressor":
        """The compressor in force at ``step`` (itself unless scheduled)."""
        return self.at(step) if self.at is not None else self

    def phase_of(self, step: int) -> Any:
        """A hashable that changes exactly when ``step(step)`` changes."""
        return self.phase(step) if self.phase is not None else 0

    def leaf(self, shape: Sequence[int], dtype: Any = np.float32) -> Leaf:
        """``for_leaf(shape, dtype)``, but :data:`EMPTY` for a tensor with no
        elements (``for_leaf`` still runs: what it rejects stays rejected)."""
        shape, dtype = tuple(int(s) for s in shape), np.dtype(dtype)
        leaf = self.for_leaf(shape, dtype)
        return EMPTY if math.prod(shape) == 0 else leaf

    def at_path(self, name: str) -> "Compressor":
        """The compressor this one uses on the tensor at path ``name`` (itself
        unless it is a per-tensor plan: then the one named for the path, else ``"*"``'s)."""
        table = dict(self.paths)
        return table.get(name, table.get("*", self))

    def _leaf_at(self, name: str, x: Any) -> Leaf:
        return self.at_path(name).leaf(tuple(int(d) for d in x.shape), x.dtype)

    # -- whole pytrees -----------------------------------------------------------
    def leaves(self, tree: Any) -> tuple[list, Any, list[Leaf]]:
        """(flattened leaves, treedef, the Leaf protocol of each)."""
        flat, treedef, names = _flatten_named(tree)
        return flat, treedef, [self._leaf_at(n, x) for n, x in zip(names, flat)]

    def tree_plan(self, tree: Any) -> list[tuple[Round, ...]]:
        """Per leaf (flattened order), its rounds."""
        flat, _, protos = self.leaves(tree)
        return [p.plan(tuple(x.shape), np.dtype(x.dtype)) for x, p in zip(flat, protos)]

    def n_rounds(self, tree: Any) -> int:
        return max((len(p) for p in self.tree_plan(tree)), default=0)

    def exchange_plan(self, tree: Any, bucket_bytes: float = DEFAULT_BUCKET_BYTES) -> "ExchangePlan":
        """The whole exchange of a pytree (arrays or anything with shape and
        dtype): per-leaf rounds, the DDP buckets, and one :class:`Collective`
        per bucket, round and law — what every driver, the simulator and the
        run records read their bytes from."""
        flat, _, names = _flatten_named(tree)
        plans = tuple(self._leaf_at(n, x).plan(tuple(int(d) for d in x.shape), np.dtype(x.dtype))
                      for n, x in zip(names, flat))
        dense = [math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in flat]
        buckets = bucket_members(assign_buckets(dense, bucket_bytes)) if flat else ()
        calls = []
        for r in range(max((len(p) for p in plans), default=0)):
            for b, members in enumerate(buckets):
                for law in Law:
                    ids = tuple(i for i in members if r < len(plans[i]) and plans[i][r].law is law)
                    if ids:
                        calls.append(Collective(b, r, law, ids, sum(plans[i][r].bits for i in ids)))
        return ExchangePlan(plans, buckets, tuple(calls))

    def payload_bytes(self, tree: Any, workers: int = 1) -> int:
        """Bytes one of ``workers`` hands to the collectives per exchange (all leaves,
        all rounds; a gathered payload counts once, as its sender's share)."""
        return self.exchange_plan(tree).payload_bits_at(workers) // 8

    def init(self, ops: Ops, tree: Any) -> State:
        """Fresh state for a pytree of gradients: the same pytree structure with
        each leaf's state (a NamedTuple, or ``()``) in that leaf's place."""
        flat, treedef, protos = self.leaves(tree)
        return _unflatten(treedef, [p.init(ops, x) for x, p in zip(flat, protos)])


def _flatten_named(tree: Any):
    """(leaves, treedef, the path name of each leaf, as compressors.state names it)."""
    import jax.tree_util as jtu  # pytree flattening only; no JAX arrays needed

    from compressors.state import path_name

    pairs, treedef = jtu.tree_flatten_with_path(tree)
    return [leaf for _, leaf in pairs], treedef, [path_name(p) for p, _ in pairs]


def _unflatten(treedef, leaves):
    import jax.tree_util as jtu

    return jtu.tree_unflatten(treedef, leaves)


# ---------------------------------------------------------------------------
# Helpers compressor authors use
# ---------------------------------------------------------------------------

def compute_dtype(dtype: Any) -> np.dtype:
    """Compressors compute in float64 for float64 input, else float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def upcast(ops: Ops, x: Array) -> Array:
    return ops.astype(x, compute_dtype(x.dtype))


def dtype_bits(dtype: Any) -> int:
    return np.dtype(dtype).itemsize * 8


def words(count: int, bits: int) -> int:
    """uint32 words ``ops.pack_bits`` uses for ``count`` codes of ``bits``."""
    per = 32 // bits
    return -(-count // per)


def tree_index(payload: Payload, i: int) -> Payload:
    """Worker i's payload out of a gathered (stacked) payload."""
    if isinstance(payload, tuple) and not hasattr(payload, "shape"):
        return type(payload)(*(tree_index(p, i) for p in payload)) if hasattr(payload, "_fields") \
            else tuple(tree_index(p, i) for p in payload)
    return payload[i]


def single_round(
    *,
    law: Law,
    bits: Callable[[tuple, Any], int],
    compress: Callable[..., tuple[Payload, State]],
    decompress: Callable[..., Array],
    init: Callable[..., State] | None = None,
    aggregate: Callable[..., Array] | None = None,
    stateful: bool = False,
) -> Leaf:
    """Build a one-round :class:`Leaf` from the familiar pair.

    compress(ops, x, state, keys) -> (payload, state)
    decompress(ops, payload, x) -> x_hat (x gives shape and dtype)
    aggregate(ops, received, x, n) -> mean estimate; defaults to
    ``decompress(sum)/n`` for SUM and the mean of the decompressed payloads
    for GATHER.

    ``stateful=True`` gives the decoding side the state ``compress``
    returned: ``decompress(ops, payload, x, state) -> x_hat`` and
    ``aggregate(ops, received, x, n, state) -> (mean estimate, new state)``
    (indices kept for decoding, an accumulator that decode updates).
    """

    def _init(ops, x):
        return init(ops, x) if init is not None else ()

    def encode(ops, x, state, keys, received, r):
        return compress(ops, x, state, keys)

    def unpack(ops, payload, x, state):
        return decompress(ops, payload, x, state) if stateful else decompress(ops, payload, x)

    def local(ops, x, state, own, received):
        return unpack(ops, own[0], x, state)

    def decode(ops, x, state, own, received, n):
        if aggregate is not None:
            if stateful:
                return aggregate(ops, received[0], x, n, state)
            return aggregate(ops, received[0], x, n), state
        if law is Law.SUM:
            return mean_of(ops, unpack(ops, received[0], x, state), n), state
        total = unpack(ops, tree_index(received[0], 0), x, state)
        for i in range(1, n):
            total = total + unpack(ops, tree_index(received[0], i), x, state)
        return mean_of(ops, total, n), state

    def plan(shape, dtype):
        return (Round(law, int(bits(shape, dtype))),)

    return Leaf(_init, encode, local, decode, plan)


_nothing = lambda ops, x, *rest: ops.zeros(tuple(x.shape), x.dtype)  # noqa: E731
EMPTY = Leaf(lambda ops, x: (), lambda ops, x, s, keys, received, r: ((), s), _nothing,
             lambda ops, x, s, own, received, n: (_nothing(ops, x), s), lambda shape, dtype: (), _nothing)
"""Every compressor's protocol on a tensor with no elements: no rounds, no
wire bits, no state, an empty mean of its shape and dtype — one definition,
so NumPy, JAX and the MindSpore lowering (whose kernels fail on zero-size
operands) agree, and no codec op ever sees an empty array."""


def mean_of(ops: Ops, total: Array, n: int) -> Array:
    """total * (1/n) in the compute dtype, cast back to total's dtype.

    A multiplication by the rounded reciprocal, not a division: XLA rewrites
    division by a constant that way, so every backend must, to agree bit
    for bit."""
    if n == 1:
        return total
    return ops.astype(upcast(ops, total) * (1.0 / n), total.dtype)


def fixed(leaf: Leaf):
    """A ``for_leaf`` that uses one Leaf for every tensor."""
    return lambda shape, dtype: leaf


def check(cond: bool, message: str) -> None:
    """Raise the ValueError every bad compressor parameter gets."""
    if not cond:
        raise ValueError(message)
