"""The exchange runner: the one place that drives a compressor's rounds.

Every life of a compressor runs its exchange through :func:`run` — the
reference exchange (``compressors.exchange``), simulated training (N workers
in one process, looped or ``vmap``-ed), the conformance suite, and the
MindSpore lowering (a traced communicator that emits the collectives). For
one step of a pytree of gradients:

    for r in rounds:
        every local worker:  payload_i, state_i = encode_i(x_i, state_i, keys_i, received[:r], r)
        every bucket b, law L:  received[r][leaves of b with law L in round r]
                                   = comm.sum(payloads)     (L = SUM)
                                   = comm.gather(payloads)  (L = GATHER)
                                   = comm.max(payloads)     (L = MAX)
    every local worker:  mean, state = decode(x, state, own payloads, received, n)

Buckets are the compressor's :meth:`~compressors.core.Compressor.exchange_plan`
(DDP's layout, cap 25 MiB by default); a communicator is called once per
bucket, round and law with the payload arrays of all the bucket's leaves, and
may fuse them into one flat buffer (:func:`fuse` / :func:`split`).

*Workers* say how the local workers are held:

* :data:`LOOP` — a Python list of per-worker pytrees (one entry: a real
  worker in its own process; n entries: n simulated workers);
* :data:`VMAP` — one pytree whose leaves carry a leading worker axis; encode
  and decode run as one ``jax.vmap`` over it.

A communicator's ``sum``/``gather`` take a list of payload arrays in the
workers' form (LOOP: per array, the list of the local workers' arrays; VMAP:
per array, the stacked array) and return, per array, what every worker
receives: the rank-order sum ((p_0 + p_1) + p_2 ...) for SUM, the payloads
stacked on a new leading worker axis for GATHER, the elementwise maximum for
MAX (a communicator without ``max`` serves a MAX round as a gather and a
maximum over the worker axis). :class:`Loopback` and
:class:`StackedLoopback` compute that in process.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol, Sequence

import numpy as np

from compressors.buckets import DEFAULT_BUCKET_BYTES
from compressors.core import Compressor, ExchangePlan, Keys, Law, fold_keys
from compressors.ops import Array, Ops


class Communicator(Protocol):
    """What the runner needs from a communication layer."""

    n: int  # workers in the whole job

    def sum(self, ops: Ops, arrays: list) -> list: ...

    def gather(self, ops: Ops, arrays: list) -> list: ...

    # optional: def max(self, ops: Ops, arrays: list) -> list  (elementwise maximum)


# ---------------------------------------------------------------------------------------------
# Worker strategies
# ---------------------------------------------------------------------------------------------

class Loop:
    """Local workers as a Python list (one per worker)."""

    name = "loop"

    def count(self, grads: Sequence) -> int:
        return len(grads)

    def first(self, tree_list: Sequence) -> Any:
        return tree_list[0]

    def map(self, fn: Callable, *per_worker: Sequence) -> list:
        """``[fn(a_w, b_w, ...) for each worker w]``."""
        return [self.call(w, fn, *args) for w, args in enumerate(zip(*per_worker))]

    def call(self, w: int, fn: Callable, *args):
        return fn(*args)

    def column(self, per_worker: list, i: int) -> list:
        """Leaf i of every worker's list of leaves."""
        return [leaves[i] for leaves in per_worker]

    def flatten_payload(self, column: list) -> tuple[list, Any]:
        """A leaf's payload pytree (per worker) -> (arrays in the workers' form, treedef)."""
        import jax.tree_util as jtu

        flat = [jtu.tree_flatten(p) for p in column]
        treedef = flat[0][1]
        return [[f[0][j] for f in flat] for j in range(len(flat[0][0]))], treedef

    def split_states(self, states: Sequence, treedef) -> list:
        return [treedef.flatten_up_to(s) for s in states]

    def join(self, treedef, per_worker_leaves: list) -> list:
        import jax.tree_util as jtu

        return [jtu.tree_unflatten(treedef, leaves) for leaves in per_worker_leaves]

    def loopback(self, n: int) -> "Loopback":
        return Loopback(n)


class Vmap(Loop):
    """Local workers stacked on a leading axis of every leaf; one ``jax.vmap``."""

    name = "vmap"

    def count(self, grads: Any) -> int:
        import jax.tree_util as jtu

        return int(jtu.tree_leaves(grads)[0].shape[0])

    def first(self, stacked: Any) -> Any:
        import jax
        import jax.tree_util as jtu

        return jtu.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), stacked)

    def map(self, fn: Callable, *stacked: Any):
        import jax

        return jax.vmap(fn)(*stacked)

    def column(self, stacked_leaves: list, i: int):
        return stacked_leaves[i]

    def flatten_payload(self, stacked: Any) -> tuple[list, Any]:
        import jax.tree_util as jtu

        return jtu.tree_flatten(stacked)

    def split_states(self, states: Any, treedef) -> list:
        return treedef.flatten_up_to(states)

    def join(self, treedef, stacked_leaves: list):
        import jax.tree_util as jtu

        return jtu.tree_unflatten(treedef, stacked_leaves)

    def loopback(self, n: int) -> "StackedLoopback":
        return StackedLoopback(n)


LOOP = Loop()
VMAP = Vmap()
STRATEGIES = {"loop": LOOP, "vmap": VMAP}


# ---------------------------------------------------------------------------------------------
# In-process communicators
# ---------------------------------------------------------------------------------------------

def rank_order_sum(values: Sequence) -> Any:
    """((v_0 + v_1) + v_2) + ...: the order every backend and collective must match."""
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total


def gather_max(ops: Ops, comm: "Communicator", arrays: list) -> list:
    """A MAX round through ``comm.max``, or as a gather and a maximum over the
    worker axis where the communicator has no ``max`` (the maximum is exact
    in any order)."""
    if hasattr(comm, "max"):
        return comm.max(ops, arrays)
    return [ops.max(g, axis=0) if g.size else g[0] for g in comm.gather(ops, arrays)]


class Loopback:
    """All n workers in this process, held as lists (the reference semantics)."""

    def __init__(self, n: int):
        self.n = n

    def sum(self, ops: Ops, arrays: list) -> list:
        return [rank_order_sum(a) for a in arrays]

    def gather(self, ops: Ops, arrays: list) -> list:
        if self.n == 1:  # a leading axis of one: a view, not a copy
            return [ops.reshape(a[0], (1,) + tuple(a[0].shape)) for a in arrays]
        return [ops.stack(a) for a in arrays]

    def max(self, ops: Ops, arrays: list) -> list:
        return [_rank_order_max(ops, a) for a in arrays]


def _rank_order_max(ops: Ops, values: Sequence) -> Any:
    total = values[0]
    for v in values[1:]:
        total = ops.maximum(total, v)
    return total


class StackedLoopback:
    """All n workers in this process, stacked on a leading axis (under vmap)."""

    def __init__(self, n: int):
        self.n = n

    def sum(self, ops: Ops, arrays: list) -> list:
        return [rank_order_sum([a[w] for w in range(a.shape[0])]) for a in arrays]

    def gather(self, ops: Ops, arrays: list) -> list:
        return list(arrays)  # already what an all-gather delivers

    def max(self, ops: Ops, arrays: list) -> list:
        return [_rank_order_max(ops, [a[w] for w in range(a.shape[0])]) for a in arrays]


# ---------------------------------------------------------------------------------------------
# Fusing a bucket's payloads into flat buffers
# ---------------------------------------------------------------------------------------------

class Segment(NamedTuple):
    """Where one payload array lives in its fused buffer."""

    buffer: int
    offset: int
    shape: tuple


def fuse(ops: Ops, arrays: Sequence[Array]) -> tuple[list[Array], list[Segment]]:
    """Flatten and concatenate arrays into one flat buffer per dtype (in order of
    first appearance); empty arrays take no room. Returns (buffers, segments)."""
    order: list = []
    parts: dict = {}
    segs = []
    for a in arrays:
        dt = np.dtype(a.dtype)
        if dt not in parts:
            order.append(dt)
            parts[dt] = []
        pos = sum(int(p.size) for p in parts[dt])
        segs.append(Segment(order.index(dt), pos, tuple(a.shape)))
        if a.size:
            parts[dt].append(ops.reshape(a, (-1,)))
    bufs = []
    for dt in order:
        ps = parts[dt]
        bufs.append(ps[0] if len(ps) == 1 else ops.concatenate(ps) if ps else ops.zeros((0,), dt))
    return bufs, segs


def split(ops: Ops, buffers: Sequence[Array], segments: Sequence[Segment], lead: tuple = ()) -> list[Array]:
    """The arrays back out of received buffers; ``lead`` is the leading shape the
    communicator added (``(n,)`` after a gather, ``()`` after a sum)."""
    out = []
    for seg in segments:
        size = int(np.prod(seg.shape, dtype=np.int64))
        buf = buffers[seg.buffer]
        window = (slice(None),) * len(lead) + (slice(seg.offset, seg.offset + size),)
        part = buf[window] if size else ops.zeros(lead + (0,), buf.dtype)
        out.append(ops.reshape(part, lead + seg.shape))
    return out


# ---------------------------------------------------------------------------------------------
# The runner
# ---------------------------------------------------------------------------------------------

class RoundLog(NamedTuple):
    """What happened in one round (``record=True``): per worker, per leaf, the
    payload it sent (None: no round r for that leaf); per leaf, what every
    worker received."""

    sent: list
    received: list


class Result(NamedTuple):
    mean: Any               # the mean-gradient estimate, as worker 0 decodes it (same on all)
    states: Any             # new states in the workers' form
    plan: ExchangePlan      # the static exchange (buckets, collectives, bits)
    log: list | None        # per round, a RoundLog (record=True), else None


def run(ops: Ops, comp: Compressor, grads: Any, states: Any, keys: Any, comm: Communicator | None = None,
        *, workers: Loop = LOOP, bucket_bytes: float = DEFAULT_BUCKET_BYTES, record: bool = False) -> Result:
    """One exchange step of ``comp`` for the local workers.

    ``grads``/``states``/``keys`` are in the workers' form (LOOP: lists, one
    entry per local worker; VMAP: stacked pytrees); ``comm`` defaults to the
    in-process loopback over the local workers (then n = their count).
    Returns the mean as worker 0 decodes it and the new states (same form).
    """
    template = workers.first(grads)
    plan = comp.exchange_plan(template, bucket_bytes)
    flat, treedef, protos = comp.leaves(template)
    comm = workers.loopback(workers.count(grads)) if comm is None else comm
    n = comm.n
    plan.check_workers(n)
    g_leaves = workers.split_states(grads, treedef)
    s_leaves = workers.split_states(states, treedef)
    rounds = [len(p) for p in plan.leaf_rounds]
    received: list[list] = []
    own: list = []
    log: list[RoundLog] | None = [] if record else None

    for r in range(plan.n_rounds):
        before = list(received)

        def encode(g, s, k, r=r, before=before):
            pays, new = [], []
            for i, proto in enumerate(protos):
                if r < rounds[i]:
                    pay, si = proto.encode(ops, g[i], s[i], fold_keys(ops, k, i),
                                           tuple(rec[i] for rec in before), r)
                else:
                    pay, si = None, s[i]
                pays.append(pay)
                new.append(si)
            return pays, new

        out = workers.map(encode, g_leaves, s_leaves, keys)
        pays, s_leaves = _unzip(workers, out)
        own.append(pays)
        rec: list = [None] * len(protos)
        for call in plan.collectives:
            if call.round != r:
                continue
            arrays, index = [], []
            for i in call.leaves:
                arrs, pdef = workers.flatten_payload(workers.column(pays, i))
                index.append((i, pdef, len(arrays), len(arrs)))
                arrays.extend(arrs)
            if call.law is Law.SUM:
                got = comm.sum(ops, arrays)
            elif call.law is Law.GATHER:
                got = comm.gather(ops, arrays)
            else:
                got = gather_max(ops, comm, arrays)
            for i, pdef, start, count in index:
                rec[i] = _unflatten(pdef, got[start:start + count])
        received.append(rec)
        if log is not None:
            log.append(RoundLog(pays, rec))

    def decode(g, s, mine):
        outs, new = [], []
        for i, proto in enumerate(protos):
            k = rounds[i]
            y, si = proto.decode(ops, g[i], s[i], tuple(m[i] for m in mine[:k]),
                                 tuple(rec[i] for rec in received[:k]), n)
            outs.append(y)
            new.append(si)
        return outs, new

    if isinstance(workers, Vmap):
        import jax.tree_util as jtu

        means, s_leaves = workers.map(decode, g_leaves, s_leaves, own)
        mean = jtu.tree_map(lambda a: a[0], _unflatten(treedef, means))
    else:
        mine = [[own[r][w] for r in range(len(own))] for w in range(len(g_leaves))]
        means, s_leaves = _unzip(workers, workers.map(decode, g_leaves, s_leaves, mine))
        mean = _unflatten(treedef, means[0])
    return Result(mean, workers.join(treedef, s_leaves), plan, log)


def _unzip(workers: Loop, out):
    if isinstance(workers, Vmap):
        return out[0], out[1]
    return [o[0] for o in out], [o[1] for o in out]


def _unflatten(treedef, leaves):
    import jax.tree_util as jtu

    return jtu.tree_unflatten(treedef, list(leaves))
