"""Trace one exchange step of a compressor into a program: the runner with a traced communicator.

``trace_exchange`` runs :func:`compressors.protocol.run` on tracing ops:
``comm="collective"`` — one worker per process with :class:`TracedCollective`
(each bucket's payloads fused per round and law: one AllReduce per dtype for
SUM, one AllGather of 32-bit words for GATHER and for bf16, see below); ``comm="loopback"`` — all n workers in one program with the
runner's in-process loopback.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import ml_dtypes
import numpy as np

from backends.mindspore.trace import LoweringError, Program, TracingOps, Var
from compressors import protocol
from compressors.buckets import DEFAULT_BUCKET_BYTES
from compressors.core import FIXED_DATUM, Compressor, Keys

BF16 = np.dtype(ml_dtypes.bfloat16)

# ---------------------------------------------------------------------------------------------
# Tracing a whole exchange
# ---------------------------------------------------------------------------------------------

class Traced(NamedTuple):
    prog: Program
    grads: list            # per local worker: list of input Vars (flattened leaves)
    state_in: list         # per local worker: list of input Vars (flattened state)
    step: Var
    means: list            # [output Vars of the mean (flattened leaves), as worker 0 decodes it]
    state_out: list        # per local worker: output Vars
    state_tree: Any
    plan: Any              # the compressor's ExchangePlan (buckets, collectives, bits)


def _flat(tree):
    import jax.tree_util as jtu
    return jtu.tree_flatten(tree)


def trace_init(comp: Compressor, avals, who: str):
    """Program: grads -> fresh state (flattened)."""
    prog = Program(who)
    ops = TracingOps(prog)
    grads = tuple(prog.input(s, d) for s, d in avals)
    state = comp.init(ops, grads)
    leaves, tree = _flat(state)
    for leaf in leaves:
        if not isinstance(leaf, Var):
            raise LoweringError(f"{who}: state leaf {leaf!r} is not an array (state must be arrays)")
    return prog, list(leaves), tree


class TracedWorkers(protocol.Loop):
    """The runner's LOOP workers, each with its own counter of random call
    sites (fast RNG seeds a draw by rank and site, so worker w's k-th draw is
    the same whether it is traced alone or beside the others)."""

    def __init__(self, prog: Program, count: int):
        self.prog, self.sites = prog, [0] * count

    def call(self, w, fn, *args):
        self.prog.rng_sites = self.sites[w]
        try:
            return fn(*args)
        finally:
            self.sites[w] = self.prog.rng_sites


class TracedCollective:
    """The communicator of a traced worker: per bucket, round and law the
    payloads are fused into one flat buffer per dtype (``protocol.fuse``); a
    SUM or MAX round sends each buffer as one ``comm_sum`` (AllReduce) or
    ``comm_max`` equation, a GATHER round (and any round holding bf16) all of
    them as one ``comm_gather`` (AllGather) of 32-bit words, each payload at its
    own width; empty buffers are not sent."""

    def __init__(self, prog: Program, n: int, rank: int = 0):
        self.prog, self.n, self.rank = prog, n, rank

    def _collect(self, ops, arrays, op: str, lead: tuple):
        bufs, segs = protocol.fuse(ops, [a[0] for a in arrays])
        live = [b for b in bufs if b.size]
        if op != "comm_gather" and not any(b.dtype == BF16 for b in live):  # SUM, MAX: per dtype
            got = iter(self.prog.bind(op, (b,), {"n": self.n}) for b in live)
        else:  # one AllGather of 32-bit words for the whole bucket and round
            got = iter(self._as_words(ops, live, op))
        out = [next(got) if b.size else ops.zeros(lead + (0,), b.dtype) for b in bufs]
        return protocol.split(ops, out, segs, lead)

    def _as_words(self, ops, bufs, op: str) -> list:
        """Every buffer as 32-bit words (bit patterns; bf16 and 8/16-bit codes packed two
        or four to a word: they travel at their own width), concatenated, one AllGather,
        and back per worker; a SUM or MAX round then adds (takes the maximum) in rank
        order, as the reference loopback does. 64-bit buffers are gathered as they are."""
        words = [_to_words(ops, b) for b in bufs]
        packed = [w for w in words if w is not None]
        if len(packed) > 1:
            cat = ops.concatenate(packed, axis=0)
        got, offset, out = None, 0, []
        if packed:
            got = self.prog.bind("comm_gather", (cat if len(packed) > 1 else packed[0],), {"n": self.n})
        for b, w in zip(bufs, words):
            if w is None:
                rows = self.prog.bind("comm_gather", (b,), {"n": self.n})
                rows = [rows[i] for i in range(self.n)]
            else:
                size = int(w.shape[0])
                rows = [_from_words(ops, got[i][offset:offset + size], b.dtype, int(b.shape[0]))
                        for i in range(self.n)]
                offset += size
            out.append(ops.stack(rows) if op == "comm_gather" else _rank_order(ops, rows, op))
        return out

    def sum(self, ops, arrays):
        return self._collect(ops, arrays, "comm_sum", ())

    def gather(self, ops, arrays):
        return self._collect(ops, arrays, "comm_gather", (self.n,))

    def max(self, ops, arrays):
        return self._collect(ops, arrays, "comm_max", ())

    def scatter(self, ops, arrays):
        """A SCATTER round as one AllGather of the parts (``protocol.scatter_parts``) and this
        rank's part of each row: the all-to-all's result, at the all-gather's traffic (MindSpore's
        AlltoAll is Ascend-only; the simulator prices ``mccl``'s all-to-all as its all-gather)."""
        rows = [ops.stack(protocol.scatter_parts(ops, a[0], self.n)) for a in arrays]   # (n, S, ...)
        got = self.gather(ops, [[r] for r in rows])                                    # (n, n, S, ...)
        return [[g[:, self.rank]] for g in got]


def _to_words(ops, b):
    """A flat buffer as uint32 words of its bit patterns (None: 64-bit, not packed)."""
    bits = np.dtype(b.dtype).itemsize * 8
    if bits == 64:
        return None
    if b.dtype == np.bool_:
        return ops.pack_bits(ops.astype(b, np.uint32), 8)
    if bits == 32:
        return b if b.dtype == np.uint32 else ops.bitcast(b, np.uint32)
    u = ops.astype(ops.bitcast(b, np.dtype(f"uint{bits}")), np.uint32)
    return ops.pack_bits(u, bits)


def _from_words(ops, w, dtype, count: int):
    dtype = np.dtype(dtype)
    bits = dtype.itemsize * 8
    if dtype == np.bool_:
        return ops.astype(ops.unpack_bits(w, 8, count), np.bool_)
    if bits == 32:
        return w if dtype == np.uint32 else ops.bitcast(w, dtype)
    return ops.bitcast(ops.astype(ops.unpack_bits(w, bits, count), np.dtype(f"uint{bits}")), dtype)


def _rank_order(ops, rows, op: str):
    total = rows[0]
    for row in rows[1:]:
        total = ops.add(total, row) if op == "comm_sum" else ops.maximum(total, row)
    return total


def trace_exchange(comp: Compressor, avals, *, n: int, ranks: Sequence[int], seed: int, comm: str,
                   who: str, bucket_bytes: float = DEFAULT_BUCKET_BYTES) -> Traced:
    """Trace one step of the protocol (the runner) for the local workers ``ranks``."""
    if comm not in ("collective", "loopback"):
        raise ValueError(f"comm must be 'collective' or 'loopback', got {comm!r}")
    _, init_leaves, tree = trace_init(comp, avals, who)
    prog = Program(who)
    ops = TracingOps(prog)
    grads = [tuple(prog.input(s, d) for s, d in avals) for _ in ranks]
    state_in = [[prog.input(v.shape, v.dtype) for v in init_leaves] for _ in ranks]
    states = [_unflat(tree, s) for s in state_in]
    step = prog.input((), np.int32)
    shared = ops.fold_in(ops.key(seed), step)
    shared.origin = ("shared",)
    fixed = ops.fold_in(ops.key(seed), FIXED_DATUM)  # a constant: no step in it
    fixed.origin = ("fixed",)
    keys = []
    for r in ranks:
        w = ops.fold_in(shared, r + 1)
        w.origin = ("worker", r)
        keys.append(Keys(w, shared, fixed))
    communicator = protocol.Loopback(n) if comm == "loopback" else TracedCollective(prog, n, ranks[0])
    res = protocol.run(ops, comp, grads, states, keys, communicator,
                       workers=TracedWorkers(prog, len(ranks)), bucket_bytes=bucket_bytes)
    means, outs = [list(_flat(res.mean)[0])], []
    for st in res.states:
        sleaves, stree = _flat(st)
        if stree != tree:
            raise LoweringError(f"{who}: decode returned a state of another structure ({stree} vs {tree})")
        outs.append(list(sleaves))
    return Traced(prog, [list(g) for g in grads], state_in, step, means, outs, tree, res.plan)


def _unflat(tree, leaves):
    import jax.tree_util as jtu
    return jtu.tree_unflatten(tree, leaves)
