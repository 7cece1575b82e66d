"""The cost of one compressed exchange, from a compressor's plan and its op program.

For each tensor the compressor's ``plan(shape, dtype)`` lists its rounds:
``Round(Law.SUM, bits)`` is an all-reduce of ``bits`` per worker,
``Round(Law.GATHER, bits)`` an all-gather where each rank contributes
``bits`` (a ``shard`` round: bits/p), ``Round(Law.MAX, bits)`` an all-reduce
with max (priced as SUM), ``Round(Law.SCATTER, bits)`` an all-to-all of
``bits`` per rank (``algorithms.alltoall``). Tensors of one DDP bucket (``compressors.buckets``) travel
together: round r of a bucket is one all-reduce of the summed SUM bytes plus
one all-gather of the summed GATHER bytes (shard rounds' bytes / p) plus one
all-to-all of the summed SCATTER bytes. The bucket's exchange time is
(collectives.md)

    T_b = T_enc,b + Σ_r [ T_AR(n_sum,r) + T_AG(m_gather,r) + T_A2A(m_scatter,r) ] + T_dec,b,
    T_enc,b = Σ_{t ∈ b} T_enc(t),   T_dec,b = Σ_{t ∈ b} max(T_dec(t) + p · T_dec1(t), 0)

with T_enc(t), T_dec(t) and T_dec1(t) (decode per gathered payload) the
seconds of tensor t's own encode/decode program on the cluster's device
(:mod:`kfsim.sim.codec`); multi-round compressors such as PowerSGD simply
have two SUM rounds. Tensors the compressor leaves dense (``none()``, a
filter's identity path, a warm-up's dense phase: one SUM round of the full
tensor whose program is at most the 1/n scaling of the sum,
:func:`is_dense_exchange`) cost no encode/decode: the averaging is the
all-reduce's own.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from compressors.buckets import assign_buckets  # noqa: F401  (DDP layout; re-exported)
from compressors.core import Law
from kfsim.sim import algorithms
from kfsim.sim.codec import decode_seconds, rates, tensor_codec


class TensorPlan(NamedTuple):
    """Per tensor (arrays of length T, in forward order; rounds as columns)."""

    dense_bytes: np.ndarray        # (T,)
    sum_bytes: np.ndarray          # (T, R)
    gather_bytes: np.ndarray       # (T, R)
    coded: np.ndarray              # (T,) bool: compressor does work on it (not a dense all-reduce)
    enc_s: np.ndarray | None = None            # (T,) encode seconds (None: not priced, no cluster given)
    dec_s: np.ndarray | None = None            # (T,) decode seconds, fixed part
    dec_per_worker_s: np.ndarray | None = None  # (T,) decode seconds per gathered payload (× p)
    max_workers: int = 0           # integer sums have headroom for at most this many workers (0: any)
    scatter_bytes: np.ndarray | None = None    # (T, R) all-to-all bytes per rank (None: no SCATTER round)
    shard_bytes: np.ndarray | None = None      # (T, R) shard-round all-gather bytes of the whole (÷ p per rank)
    dec_one_s: np.ndarray | None = None        # (T,) decode seconds of a lone worker's own payload (p = 1)

    def gather_at(self, p) -> np.ndarray:
        """(T, R) all-gather bytes each of p ranks contributes (shard rounds: ⌈1/p⌉ of theirs)."""
        return self.gather_bytes if self.shard_bytes is None else self.gather_bytes + self.shard_bytes / p

    def dec_at(self, p: int) -> np.ndarray:
        """(T,) decode seconds for p workers (a priced plan): ``TensorCodec.decode(p)``."""
        return decode_seconds(self.dec_s, self.dec_per_worker_s, self.dec_one_s, p)

    def payload_at(self, p) -> float:
        """Payload bytes one of p workers hands to the collectives per exchange."""
        a2a = 0.0 if self.scatter_bytes is None else float(self.scatter_bytes.sum())
        return float(self.sum_bytes.sum() + self.gather_at(p).sum()) + a2a

    def check_workers(self, p: int, spec: str = "the compressor") -> None:
        """The ValueError for p workers beyond the plan's integer headroom."""
        if self.max_workers and p > self.max_workers:
            raise ValueError(f"{spec} sums integer codes with headroom for at most {self.max_workers} "
                             f"workers, not {p} (raise its workers= parameter)")


class BucketCost(NamedTuple):
    """Per bucket (arrays of length B), times in seconds for p workers."""

    comm: np.ndarray
    enc: np.ndarray
    dec: np.ndarray
    bytes_sent: np.ndarray         # payload bytes per worker (plan bits / 8), not traffic
    rounds: int
    wire: np.ndarray | None = None  # bytes on one worker's link for the collective used (algorithms.wire_bytes)


@functools.lru_cache(maxsize=4096)
def _leaf_plan(comp, shape: tuple, dtype: str):
    return comp.plan(shape, np.dtype(dtype))


def tensor_names(shapes, names=None) -> tuple:
    """The tensors' path names: ``names``, or their forward indices "0", "1", ..."""
    if names is None:
        return tuple(str(t) for t in range(len(shapes)))
    if len(names) != len(shapes):
        raise ValueError(f"{len(names)} tensor names for {len(shapes)} tensors")
    return tuple(names)


def tensor_plan(comp, shapes, dtype: str = "float32", cluster=None, names=None) -> TensorPlan:
    """Stack ``comp.plan`` over tensors (cached per distinct shape); with a
    ``cluster``, also each coded tensor's encode/decode seconds on its device
    (traced once per distinct shape, :func:`kfsim.sim.codec.tensor_codec`).
    A per-tensor plan (``comp.paths``) prices tensor t with the compressor it
    names for ``names[t]`` (:func:`tensor_names`)."""
    shapes = [tuple(int(d) for d in s) for s in shapes]
    comps = [comp.at_path(n) for n in tensor_names(shapes, names)] if comp.paths else [comp] * len(shapes)
    plans = [_leaf_plan(c, s, dtype) for c, s in zip(comps, shapes)]
    R = max((len(p) for p in plans), default=1) or 1
    T = len(plans)
    item = np.dtype(dtype).itemsize
    dense = np.array([math.prod(s) * item for s in shapes], dtype=np.float64)
    sb, gb, ab, hb = (np.zeros((T, R)) for _ in range(4))
    coded = np.ones(T, dtype=bool)
    cap = min((r.max_workers for p in plans for r in p if r.max_workers), default=0)
    for t, plan in enumerate(plans):
        for r, rnd in enumerate(plan):
            if rnd.law in (Law.SUM, Law.MAX):   # MAX: an all-reduce with max instead of +
                sb[t, r] = rnd.bits / 8.0
            elif rnd.law == Law.GATHER:
                (hb if rnd.shard else gb)[t, r] = rnd.bits / 8.0
            elif rnd.law == Law.SCATTER:
                ab[t, r] = rnd.bits / 8.0
            else:
                raise ValueError(f"unknown aggregation law {rnd.law!r} in plan of {comp.spec}")
        if len(plan) == 1 and plan[0].law == Law.SUM and plan[0].bits == dense[t] * 8:
            coded[t] = not is_dense_exchange(comps[t], shapes[t], dtype)
    extra = dict(scatter_bytes=ab if ab.any() else None, shard_bytes=hb if hb.any() else None)
    if cluster is None:
        return TensorPlan(dense, sb, gb, coded, max_workers=cap, **extra)
    r = rates(cluster)
    dt = np.dtype(dtype).name
    cost = np.zeros((4, T))
    for t, s in enumerate(shapes):
        if coded[t]:
            cost[:, t] = tensor_codec(comps[t], s, dt, r)
    return TensorPlan(dense, sb, gb, coded, cost[0], cost[1], cost[2], cap, **extra, dec_one_s=cost[3])


def is_dense_exchange(comp, shape: tuple, dtype: str = "float32") -> bool:
    """Is ``comp``'s program on this tensor the dense all-reduce's — an empty encode (the gradient
    is the payload) and a decode of at most the one elementwise 1/n scaling of the sum? (Asked
    only of tensors whose plan is one SUM round of the whole tensor in its own dtype.)"""
    from compressors.cost import codec_cost
    from kfsim.sim.codec import reference_ops
    cc = codec_cost(comp, shape, dtype, reference_ops())
    return (cc.encode.n_ops == 0 and cc.decode_per_worker.n_ops == 0 and not cc.decode_per_worker.entries
            and cc.decode.n_ops <= 1 and all(c.cls == "elementwise" for c, _ in cc.decode.entries))


def bucket_cost(plan: TensorPlan, bucket_ids: np.ndarray, p: int, collective: str,
                net: algorithms.NetParams, comm_fn=None, call_s: float = 0.0) -> BucketCost:
    """Per-bucket exchange time for p workers (``plan`` priced: ``tensor_plan(..., cluster=)``);
    each collective call that carries bytes also pays ``call_s`` (``Overheads.collective_s``).

    ``comm_fn(kind, p, nbytes)`` (kind "allreduce"/"allgather") replaces the
    closed forms (the flow-level network uses it)."""
    if plan.enc_s is None:
        raise ValueError("bucket_cost needs a priced TensorPlan: tensor_plan(comp, shapes, cluster=cluster)")
    B = int(bucket_ids.max()) + 1 if len(bucket_ids) else 0
    R = plan.sum_bytes.shape[1]
    sums, gath, scat = np.zeros((B, R)), np.zeros((B, R)), np.zeros((B, R))
    np.add.at(sums, bucket_ids, plan.sum_bytes)
    np.add.at(gath, bucket_ids, plan.gather_at(p))
    if plan.scatter_bytes is not None:
        np.add.at(scat, bucket_ids, plan.scatter_bytes)
    enc = np.zeros(B)
    dec = np.zeros(B)
    np.add.at(enc, bucket_ids, plan.enc_s)
    np.add.at(dec, bucket_ids, plan.dec_at(p))
    if comm_fn is None:
        ar = algorithms.allreduce(collective, p, sums, net)
        ag = algorithms.allgather(collective, p, gath, net)
    else:
        ar = comm_fn("allreduce", p, sums)
        ag = comm_fn("allgather", p, gath)
    a2a = algorithms.alltoall(collective, p, scat, net)    # closed form also under the flow-level network
    ar = np.where(sums > 0, ar + call_s, 0.0)
    ag = np.where(gath > 0, ag + call_s, 0.0)
    a2a = np.where(scat > 0, a2a + call_s, 0.0)
    comm = (ar + ag + a2a).sum(axis=1)
    sent = sums.sum(axis=1) + gath.sum(axis=1) + scat.sum(axis=1)
    g = net.gpus_per_node
    wire = sum(algorithms.wire_bytes(collective, kind, p, x, g, net.servers).sum(axis=1)
               for kind, x in (("allreduce", sums), ("allgather", gath), ("alltoall", scat)))
    return BucketCost(comm, enc, dec, sent, R, wire)


def exchange_time(comp, shapes, p: int, cluster, collective: str | None = None) -> float:
    """One exchange of the whole model as a single bucket, no overlap:
    T_enc + Σ_r [T_AR + T_AG] + T_dec, each collective call with its overhead (the closed form
    the pipeline reproduces with one bucket, plus the per-tensor and per-step overheads)."""
    plan = tensor_plan(comp, shapes, cluster=cluster)
    ids = np.zeros(len(shapes), dtype=np.int64)
    bc = bucket_cost(plan, ids, p, collective or cluster.collective, algorithms.net_params(cluster),
                     call_s=cluster.overheads.collective_s)
    return float(bc.comm.sum() + bc.enc.sum() + bc.dec.sum())
