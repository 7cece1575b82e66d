"""The cost of one compressed exchange, from a compressor's plan.

For each tensor the compressor's ``plan(shape, dtype)`` lists its rounds:
``Round(Law.SUM, bits)`` is an all-reduce of ``bits`` per worker,
``Round(Law.GATHER, bits)`` an all-gather where each rank contributes
``bits``. Tensors of one DDP bucket travel together: round r of a bucket is
one all-reduce of the summed SUM bytes plus one all-gather of the summed
GATHER bytes. The bucket's exchange time is (collectives.md)

    T_b = T_enc + Σ_r [ T_AR(n_sum,r) + T_AG(m_gather,r) ] + T_dec,
    T_enc = n_dense·c_enc,   T_dec = n_dense·c_dec + p·m_gather·c_gather

(multi-round compressors such as PowerSGD simply have two SUM rounds).
Tensors the compressor leaves dense (filters: the identity path, one SUM
round of the full tensor) cost no encode/decode.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from compressors.core import Law
from kfsim.sim import algorithms
from kfsim.sim.codec import codec_cost


class TensorPlan(NamedTuple):
    """Per tensor (arrays of length T, in forward order; rounds as columns)."""

    dense_bytes: np.ndarray        # (T,)
    sum_bytes: np.ndarray          # (T, R)
    gather_bytes: np.ndarray       # (T, R)
    coded: np.ndarray              # (T,) bool: compressor does work on it


class BucketCost(NamedTuple):
    """Per bucket (arrays of length B), times in seconds for p workers."""

    comm: np.ndarray
    enc: np.ndarray
    dec: np.ndarray
    bytes_sent: np.ndarray         # bytes one worker puts on the wire (payload bits / 8)
    rounds: int


@functools.lru_cache(maxsize=4096)
def _leaf_plan(comp, shape: tuple, dtype: str):
    return comp.plan(shape, np.dtype(dtype))


def tensor_plan(comp, shapes, dtype: str = "float32") -> TensorPlan:
    """Stack ``comp.plan`` over tensors (cached per distinct shape)."""
    plans = [_leaf_plan(comp, tuple(int(d) for d in s), dtype) for s in shapes]
    R = max((len(p) for p in plans), default=1) or 1
    T = len(plans)
    item = np.dtype(dtype).itemsize
    dense = np.array([math.prod(s) * item for s in shapes], dtype=np.float64)
    sb = np.zeros((T, R))
    gb = np.zeros((T, R))
    coded = np.ones(T, dtype=bool)
    for t, plan in enumerate(plans):
        for r, rnd in enumerate(plan):
            if rnd.law == Law.SUM:
                sb[t, r] = rnd.bits / 8.0
            elif rnd.law == Law.GATHER:
                gb[t, r] = rnd.bits / 8.0
            else:
                raise ValueError(f"unknown aggregation law {rnd.law!r} in plan of {comp.spec}")
        if len(plan) == 1 and plan[0].law == Law.SUM and plan[0].bits == dense[t] * 8:
            coded[t] = False
    return TensorPlan(dense, sb, gb, coded)


def assign_buckets(dense_bytes: np.ndarray, cap_bytes: float) -> np.ndarray:
    """DDP bucketing (Li et al. 2020): walk tensors in *backward* order
    (last defined first), close a bucket once it reaches ``cap_bytes``.
    Returns, per tensor in forward order, its bucket id (0 = first ready)."""
    if cap_bytes <= 0:
        raise ValueError(f"bucket_mb must be > 0, got {cap_bytes / 2**20}")
    T = len(dense_bytes)
    ids = np.zeros(T, dtype=np.int64)
    b, fill = 0, 0.0
    for t in range(T - 1, -1, -1):
        if fill > 0 and fill + dense_bytes[t] > cap_bytes:
            b, fill = b + 1, 0.0
        ids[t] = b
        fill += dense_bytes[t]
    return ids


def bucket_cost(plan: TensorPlan, bucket_ids: np.ndarray, p: int, collective: str,
                net: algorithms.NetParams, codec, comm_fn=None) -> BucketCost:
    """Per-bucket exchange time for p workers.

    ``comm_fn(kind, p, nbytes)`` (kind "allreduce"/"allgather") replaces the
    closed forms (the flow-level network uses it)."""
    B = int(bucket_ids.max()) + 1 if len(bucket_ids) else 0
    R = plan.sum_bytes.shape[1]
    sums = np.zeros((B, R))
    gath = np.zeros((B, R))
    np.add.at(sums, bucket_ids, plan.sum_bytes)
    np.add.at(gath, bucket_ids, plan.gather_bytes)
    coded_dense = np.zeros(B)
    np.add.at(coded_dense, bucket_ids, np.where(plan.coded, plan.dense_bytes, 0.0))
    if comm_fn is None:
        ar = algorithms.allreduce(collective, p, sums, net)
        ag = algorithms.allgather(collective, p, gath, net)
    else:
        ar = comm_fn("allreduce", p, sums)
        ag = comm_fn("allgather", p, gath)
    ar = np.where(sums > 0, ar, 0.0)
    ag = np.where(gath > 0, ag, 0.0)
    comm = (ar + ag).sum(axis=1)
    enc = coded_dense * codec.enc
    dec = coded_dense * codec.dec + (p * gath.sum(axis=1)) * codec.gather
    sent = sums.sum(axis=1) + gath.sum(axis=1)
    return BucketCost(comm, enc, dec, sent, R)


def exchange_time(comp, shapes, p: int, cluster, collective: str | None = None) -> float:
    """One exchange of the whole model as a single bucket, no overlap:
    T_enc + Σ_r [T_AR + T_AG] + T_dec (the closed form the pipeline must
    reproduce with one bucket)."""
    plan = tensor_plan(comp, shapes)
    ids = np.zeros(len(shapes), dtype=np.int64)
    bc = bucket_cost(plan, ids, p, collective or cluster.collective, algorithms.net_params(cluster),
                     codec_cost(comp.spec, cluster))
    return float(bc.comm.sum() + bc.enc.sum() + bc.dec.sum())
