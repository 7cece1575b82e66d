"""One training iteration: forward, backward with DDP buckets overlapping
communication, encode/decode on the device, optimizer step.

Device stream (in order): forward; backward, with bucket i's encode inserted
as soon as its last gradient exists; the decodes once backward is done;
the optimizer step. Communication stream: bucket i starts when its encode
ends and the previous bucket's exchange is done (collectives.md):

    eₑᵢ = Bᵢ + Σ_{j≤i} encⱼ            (Bᵢ: backward time up to bucket i, × λ)
    sᵢ = max(eₑᵢ, eᵢ₋₁),  eᵢ = sᵢ + commᵢ
    dᵢ = max(eᵢ, dᵢ₋₁, end of backward) + decᵢ
    T_iter = T_fwd + d_last + T_opt          (overlap)
    T_iter = T_fwd + T_bwd + Σ(enc + comm + dec) + T_opt   (no overlap)

λ ≥ 1 slows backward while it overlaps communication (Agarwal et al.,
MLSys'22: 1.04–1.1). The recurrence e_k = C_k + max_{j≤k}(rⱼ − C_{j−1})
(C the cumulative sum of comm times) is evaluated with cumsum/maximum.accumulate.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Breakdown(NamedTuple):
    """Where one iteration's time goes. total = compute + codec + overhead + exposed_comm + idle.

    Bytes, per worker and iteration: ``bytes_per_worker`` is the *payload* (the
    compressor's encoded bytes, all buckets and rounds — independent of p and
    of the collective); ``wire_bytes_per_worker`` what the collective actually
    used puts on one worker's link for that payload (ring all-reduce
    2(p−1)/p·n, all-gather (p−1)·m, ...: :func:`kfsim.sim.algorithms.wire_bytes`)."""

    total_s: float
    compute_s: float       # forward + backward (× interference) + optimizer
    exposed_comm_s: float  # time the device waits on the network
    codec_s: float         # encode + decode on the device
    idle_s: float          # waiting for stragglers (event simulation); 0 analytically
    comm_s: float          # total busy time of the network (overlapped or not)
    bytes_per_worker: float        # payload bytes (the compressor's), not traffic
    buckets: int
    rounds: int
    workers: int
    wire_bytes_per_worker: float = 0.0  # bytes on the wire for the collective used
    overhead_s: float = 0.0        # framework overhead on the device: per-tensor hooks + fixed per step

    @property
    def payload_bytes_per_worker(self) -> float:
        return self.bytes_per_worker


def serial_chain(ready: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """End times of jobs run one after another in order, job i not before ready[i]:
    eᵢ = max(readyᵢ, eᵢ₋₁) + durᵢ, vectorised."""
    if len(dur) == 0:
        return np.zeros(0)
    c = np.cumsum(dur)
    c_prev = np.concatenate(([0.0], c[:-1]))
    return c + np.maximum.accumulate(ready - c_prev)


def schedule(fwd: float, bwd: float, opt: float, bucket_ready_frac: np.ndarray, enc: np.ndarray,
             comm: np.ndarray, dec: np.ndarray, *, overlap: bool = True, interference: float = 1.0,
             bytes_per_worker: float = 0.0, rounds: int = 1, workers: int = 1,
             wire_bytes_per_worker: float = 0.0, hook=None, fixed: float = 0.0) -> Breakdown:
    """Breakdown of one iteration.

    bucket_ready_frac[i]: fraction of the backward pass done when bucket i's
    last gradient exists (non-decreasing, last = 1). hook[i]: framework seconds
    on the device before bucket i launches (its tensors' hooks; runs like an
    encode, reported as ``overhead_s``); fixed: seconds per step after the
    last decode (the reducer's finalize)."""
    enc, comm, dec = (np.asarray(x, dtype=np.float64) for x in (enc, comm, dec))
    codec = float(enc.sum() + dec.sum())
    hook = np.zeros_like(enc) if hook is None else np.asarray(hook, dtype=np.float64)
    over = float(hook.sum()) + fixed
    if not overlap:
        compute = fwd + bwd + opt
        total = compute + codec + over + float(comm.sum())
        return Breakdown(total, compute, float(comm.sum()), codec, 0.0, float(comm.sum()),
                         bytes_per_worker, len(comm), rounds, workers, wire_bytes_per_worker, over)
    lam = interference if comm.sum() > 0 else 1.0
    b = lam * bwd
    enc = enc + hook
    enc_done = b * np.asarray(bucket_ready_frac, dtype=np.float64) + np.cumsum(enc)
    e = serial_chain(enc_done, comm)
    bwd_end = b + float(enc.sum())
    d = serial_chain(np.maximum(e, bwd_end), dec)
    end = float(d[-1]) if len(d) else bwd_end
    compute = fwd + b + opt
    total = fwd + end + fixed + opt
    exposed = total - compute - codec - over
    return Breakdown(total, compute, max(exposed, 0.0), codec, 0.0, float(comm.sum()),
                     bytes_per_worker, len(comm), rounds, workers, wire_bytes_per_worker, over)
