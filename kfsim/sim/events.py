"""Discrete-event simulations (simpy) of what needs control flow.

Events are per worker-iteration (or per bucket), never per ring step; the
cost of each exchange comes from the closed forms / pipeline below them.

* :func:`simulate_sync` — synchronous data parallel with stragglers and
  failures: T_iter = max_i T_comp,i + T_comm; a failed worker costs a
  restart plus the iterations since the last checkpoint.
* :func:`simulate_async` — parameter-server training without barriers:
  fully asynchronous (``staleness=None``), stale-synchronous parallel (SSP,
  Ho et al. 2013: a worker may run at most s clocks ahead of the slowest),
  or synchronous (``staleness=0``). Returns every applied gradient with
  the version it was computed on and the version it was applied to.
* :func:`simulate_iteration` — one bucketed iteration with per-worker
  backward speeds: bucket i's collective starts when every worker has
  encoded it (the event-level twin of :func:`kfsim.sim.pipeline.schedule`).
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import simpy

from kfsim.sim.distributions import per_worker, worker_rngs
from kfsim.sim.pipeline import Breakdown, schedule, serial_chain


class AppliedUpdate(NamedTuple):
    """One gradient applied to the parameters.

    version = number of parameter updates applied so far. ``computed_on``:
    the version the worker read before computing; ``applied_at``: the
    version the update is applied to (it produces applied_at + 1);
    staleness = applied_at − computed_on. ``batch``: updates sharing a batch
    id are averaged and applied together (synchronous rounds); otherwise
    each gradient is its own update.
    """

    worker: int
    computed_on: int
    applied_at: int
    staleness: int
    time: float
    batch: int


def simulate_async(compute, comm_time: float, workers: int, *, staleness: int | None = None,
                   updates: int = 100, seed: int = 0, server_time: float = 0.0,
                   pull_time: float = 0.0) -> list[AppliedUpdate]:
    """Order of applied gradients under async / SSP / sync training.

    compute: seconds per gradient (number, ``rng -> seconds`` callable, or a
    list with one per worker); comm_time: push time from gradient ready to
    its arrival at the server; server_time: service time per update at the
    (single, FIFO) server, so pushes queue; pull_time: fetching the new
    parameters after the update. A worker reads the version current when
    its pull completes. ``staleness``: None = fully async, s ≥ 1 = SSP
    bound, 0 = synchronous rounds (one averaged update per round; whole
    rounds are returned). Returns ``updates`` entries in application order
    (ties in time: the earlier-started computation first).
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if updates < 1:
        raise ValueError(f"updates must be >= 1, got {updates}")
    if staleness is not None and staleness < 0:
        raise ValueError(f"staleness must be None or >= 0, got {staleness}")
    for name, v in (("comm_time", comm_time), ("server_time", server_time), ("pull_time", pull_time)):
        if not v >= 0:
            raise ValueError(f"{name} must be >= 0, got {v}")
    dists = per_worker(compute, workers)
    rngs = worker_rngs(seed, workers)
    if staleness == 0:
        return _sync_rounds(dists, rngs, comm_time, server_time, pull_time, workers, updates)
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    st = {"version": 0, "clock": [0] * workers, "advance": env.event()}
    log: list[AppliedUpdate] = []
    done = env.event()

    def worker(i):
        while True:
            s = staleness
            while s is not None and st["clock"][i] - min(st["clock"]) > s:
                yield st["advance"]
            read = st["version"]
            yield env.timeout(dists[i](rngs[i]))
            yield env.timeout(comm_time)
            with server.request() as req:
                yield req
                yield env.timeout(server_time)
                v = st["version"]
                log.append(AppliedUpdate(i, read, v, v - read, env.now, len(log)))
                st["version"] = v + 1
            if len(log) >= updates and not done.triggered:
                done.succeed()
            old_min = min(st["clock"])
            st["clock"][i] += 1
            if min(st["clock"]) > old_min:
                ev, st["advance"] = st["advance"], env.event()
                ev.succeed()
            yield env.timeout(pull_time)

    for i in range(workers):
        env.process(worker(i))
    env.run(until=done)
    return log[:updates]


def _sync_rounds(dists, rngs, comm_time, server_time, pull_time, workers, updates):
    """staleness = 0: every round all workers compute on the same version;
    the server averages the p gradients into one update (batch = round)."""
    env = simpy.Environment()
    log: list[AppliedUpdate] = []
    rounds = -(-updates // workers)

    def worker(i, k):
        yield env.timeout(dists[i](rngs[i]))
        yield env.timeout(comm_time)

    def driver():
        for k in range(rounds):
            procs = [env.process(worker(i, k)) for i in range(workers)]
            yield simpy.AllOf(env, procs)
            yield env.timeout(server_time * workers)
            for i in range(workers):
                log.append(AppliedUpdate(i, k, k, 0, env.now, k))
            yield env.timeout(pull_time)

    env.run(env.process(driver()))
    return log


class SyncResult(NamedTuple):
    iteration_s: np.ndarray      # wall time of each iteration (incl. restarts)
    compute_s: np.ndarray        # (iterations, workers) sampled compute times
    idle_s: np.ndarray           # per iteration: mean time a worker waits for the slowest
    failures: int
    total_s: float


def simulate_sync(compute, comm_time: float, workers: int, *, iterations: int = 100, seed: int = 0,
                  mtbf_s: float | None = None, restart_s: float = 60.0,
                  checkpoint_every: int = 100) -> SyncResult:
    """Synchronous training with stragglers and failures, one event per worker-iteration.

    Iteration k ends at max_i(compute_i,k) + comm_time (everyone waits for
    the slowest: T_iter = E[max_i T_comp,i] + T_comm). Each worker fails
    after an exponential time with mean ``mtbf_s`` (None: never); a failure
    costs ``restart_s`` and rolls back to the last checkpoint (every
    ``checkpoint_every`` iterations), whose iterations are redone.
    """
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    if mtbf_s is not None and not mtbf_s > 0:
        raise ValueError(f"mtbf_s must be > 0, got {mtbf_s}")
    dists = per_worker(compute, workers)
    rngs = worker_rngs(seed, workers)
    frng = np.random.default_rng([int(seed), -1 % 2**32])
    env = simpy.Environment()
    comp = np.zeros((iterations, workers))
    it_time = np.zeros(iterations)
    idle = np.zeros(iterations)
    state = {"failures": 0, "next_fail": _next_failure(frng, workers, mtbf_s, 0.0)}

    def worker(i, k):
        t = dists[i](rngs[i])
        comp[k, i] = t
        yield env.timeout(t)

    def driver():
        k = 0
        while k < iterations:
            start = env.now
            yield simpy.AllOf(env, [env.process(worker(i, k)) for i in range(workers)])
            yield env.timeout(comm_time)
            if env.now >= state["next_fail"]:
                state["failures"] += 1
                yield env.timeout(restart_s)
                state["next_fail"] = _next_failure(frng, workers, mtbf_s, env.now)
                lost_to = (k // checkpoint_every) * checkpoint_every
                it_time[k] += env.now - start
                k = lost_to  # redo from the last checkpoint (time of redone work accrues)
                continue
            it_time[k] += env.now - start
            idle[k] = float(np.mean(comp[k].max() - comp[k]))
            k += 1

    env.run(env.process(driver()))
    return SyncResult(it_time, comp, idle, state["failures"], float(env.now))


def _next_failure(rng, workers, mtbf, now):
    if mtbf is None:
        return np.inf
    return now + float(rng.exponential(mtbf / workers))  # first of p exponential clocks


def simulate_iteration(fwd: Sequence[float] | float, bwd: Sequence[float] | float, opt: float,
                       bucket_ready_frac, enc, comm, dec, *, interference: float = 1.0,
                       bytes_per_worker: float = 0.0, rounds: int = 1) -> Breakdown:
    """One bucketed, overlapped iteration as events (simpy): per worker a
    device process (forward, backward segments, encodes, decodes, optimizer)
    and one network process running bucket exchanges in order, each starting
    when *every* worker has encoded that bucket. fwd/bwd may differ per
    worker (stragglers); with equal workers this equals
    :func:`kfsim.sim.pipeline.schedule`."""
    fwd = np.atleast_1d(np.asarray(fwd, dtype=np.float64))
    bwd = np.atleast_1d(np.asarray(bwd, dtype=np.float64))
    p = max(len(fwd), len(bwd))
    fwd = np.broadcast_to(fwd, (p,))
    bwd = np.broadcast_to(bwd, (p,))
    frac = np.asarray(bucket_ready_frac, dtype=np.float64)
    enc, comm, dec = (np.asarray(x, dtype=np.float64) for x in (enc, comm, dec))
    B = len(comm)
    lam = interference if comm.sum() > 0 else 1.0
    env = simpy.Environment()
    encoded = [[env.event() for _ in range(B)] for _ in range(p)]
    exchanged = [env.event() for _ in range(B)]
    finish = np.zeros(p)

    def device(w):
        yield env.timeout(fwd[w])
        done = 0.0
        for i in range(B):
            yield env.timeout(lam * bwd[w] * frac[i] - done)
            done = lam * bwd[w] * frac[i]
            yield env.timeout(enc[i])
            encoded[w][i].succeed()
        yield env.timeout(lam * bwd[w] - done)
        for i in range(B):
            yield exchanged[i]
            yield env.timeout(dec[i])
        yield env.timeout(opt)
        finish[w] = env.now

    def network():
        for i in range(B):
            yield simpy.AllOf(env, [encoded[w][i] for w in range(p)])
            yield env.timeout(comm[i])
            exchanged[i].succeed()

    procs = [env.process(device(w)) for w in range(p)]
    env.process(network())
    env.run(simpy.AllOf(env, procs))
    total = float(finish.max())
    # what each worker alone would take (same buckets): idle = mean wait for the slowest
    alone = np.array([schedule(fwd[w], bwd[w], opt, frac, enc, comm, dec, interference=interference).total_s
                      for w in range(p)])
    idle = float(np.mean(total - alone))
    compute = float(np.mean(fwd + lam * bwd)) + opt
    codec = float(enc.sum() + dec.sum())
    exposed = max(total - idle - compute - codec, 0.0)
    return Breakdown(total, compute, exposed, codec, idle, float(comm.sum()), bytes_per_worker, B, rounds, p)


__all__ = ["AppliedUpdate", "SyncResult", "simulate_async", "simulate_iteration", "simulate_sync",
           "serial_chain"]
