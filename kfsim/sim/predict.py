"""Public entry points of the timing simulator.

``predict_iteration`` — one synchronous data-parallel iteration (closed-form
collectives, DDP bucket pipeline, codec costs; optionally the flow-level
network), cached so a training loop may call it every step.
``simulate_async`` — the order in which gradients are applied under
asynchronous / bounded-staleness training (simpy).
``sweep`` — vectorised closed-form sweeps for the CLI.
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from kfsim.catalog import Cluster
from kfsim.sim import algorithms
from kfsim.sim.compute import compute_time
from kfsim.sim.events import AppliedUpdate, simulate_async, simulate_sync  # noqa: F401  (re-exported)
from kfsim.sim.exchange_cost import bucket_cost, tensor_plan
from kfsim.sim.inputs import as_cluster, as_compressor, as_model, model_arrays, with_precision  # noqa: F401
from kfsim.sim.pipeline import Breakdown, schedule

NETWORKS = ("analytical", "flow")


def predict_iteration(model, cluster, compressor="none", workers: int | None = None, *,
                      batch_per_worker: int | None = None, collective: str | None = None,
                      bucket_mb: float = 25.0, overlap: bool = True, step: int | None = None,
                      interference: float | None = None, network: str = "analytical",
                      precision: str | None = None) -> Breakdown:
    """Time of one synchronous iteration and its breakdown.

    model: catalog name or :class:`ModelProfile`; cluster: :class:`Cluster`,
    profile file path or "seed"; compressor: spec string or Compressor (at
    ``step`` if given: warm-up/DGC schedules); workers: default the cluster's
    size; collective: default the cluster's (ring, tree, rhd, hierarchical,
    ps, mccl); network: "analytical" (closed forms) or "flow" (flow-level
    max-min sharing on the cluster's topology); precision: the run's (mixed, fp32, tf32, fp16,
    bf16; default the cluster's) picks the device peak compute is priced at.
    """
    m = as_model(model)
    cl = with_precision(as_cluster(cluster), precision)
    comp = as_compressor(compressor, step)
    p = cl.workers if workers is None else int(workers)
    if p < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    batch = m.batch if batch_per_worker is None else int(batch_per_worker)
    if batch < 1:
        raise ValueError(f"batch_per_worker must be >= 1, got {batch_per_worker}")
    coll = algorithms.check_name(collective or cl.collective)
    if not (bucket_mb > 0):
        raise ValueError(f"bucket_mb must be > 0, got {bucket_mb}")
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {NETWORKS}, got {network!r}")
    lam = cl.interference if interference is None else float(interference)
    if lam < 1:
        raise ValueError(f"interference must be >= 1, got {lam}")
    return _predict(m, cl, comp, p, batch, coll, float(bucket_mb), bool(overlap), lam, network)




@functools.lru_cache(maxsize=8192)
def _predict(m, cl, comp, p, batch, coll, bucket_mb, overlap, lam, network) -> Breakdown:
    comm_fn = None
    if network == "flow":
        from kfsim.sim.network import flow_comm_fn
        comm_fn = flow_comm_fn(cl, coll)
    return _iteration(m, cl, comp, p, batch, coll, bucket_mb, overlap, lam, comm_fn)


@functools.lru_cache(maxsize=1024)
def _priced_plan(comp, shapes: tuple, cl: Cluster, names: tuple | None = None):
    """The model's TensorPlan with per-tensor codec seconds on ``cl``'s device (independent of
    p: decode is priced as fixed part + p × per-payload part inside ``bucket_cost``)."""
    return tensor_plan(comp, shapes, cluster=cl, names=names)


def _iteration(m, cl, comp, p, batch, coll, bucket_mb, overlap, lam, comm_fn=None) -> Breakdown:
    """Compute + bucket exchange costs → the pipeline schedule."""
    ct = compute_time(m, cl, batch)
    ids, ready = model_arrays(m, bucket_mb)
    plan = _priced_plan(comp, m.tensor_shapes, cl, m.tensor_names)
    plan.check_workers(p, comp.spec)
    ov = cl.overheads
    bc = bucket_cost(plan, ids, p, coll, algorithms.net_params(cl), comm_fn, ov.collective_s)
    if p == 1:  # nothing to exchange, nothing to encode
        z = np.zeros_like(bc.comm)
        return schedule(ct.fwd, ct.bwd, ct.opt, ready, z, z, z, overlap=overlap, interference=lam,
                        bytes_per_worker=0.0, rounds=bc.rounds, workers=1)
    return schedule(ct.fwd, ct.bwd, ct.opt, ready, bc.enc, bc.comm, bc.dec, overlap=overlap,
                    interference=lam, bytes_per_worker=float(bc.bytes_sent.sum()), rounds=bc.rounds,
                    workers=p, wire_bytes_per_worker=float(bc.wire.sum()),
                    hook=np.bincount(ids, minlength=len(bc.comm)) * ov.tensor_s, fixed=ov.step_s)


def predict_shared(model, cluster, compressor, jobs: Sequence[int], *, placement: str = "packed",
                   seed: int = 0, collective: str | None = None, **kw) -> list[Breakdown]:
    """Several data-parallel jobs (worker counts ``jobs``) sharing the cluster's
    network: each job's ring steps run while every other job's do (the
    steady-state worst case), bandwidth shared max-min per flow. Returns one
    :class:`Breakdown` per job. ``placement``: packed | interleaved | random."""
    from kfsim.sim.network import job_placements, ring_comm_fn, shared_step_times
    cl = as_cluster(cluster)
    coll = algorithms.check_name(collective or cl.collective)
    if coll not in ("ring", "mccl"):
        raise ValueError(f"shared networks are modelled for the ring and mccl collectives, not {coll!r}")
    net, hosts = job_placements(cl, jobs, placement, seed)
    units = shared_step_times(net, hosts, echo=coll == "mccl")
    m = as_model(model)
    comp = as_compressor(compressor, kw.pop("step", None))
    batch = kw.pop("batch_per_worker", None) or m.batch
    bucket_mb = float(kw.pop("bucket_mb", 25.0))
    overlap = bool(kw.pop("overlap", True))
    if kw:
        raise ValueError(f"unexpected arguments: {sorted(kw)}")
    return [_iteration(m, cl, comp, w, batch, coll, bucket_mb, overlap, cl.interference,
                       ring_comm_fn(cl, lambda p, u=u: u, echo=coll == "mccl"))
            for w, u in zip(jobs, units)]


def predict_stragglers(model, cluster, compressor, workers: int, compute, *, iterations: int = 10,
                       seed: int = 0, collective: str | None = None, bucket_mb: float = 25.0,
                       step: int | None = None) -> Breakdown:
    """Mean bucketed iteration when each worker's forward+backward time is drawn
    from ``compute`` (a distribution ``rng -> seconds``, see
    :mod:`kfsim.sim.distributions`, or one per worker): events per bucket and
    worker (:func:`kfsim.sim.events.simulate_iteration`); every bucket's
    exchange waits for its slowest worker, so T_iter follows the max."""
    from kfsim.sim.distributions import per_worker, worker_rngs
    from kfsim.sim.events import simulate_iteration
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    m = as_model(model)
    cl = as_cluster(cluster)
    comp = as_compressor(compressor, step)
    coll = algorithms.check_name(collective or cl.collective)
    ids, ready = model_arrays(m, float(bucket_mb))
    plan = _priced_plan(comp, m.tensor_shapes, cl, m.tensor_names)
    bc = bucket_cost(plan, ids, workers, coll, algorithms.net_params(cl))
    ct = compute_time(m, cl, m.batch)
    dists = per_worker(compute, workers)
    rngs = worker_rngs(seed, workers)
    runs = []
    for _ in range(iterations):
        t = np.array([d(r) for d, r in zip(dists, rngs)])
        runs.append(simulate_iteration(t / 3.0, 2.0 * t / 3.0, ct.opt, ready, bc.enc, bc.comm, bc.dec,
                                       interference=cl.interference, bytes_per_worker=float(bc.bytes_sent.sum()),
                                       rounds=bc.rounds))
    mean = np.mean(np.array([r[:6] for r in runs]), axis=0)
    return Breakdown(*[float(x) for x in mean], runs[0].bytes_per_worker, runs[0].buckets, runs[0].rounds, workers,
                     float(bc.wire.sum()) if workers > 1 else 0.0)


def single_worker_time(model, cluster, batch_per_worker: int | None = None) -> float:
    """Iteration time of one worker alone (the scaling-efficiency reference)."""
    m = as_model(model)
    ct = compute_time(m, as_cluster(cluster), m.batch if batch_per_worker is None else batch_per_worker)
    return ct.total


def payload_bytes(model, compressor, step: int | None = None, workers: int = 1) -> float:
    """Payload bytes of one worker per iteration (all tensors, all rounds): the
    compressor's encoded size, independent of the collective and of p but for
    a shard round's 1/p share (``workers``). The bytes on the wire are
    ``predict_iteration(...).wire_bytes_per_worker``."""
    m = as_model(model)
    plan = tensor_plan(as_compressor(compressor, step), m.tensor_shapes, names=m.tensor_names)
    return plan.payload_at(int(workers))


def wire_bytes(model, compressor, step: int | None = None) -> float:
    """Old name of :func:`payload_bytes` (it always returned the payload, not traffic)."""
    return payload_bytes(model, compressor, step)


def sweep(model, cluster, compressor, workers: Sequence[int], bandwidths: Sequence[float] | None = None,
          **kw) -> np.ndarray:
    """Total iteration time over workers (× inter-node bandwidths in bytes/s, if given), vectorised
    (:func:`kfsim.sim.sweep.sweep_grid`; keyword arguments as :func:`predict_iteration`). The
    flow-level network (or a collective that is not affine in the message size) is not a closed
    form: then one :func:`predict_iteration` per configuration.

    Returns an array of shape (len(workers),) or (len(bandwidths), len(workers))."""
    from kfsim.sim.sweep import sweep_grid
    cl = as_cluster(cluster)
    comp = as_compressor(compressor, kw.pop("step", None))
    try:
        out = sweep_grid([as_model(model)], cl, [comp], workers, bandwidths, **kw)[0, 0]
        return out[0] if bandwidths is None else out
    except NotImplementedError:
        pass
    if bandwidths is None:
        return np.array([predict_iteration(model, cl, comp, w, **kw).total_s for w in workers])
    out = np.zeros((len(bandwidths), len(workers)))
    for i, bw in enumerate(bandwidths):
        c = cl._replace(inter=cl.inter._replace(bandwidth=float(bw)))
        for j, w in enumerate(workers):
            out[i, j] = predict_iteration(model, c, comp, w, **kw).total_s
    return out
