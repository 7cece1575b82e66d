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
                                   = comm.scatter(payloads) (L = SCATTER: each worker its own parts)
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
maximum over the worker axis). ``scatter`` (an all-to-all, needed only by
compressors with SCATTER rounds) returns, per array, what *each* local
worker receives, in the workers' form (``compressors.communicators``).
:class:`Loopback` and :class:`StackedLoopback` compute all of it in process.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol, Sequence

from compressors.buckets import DEFAULT_BUCKET_BYTES
from compressors.communicators import (Loopback, Segment, StackedLoopback, all_to_all, fuse,  # noqa: F401
                                       gather_max, rank_order_sum, scatter_parts, shard_rows, split)
from compressors.core import Compressor, ExchangePlan, Keys, Law, fold_keys
from compressors.ops import Ops


class Communicator(Protocol):
    """What the runner needs from a communication layer."""

    n: int  # workers in the whole job

    def sum(self, ops: Ops, arrays: list) -> list: ...

    def gather(self, ops: Ops, arrays: list) -> list: ...

    # optional: def max(self, ops: Ops, arrays: list) -> list  (elementwise maximum)
    # optional: def scatter(self, ops: Ops, arrays: list) -> list  (all-to-all; per local worker)


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

    def private(self, rounds: list, count: int) -> list:
        """Per local worker: per round, per leaf, what only that worker received (a SCATTER
        round's parts; None elsewhere), out of ``rounds`` held in the workers' form."""
        return [[[v if v is None else v[w] for v in leaves] for leaves in rounds] for w in range(count)]

    def unflatten_each(self, pdef, arrays: list, count: int) -> list:
        """A SCATTER leaf's received arrays (per array, per local worker) as each worker's pytree."""
        return [_unflatten(pdef, [a[w] for a in arrays]) for w in range(count)]


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

    def private(self, rounds: list, count: int) -> list:
        return rounds   # stacked over the workers already: vmap hands each its row

    def unflatten_each(self, pdef, arrays: list, count: int):
        return _unflatten(pdef, arrays)


LOOP = Loop()
VMAP = Vmap()
STRATEGIES = {"loop": LOOP, "vmap": VMAP}


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
    count = workers.count(grads)
    received: list[list] = []   # per round, per leaf: what every worker received (None: not shared)
    private: list[list] = []    # per round, per leaf: a SCATTER round's parts, in the workers' form
    own: list = []
    log: list[RoundLog] | None = [] if record else None

    for r in range(plan.n_rounds):
        before = list(received)

        def encode(g, s, k, mine, r=r, before=before):
            got = _merged(before, mine)
            pays, new = [], []
            for i, proto in enumerate(protos):
                if r < rounds[i]:
                    pay, si = proto.encode(ops, g[i], s[i], fold_keys(ops, k, i),
                                           tuple(rec[i] for rec in got), r)
                else:
                    pay, si = None, s[i]
                pays.append(pay)
                new.append(si)
            return pays, new

        out = workers.map(encode, g_leaves, s_leaves, keys, workers.private(private, count))
        pays, s_leaves = _unzip(workers, out)
        own.append(pays)
        rec: list = [None] * len(protos)
        prv: list = [None] * len(protos)
        for call in plan.collectives:
            if call.round != r:
                continue
            arrays, index = [], []
            for i in call.leaves:
                arrs, pdef = workers.flatten_payload(workers.column(pays, i))
                index.append((i, pdef, len(arrays), len(arrs)))
                arrays.extend(arrs)
            if call.law is Law.SCATTER:
                if not hasattr(comm, "scatter"):
                    raise ValueError(f"compressor {comp.spec!r} has all-to-all (scatter) rounds; the "
                                     f"communicator {type(comm).__name__} has no scatter")
                got = comm.scatter(ops, arrays)
                for i, pdef, start, size in index:
                    prv[i] = workers.unflatten_each(pdef, got[start:start + size], count)
                continue
            if call.law is Law.SUM:
                got = comm.sum(ops, arrays)
            elif call.law is Law.GATHER:
                got = comm.gather(ops, arrays)
            else:
                got = gather_max(ops, comm, arrays)
            for i, pdef, start, size in index:
                rec[i] = _unflatten(pdef, got[start:start + size])
        received.append(rec)
        private.append(prv)
        if log is not None:
            log.append(RoundLog(pays, _merged([rec], [prv])[0]))

    def decode(g, s, mine, priv):
        got = _merged(received, priv)
        outs, new = [], []
        for i, proto in enumerate(protos):
            k = rounds[i]
            y, si = proto.decode(ops, g[i], s[i], tuple(m[i] for m in mine[:k]),
                                 tuple(rec[i] for rec in got[:k]), n)
            outs.append(y)
            new.append(si)
        return outs, new

    privs = workers.private(private, count)
    if isinstance(workers, Vmap):
        import jax.tree_util as jtu

        means, s_leaves = workers.map(decode, g_leaves, s_leaves, own, privs)
        mean = jtu.tree_map(lambda a: a[0], _unflatten(treedef, means))
    else:
        mine = [[own[r][w] for r in range(len(own))] for w in range(len(g_leaves))]
        means, s_leaves = _unzip(workers, workers.map(decode, g_leaves, s_leaves, mine, privs))
        mean = _unflatten(treedef, means[0])
    return Result(mean, workers.join(treedef, s_leaves), plan, log)


def _merged(shared: list, mine: list) -> list:
    """Per round, per leaf: this worker's private value where it has one, else the shared one."""
    return [[b if p is None else p for b, p in zip(bl, pl)] for bl, pl in zip(shared, mine)]


def _unzip(workers: Loop, out):
    if isinstance(workers, Vmap):
        return out[0], out[1]
    return [o[0] for o in out], [o[1] for o in out]


def _unflatten(treedef, leaves):
    import jax.tree_util as jtu

    return jtu.tree_unflatten(treedef, list(leaves))
