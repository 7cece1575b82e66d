"""Vectorised closed-form sweeps: iteration time over models × compressors × bandwidths × workers.

:func:`sweep_grid` gives ``predict_iteration(model, cluster', compressor, p, **kw).total_s`` (cluster'
= ``cluster`` with its inter-node bandwidth replaced) for every combination, as one array of shape
(models, compressors, bandwidths, workers), without a Python loop over configurations:

* per (model, compressor) — once, cached: compute times, the DDP bucket layout and each bucket's
  summed SUM / GATHER bytes, encode and decode seconds (the priced plan ``tensor_plan``);
* per (bandwidth, workers) — once per call, shared by every model and compressor: every named
  collective is affine in the message size on each round it runs (``T(n) = A + S·n`` for n > 0, 0
  for n = 0; checked at run time), so A and S for all-reduce and all-gather come from two
  evaluations of the closed forms (:mod:`kfsim.sim.algorithms`) over the (bandwidth, workers) grid,
  and a bucket's exchange is ``Σ_r [n_r>0]·A + S·Σ_r n_r`` (all-to-all alike; a shard round's
  all-gather bytes n contribute S·n/p) — the cumulative communication of all buckets of all
  configurations is one matrix product (B × 7) @ (7 × configs);
* the DDP pipeline (:func:`kfsim.sim.pipeline.schedule`) over a trailing configuration axis:
  the serial-chain recurrences run bucket by bucket on vectors of configurations
  (:func:`_chain_end`, the kernel :func:`schedule_batch` shares and tests against ``schedule``).

Results equal ``predict_iteration`` to rounding (≈1e-15 relative; tests ask 1e-12). The flow-level
network (``network="flow"``) is not a closed form: ``sweep_grid`` raises NotImplementedError and
:func:`kfsim.sim.predict.sweep` falls back to ``predict_iteration`` per configuration (so does it
for a future collective that is not affine in the message size). This module sits below
``predict`` (no import circle); both normalise their inputs with :mod:`kfsim.sim.inputs`.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple, Sequence

import numpy as np

from kfsim.catalog import ModelProfile
from kfsim.sim import algorithms
from kfsim.sim.codec import decode_seconds
from kfsim.sim.compute import compute_time
from kfsim.sim.exchange_cost import tensor_plan
from kfsim.sim.inputs import as_cluster, as_compressor, as_model, model_arrays, with_precision

NETWORKS = ("analytical", "flow")

_BLOCK = 1 << 17          # bucket × configuration elements per block (fits the L2/L3 caches)
_VEC = 1 << 13            # configurations per vector operation


def _chain_end(r, C, bwd_end, Dprev=None, D_last=0.0):
    """End of the last decode (``d[-1]`` of :func:`pipeline.schedule`), bucket-major.

    r: (B, ...) encode-done times; C: (B, ...) cumulative comm times (``cumsum(comm)``), or a
    function (k0, k1) → its rows k0:k1 (computed block by block, to stay in cache); Dprev: (B, ...)
    cumulative decode before bucket k (broadcast against C[k]), None when all decodes are 0. The
    same max/add sequence as ``schedule``'s two ``serial_chain`` calls:
    e_k = C_k + max_{j≤k}(r_j − C_{j−1}),  end = D_last + max_k(max(e_k, bwd_end) − Dprev_k)."""
    rows = C if callable(C) else (lambda k0, k1: C[k0:k1])
    B = len(r)
    first = rows(0, 1) if B else np.zeros((1,) + np.shape(C)[1:])
    shape = first.shape[1:]
    if B == 0:
        return np.broadcast_to(np.asarray(bwd_end, dtype=np.float64) + D_last, shape).copy()
    m = np.array(np.broadcast_to(r[0], shape), dtype=np.float64)   # r_0 − C_{−1} = r_0 − 0
    tmp = np.empty(shape)
    best = None
    step = max(1, _BLOCK // max(1, math.prod(shape)))
    prev = None
    for k0 in range(0, B, step):
        Cb = first if k0 == 0 and step == 1 else rows(k0, min(B, k0 + step))
        for i in range(len(Cb)):
            k = k0 + i
            if k:
                np.subtract(r[k], prev, out=tmp)
                np.maximum(m, tmp, out=m)
            prev = Cb[i]
            if Dprev is None and k < B - 1:
                continue        # no decodes: e is non-decreasing, only its last value matters
            np.add(Cb[i], m, out=tmp)                    # e_k
            np.maximum(tmp, bwd_end, out=tmp)
            if Dprev is None:
                best = tmp
            else:
                np.subtract(tmp, Dprev[k], out=tmp)
                if best is None:
                    best = tmp.copy()
                else:
                    np.maximum(best, tmp, out=best)
    return D_last + best


def schedule_batch(fwd: float, bwd: float, opt: float, bucket_ready_frac, enc, comm, dec, *,
                   overlap: bool = True, interference: float = 1.0) -> np.ndarray:
    """``pipeline.schedule(...).total_s`` for N configurations at once.

    enc, comm, dec: (N, B) (or broadcastable to it); bucket_ready_frac: (B,). Returns (N,), equal
    to the scalar schedule run on each row."""
    comm = np.asarray(comm, dtype=np.float64)
    enc, dec = (np.broadcast_to(np.asarray(x, dtype=np.float64), comm.shape) for x in (enc, dec))
    if comm.ndim != 2:
        raise ValueError(f"comm must be (configurations, buckets), got shape {comm.shape}")
    codec = enc.sum(axis=1) + dec.sum(axis=1)
    csum = comm.sum(axis=1)
    if not overlap:
        return (fwd + bwd + opt) + codec + csum
    b = np.where(csum > 0, interference, 1.0) * bwd
    ready = np.asarray(bucket_ready_frac, dtype=np.float64)
    r = (b[:, None] * ready + np.cumsum(enc, axis=1)).T
    C = np.ascontiguousarray(np.cumsum(comm, axis=1).T)
    D = np.cumsum(dec, axis=1)
    Dprev = np.concatenate([np.zeros((len(D), 1)), D[:, :-1]], axis=1).T
    B = comm.shape[1]
    end = _chain_end(r, C, b + enc.sum(axis=1), Dprev, D[:, -1] if B else 0.0)
    return fwd + end + opt


class _Group(NamedTuple):
    """What one (model, compressor) contributes, independent of workers and bandwidth."""

    fwd: float
    bwd: float
    opt: float
    ready: np.ndarray       # (B,)
    cum_enc: np.ndarray     # (B,) cumsum(enc)
    enc_sum: float
    M: np.ndarray           # (7, B): rounds with SUM bytes, SUM bytes, rounds with GATHER bytes, GATHER bytes,
    #                         rounds with SCATTER bytes, SCATTER bytes, shard-round GATHER bytes (÷ p)
    ids: np.ndarray         # (T,) bucket of each tensor
    dec_s: np.ndarray       # (T,) fixed decode seconds
    dec_pw: np.ndarray      # (T,) decode seconds per gathered payload
    dec_one: np.ndarray     # (T,) decode seconds of one worker alone (p = 1)
    max_bytes: float
    max_workers: int        # integer-sum headroom of the plan (0: any)


@functools.lru_cache(maxsize=1024)
def _group(m, cl, comp, batch: int, bucket_mb: float) -> _Group:
    ct = compute_time(m, cl, batch)
    ids, ready = model_arrays(m, bucket_mb)
    ready = ready.copy()
    B = len(ready)
    plan = tensor_plan(comp, m.tensor_shapes, cluster=cl, names=m.tensor_names)  # priced: codec seconds per tensor
    R = plan.sum_bytes.shape[1]
    sums, gath, scat, shard = (np.zeros((B, R)) for _ in range(4))
    enc = np.zeros(B)
    np.add.at(sums, ids, plan.sum_bytes)            # as exchange_cost.bucket_cost
    np.add.at(gath, ids, plan.gather_bytes)
    for to, x in ((scat, plan.scatter_bytes), (shard, plan.shard_bytes)):
        if x is not None:
            np.add.at(to, ids, x)
    np.add.at(enc, ids, plan.enc_s)
    enc += np.bincount(ids, minlength=B) * cl.overheads.tensor_s     # per-tensor hooks (pipeline's ``hook``)
    M = np.stack([(sums > 0).sum(axis=1), sums.sum(axis=1), (gath + shard > 0).sum(axis=1), gath.sum(axis=1),
                  (scat > 0).sum(axis=1), scat.sum(axis=1), shard.sum(axis=1)]).astype(np.float64)
    for a in (ready, M):
        a.flags.writeable = False
    return _Group(ct.fwd, ct.bwd, ct.opt, ready, np.cumsum(enc), float(enc.sum()), M, ids,
                  plan.dec_s, plan.dec_per_worker_s, plan.dec_one_s,
                  float(max(x.max(initial=0.0) for x in (sums, gath, scat, shard))), plan.max_workers)


def _decodes(g: _Group, p: np.ndarray):
    """Per-bucket decode seconds for each worker count: (W, B), or (1, B) if independent of p."""
    B = len(g.ready)
    if not g.dec_pw.any() and (np.all(p == 1) or not np.any(p == 1)):
        p = p[:1]
    x = decode_seconds(g.dec_s, g.dec_pw, g.dec_one, p[:, None])
    dec = np.zeros((len(p), B))
    np.add.at(dec, (slice(None), g.ids), x)
    return dec


def _affine(coll: str, p, net, nmax: float):
    """(A, S) of all-reduce, all-gather and all-to-all over the grid (T(n) = A + S·n for n > 0),
    and S/p of the all-gather (a shard round's bytes n: each rank contributes n/p)."""
    n1 = 2.0 ** math.ceil(math.log2(max(nmax, 1.0)))
    out = []
    for fn in (algorithms.allreduce, algorithms.allgather, algorithms.alltoall):
        a = np.asarray(fn(coll, p, 0.0, net), dtype=np.float64)
        s = (np.asarray(fn(coll, p, n1, net), dtype=np.float64) - a) / n1
        mid = np.asarray(fn(coll, p, n1 / 4, net))
        if not np.allclose(a + s * (n1 / 4), mid, rtol=1e-9, atol=0.0):
            raise NotImplementedError(f"collective {coll!r} is not affine in the message size")
        out += [np.broadcast_to(a, np.broadcast_shapes(a.shape, s.shape)), s]
    return out + [out[3] / p]


def _group_totals(g: _Group, coef: np.ndarray, p: np.ndarray, overlap: bool, lam: float) -> np.ndarray:
    """Totals (K, W) for one group; coef (7, K, W) = A_ar, S_ar, A_ag, S_ag, A_a2a, S_a2a, S_ag/p."""
    K, W = coef.shape[1:]
    dec = _decodes(g, p)                        # (W or 1, B)
    csum = np.tensordot(g.M.sum(axis=1), coef, axes=1)       # Σ_b comm_b, (K, W)
    out = np.empty((K, W))
    if not overlap:
        codec = g.enc_sum + dec.sum(axis=1)
        out[:] = (g.fwd + g.bwd + g.opt) + codec + csum
        return out
    b = lam * g.bwd
    r = b * g.ready + g.cum_enc
    bwd_end = b + g.enc_sum
    D = np.cumsum(dec, axis=1)
    D_last = D[:, -1]                                         # (W or 1,)
    Dprev = None
    if D_last.any():
        Dprev = np.concatenate([np.zeros((len(D), 1)), D[:, :-1]], axis=1).T    # (B, W or 1)
    keep = g.M.any(axis=1)
    cumM = np.cumsum(g.M[keep], axis=1).T.copy()             # (B, k)
    cf = coef[keep]
    kb = max(1, min(K, _VEC // max(1, W)))
    wb = min(W, _VEC)
    for k0 in range(0, K, kb):
        for w0 in range(0, W, wb):
            c = cf[:, k0:k0 + kb, w0:w0 + wb]
            shp = c.shape[1:]
            c2 = c.reshape(len(cf), -1)
            dp = None if Dprev is None else (Dprev if Dprev.shape[1] == 1 else Dprev[:, w0:w0 + wb])
            dl = D_last if len(D_last) == 1 else D_last[w0:w0 + wb]
            C = (lambda b0, b1, c2=c2, shp=shp: (cumM[b0:b1] @ c2).reshape((b1 - b0,) + shp))
            out[k0:k0 + kb, w0:w0 + wb] = g.fwd + _chain_end(r, C, bwd_end, dp, dl) + g.opt
    silent = (csum <= 0) & (p > 1)
    if lam != 1.0 and silent.any():          # nothing on the wire: λ does not apply (schedule's rule)
        out = np.where(silent, _group_totals(g, coef, p, overlap, 1.0), out)
    return out


def _as_1d(x, what: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 0:
        a = a[None]
    if a.ndim != 1:
        raise ValueError(f"{what} must be a sequence of numbers, got shape {a.shape}")
    return a


def sweep_grid(models, cluster, compressors, workers: Sequence[int], bandwidths: Sequence[float] | None = None, *,
               batch_per_worker: int | None = None, collective: str | None = None, bucket_mb: float = 25.0,
               overlap: bool = True, step: int | None = None, interference: float | None = None,
               network: str = "analytical", precision: str | None = None) -> np.ndarray:
    """Iteration time (s) of every model × compressor × inter-node bandwidth × worker count.

    models: catalog names / ModelProfiles (or one); compressors: specs / Compressors (or one);
    bandwidths: inter-node bytes/s (None: the cluster's own). Other arguments as
    :func:`kfsim.sim.predict.predict_iteration`. Returns shape (models, compressors, bandwidths,
    workers); NaN where the workers exceed a compressor's integer headroom
    (``sumquant(workers=W)``), which ``predict_iteration`` refuses."""
    if isinstance(models, (str, ModelProfile)) or not isinstance(models, (Sequence, np.ndarray)):
        models = [models]
    if isinstance(compressors, str) or not isinstance(compressors, (Sequence, np.ndarray)):
        compressors = [compressors]
    cl = with_precision(as_cluster(cluster), precision)
    ms = [as_model(m) for m in models]
    cs = [as_compressor(c, step) for c in compressors]
    wf = _as_1d(workers, "workers")
    if np.any(wf != np.round(wf)) or np.any(wf < 1):
        bad = wf[(wf != np.round(wf)) | (wf < 1)][0]
        raise ValueError(f"workers must be integers >= 1, got {bad:g}")
    p = wf
    bws = np.array([cl.inter.bandwidth]) if bandwidths is None else _as_1d(bandwidths, "bandwidths")
    for bw in bws:
        if not (bw > 0) or not np.isfinite(bw):
            raise ValueError(f"bandwidth must be > 0, got {bw}")
    coll = algorithms.check_name(collective or cl.collective)
    if not (bucket_mb > 0):
        raise ValueError(f"bucket_mb must be > 0, got {bucket_mb}")
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {NETWORKS}, got {network!r}")
    if network == "flow":
        raise NotImplementedError("the flow-level network is not a closed form: use predict.sweep, "
                                  "which runs predict_iteration per configuration")
    lam = cl.interference if interference is None else float(interference)
    if lam < 1:
        raise ValueError(f"interference must be >= 1, got {lam}")
    if batch_per_worker is not None and int(batch_per_worker) < 1:
        raise ValueError(f"batch_per_worker must be >= 1, got {batch_per_worker}")
    out = np.empty((len(ms), len(cs), len(bws), len(p)))
    if out.size == 0:
        return out
    groups = [[_group(m, cl, c, m.batch if batch_per_worker is None else int(batch_per_worker),
                      float(bucket_mb)) for c in cs] for m in ms]
    net = algorithms.net_params(cl)
    beta = 1.0 / (bws * cl.inter.efficiency)                  # as Link.beta
    net = net._replace(beta_inter=beta[:, None])
    nmax = max(g.max_bytes for row in groups for g in row)
    coef = np.stack(np.broadcast_arrays(*_affine(coll, p[None, :], net, nmax)))     # (7, K, W)
    coef[[0, 2, 4]] += cl.overheads.collective_s   # per collective call: into A of each collective
    one = p == 1
    for i, row in enumerate(groups):
        for j, g in enumerate(row):
            out[i, j] = _group_totals(g, coef, p, bool(overlap), lam) + cl.overheads.step_s
            out[i, j][:, one] = (g.fwd + g.bwd) + g.opt         # p = 1: nothing exchanged (schedule's value)
            if g.max_workers:
                out[i, j][:, p > g.max_workers] = np.nan        # beyond the integer headroom (predict raises)
    return out
