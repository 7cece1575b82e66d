"""Asynchronous / bounded-staleness training: replay real gradients in simulated order.

The event simulator (``kfsim.sim.predict.simulate_async``) decides, for every
applied gradient, which worker computed it, the parameter version it read
(``computed_on``), the version it is applied to (``applied_at``) and when.
We replay exactly that order with real numerics:

    g   = grad L(w_{computed_on}; worker w's k-th shard)          (k-th gradient of w)
    g^  = decode(encode(g))        (n = 1 exchange with the server; w's own state)
    w_{v+1} = w_v - lr * (1/N) * g^    (SGD, with momentum at the server if set)

so fully asynchronous training applies stale gradients one by one, each
weighted 1/N (one worker's share of a global batch). Worker w's k-th shard is
samples [w::N] of global batch k, as in synchronous training. A synchronous
round (staleness bound 0: every worker computes on the same version and the
server averages) is run as the synchronous N-worker exchange, so
staleness-0 async equals synchronous training exactly. ``steps`` counts
iterations-equivalent: N gradients (one global batch) per step.
"""
from __future__ import annotations

import collections
import time
from typing import NamedTuple

import numpy as np

from kfsim import records
from kfsim.train import step as step_mod, sync as loop, tasks, timing
from kfsim.train.config import RunConfig


_UPDATES: dict = {}  # compiled per-worker updates, shared across runs


def schedule(cfg: RunConfig, model: str):
    """The applied-update order from the event simulator."""
    from kfsim.sim.predict import simulate_async

    cl = timing.cluster(cfg.cluster, cfg.bandwidth_gbit, cfg.workers)
    costs = timing.async_costs(model, cfg.comp, cfg.workers, cfg.batch, cl)
    return simulate_async(timing.jittered(costs.compute_s, cfg.jitter), costs.comm_s, cfg.workers,
                          staleness=cfg.staleness, updates=cfg.steps * cfg.workers, seed=cfg.seed,
                          server_time=costs.server_s, pull_time=costs.pull_s), costs


def groups(events):
    """Consecutive updates sharing a batch id (applied together)."""
    out = []
    for e in events:
        if out and out[-1][0].batch == e.batch:
            out[-1].append(e)
        else:
            out.append([e])
    return out


def staleness_histogram(events) -> dict[int, int]:
    return dict(sorted(collections.Counter(int(e.staleness) for e in events).items()))


class AsyncState(NamedTuple):
    """Everything a resumed replay needs: params, optimizer, every worker's
    compressor state, the parameter versions later updates still read,
    the current version, each worker's gradient count, updates (groups)
    applied, the simulated clock and the bytes sent. The event order itself
    is recomputed from the configuration (the simulator is seeded)."""

    params: dict
    opt: dict
    states: tuple
    versions: tuple      # ((version, params), ...) still needed
    version: int
    k_of: tuple          # gradients computed so far, per worker
    done: int            # groups (applied updates / rounds) replayed
    clock: float
    bytes_sent: int


def initial(cfg: RunConfig) -> AsyncState:
    st = loop.init_state(cfg)
    return AsyncState(st.params, st.opt, tuple(st.states), ((0, st.params),), 0, (0,) * cfg.workers, 0, 0.0, 0)


def run(cfg: RunConfig, *, record: str | None = None, task: tasks.Task | None = None,
        progress=None) -> loop.RunResult:
    if cfg.mode != "async":
        raise ValueError("async_replay.run needs mode='async'")
    trainer = loop.Trainer(cfg, task)
    events, costs = schedule(cfg, trainer.model)
    writer = None if record is None else records.Writer(
        record, "simulated", {**loop.meta(cfg), "async_costs": costs._asdict()})
    ok = False
    try:
        res = replay(cfg, trainer, events, writer=writer, progress=progress)[0]
        ok = True
        return res
    finally:
        if writer is not None:
            writer.close(ok=ok)


def replay(cfg, trainer: loop.Trainer, events, *, state: AsyncState | None = None, until: int | None = None,
           history: list | None = None, writer=None, progress=None) -> tuple[loop.RunResult, AsyncState]:
    """Replay groups ``state.done .. until`` (default: all) of the event order."""
    import jax

    n = cfg.workers
    state = initial(cfg) if state is None else state
    gs = groups(events)
    until = len(gs) if until is None else min(until, len(gs))
    params, opt, states = state.params, state.opt, list(state.states)
    versions = dict(state.versions)
    version, k_of = state.version, list(state.k_of)
    apply = step_mod.make_apply(cfg.lr, cfg.momentum)
    weight = np.float32(1.0 / n)
    need = collections.Counter(e.computed_on for grp in gs[state.done:] for e in grp)
    history = list(history or [])
    prev_t, sent = state.clock, state.bytes_sent
    t0 = time.perf_counter()
    for gi in range(state.done, until):
        grp = gs[gi]
        if len(grp) > 1:  # a synchronous round: every worker on one version, averaged
            if sorted(e.worker for e in grp) != list(range(n)) or len({e.computed_on for e in grp}) != 1 \
                    or len({k_of[e.worker] for e in grp}) != 1:
                raise ValueError("async replay: a batched round must hold every worker once, on one version")
            k = k_of[0]
            idx = trainer.batches.indices(k)
            params, opt, st, _, loss = trainer.step_fn(k)(params, opt, tuple(states), (), trainer.X, trainer.Y,
                                                          idx, np.int32(k))
            states = list(st)
            for e in grp:
                k_of[e.worker] += 1
            nbytes = trainer.bytes_at(k)
            version += 1
            versions = {version: params}
        else:
            e = grp[0]
            w, k = e.worker, k_of[e.worker]
            if e.computed_on not in versions:
                raise ValueError(f"async replay: version {e.computed_on} was not kept")
            key = (trainer.model, cfg.compressor, trainer.comp.phase_of(k), cfg.backend, cfg.seed)
            if key not in _UPDATES:
                _UPDATES[key] = step_mod.make_worker_update(trainer.model, trainer.comp.step(k), trainer.ops,
                                                            seed=cfg.seed)
            idx = trainer.batches.indices(k)[w::n]
            g, states[w], loss = _UPDATES[key](versions[e.computed_on], states[w], trainer.X[idx],
                                              trainer.Y[idx], np.int32(k), np.int32(w))
            need[e.computed_on] -= 1
            params, opt = apply(params, opt, g, weight)
            version += 1
            versions[version] = params
            for v in (e.computed_on, version - 1):  # drop versions no later update reads
                if need[v] <= 0 and v != version:
                    versions.pop(v, None)
            k_of[w] += 1
            nbytes = trainer.bytes_at(k)
        sent += nbytes
        t_now = float(grp[-1].time)
        extra = {"sim_clock_s": t_now, "worker": int(grp[0].worker) if len(grp) == 1 else None,
                 "staleness": [int(e.staleness) for e in grp], "computed_on": int(grp[0].computed_on),
                 "applied_at": int(grp[0].applied_at)}
        acc = None
        if sum(k_of) % (cfg.eval_every * n) == 0 or gi == len(gs) - 1:
            extra["test_loss"], acc = trainer.test_metrics(params)
        rec = records.Step(gi, t_now - prev_t, nbytes, float(loss), acc, extra)
        prev_t = t_now
        history.append(rec)
        if writer is not None:
            writer.add(rec)
        if progress is not None:
            progress(rec)
    jax.block_until_ready(params)
    wall = time.perf_counter() - t0
    summary = loop.summarize(cfg, history, wall)
    summary["staleness_histogram"] = staleness_histogram(events)
    summary["mean_staleness"] = float(np.mean([e.staleness for e in events])) if events else 0.0
    summary["updates"] = len(events)
    new = AsyncState(params, opt, tuple(states), tuple(sorted(versions.items())), version, tuple(k_of), until,
                     prev_t, sent)
    final = loop.TrainState(params, opt, tuple(states), (), sum(k_of) // n, prev_t, sent)
    return loop.RunResult(cfg, final, history, summary), new
