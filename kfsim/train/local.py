"""Simulated local SGD / DiLoCo training (the algorithm: :mod:`compressors.outer`).

N workers, each with its own parameters p_r = θ − η (pending_r + a_r). Every
step t, worker r differentiates its shard ``[r::N]`` of the global batch
(the data order of :class:`kfsim.train.sync.Batches`) at p_r and adds the
inner SGD(+momentum) direction to a_r. After the step, the fragment whose
exchange starts at t (``LocalSGD.starts``) sends its pseudo-gradients through
the runner with ``comp.step(t)`` and keys ``make_keys(seed, t, r)``, and the
fragment whose update lands at t applies the outer Nesterov step.

Evaluation (every ``eval_every`` steps) is of θ, the model every worker
agrees on; the simulated clock advances by :mod:`kfsim.sim.localsgd`'s
step time (inner step + the exposed exchange landing there), ``bytes_sent``
by the fragment's payload when its exchange starts.

H = 1, outer lr 1, momentum 0 is bit-identical to :class:`kfsim.train.sync.Trainer`
(the test suite checks params and losses). The run state (θ, outer
momentum, the in-flight mean, every worker's a_r, pending, inner momentum and
compressor state, step, clock, bytes) determines the rest of the run, so a
checkpoint resumes bit-identically (``kfsim.train.checkpoint``).
"""
from __future__ import annotations

import time
from typing import Callable, NamedTuple

import numpy as np

from compressors import outer as algo_mod
from compressors.core import make_keys
from kfsim import records
from kfsim.train import models, step as step_mod, sync, tasks, timing
from kfsim.train.config import RunConfig


class LocalState(NamedTuple):
    outer: algo_mod.OuterState
    workers: tuple          # one algo_mod.WorkerState per worker
    step: int
    clock: float
    bytes_sent: int


def names(cfg: RunConfig) -> tuple:
    """The model's tensor names in forward order (the fragments' order)."""
    return timing.FORWARD_ORDER[tasks.TASKS[cfg.task]]


def init_state(cfg: RunConfig, params: dict | None = None) -> LocalState:
    """θ from init_params(model, seed); zero a_r, pending, momenta; fresh compressor states."""
    ops = sync.get_ops(cfg.backend)
    model = tasks.TASKS[cfg.task]
    host = models.init_params(model, cfg.seed) if params is None else params
    p = {k: ops.asarray(np.asarray(host[k])) for k in names(cfg)}
    comp = cfg.comp.step(0)
    workers = tuple(algo_mod.init_worker(ops, comp, p, {k: ops.zeros(v.shape, v.dtype) for k, v in p.items()})
                    for _ in range(cfg.workers))
    return LocalState(algo_mod.init_outer(ops, p), workers, 0, 0.0, 0)


_COMPILED: dict = {}


def _cached(key, build: Callable) -> Callable:
    if key not in _COMPILED:
        if len(_COMPILED) >= 64:
            _COMPILED.pop(next(iter(_COMPILED)))
        _COMPILED[key] = build()
    return _COMPILED[key]


class LocalTrainer:
    """Data, compiled pieces (inner step; start / land per fragment) and the clock of a local-SGD run."""

    def __init__(self, cfg: RunConfig, task: tasks.Task | None = None):
        if cfg.local is None:
            raise ValueError("LocalTrainer needs a configuration with local_steps")
        self.cfg, self.algo = cfg, cfg.local
        self.base = sync.Trainer(cfg, task)  # data, batches, evaluation
        self.ops, self.model, self.comp = self.base.ops, self.base.model, cfg.comp
        self.frags = algo_mod.fragments_of(names(cfg), self.algo.fragments)
        self._timing: dict = {}

    def _key(self, *what) -> tuple:
        c = self.cfg
        return (self.model, c.workers, c.backend, c.lr, c.momentum, c.seed, c.local) + what

    def inner_fn(self) -> Callable:
        """jit ``(outer, workers, X, Y, idx) -> (workers, mean loss)``: one inner step of every worker."""
        cfg, ops, model, n = self.cfg, self.ops, self.model, self.cfg.workers

        def build():
            import jax

            vg = jax.value_and_grad(lambda p, a, b: models.loss(model, p, a, b))

            def fn(outer, workers, X, Y, idx):
                x, y = X[idx], Y[idx]
                losses, new = [], []
                for r, w in enumerate(workers):
                    loss, g = vg(algo_mod.local_params(ops, cfg.lr, outer, w), step_mod.shard(x, r, n),
                                 step_mod.shard(y, r, n))
                    if cfg.momentum:
                        v = {k: ops.asarray(cfg.momentum, g[k].dtype) * w.inner[k] + g[k] for k in g}
                        inner = v
                    else:
                        v, inner = g, w.inner
                    losses.append(loss)
                    new.append(algo_mod.accumulate(ops, w, {k: v[k] for k in w.accum}, inner))
                return tuple(new), step_mod.mean_loss(losses)

            return jax.jit(fn)

        return _cached(self._key("inner"), build)

    def start_fn(self, f: int, t: int) -> Callable:
        """jit ``(outer, workers, t) -> (outer, workers)``: fragment f's exchange starts."""
        ops, comp, seed, n, frag = self.ops, self.comp.step(t), self.cfg.seed, self.cfg.workers, self.frags[f]

        def build():
            import jax

            def fn(outer, workers, tt):
                keys = [make_keys(ops, seed, tt, r) for r in range(n)]
                o, w, _ = algo_mod.start(ops, comp, outer, workers, keys, frag)
                return o, tuple(w)

            return jax.jit(fn)

        return _cached(self._key("start", f, self.cfg.compressor, self.comp.phase_of(t)), build)

    def land_fn(self, f: int) -> Callable:
        """jit ``(outer, workers) -> (outer, workers)``: fragment f's outer update lands."""
        ops, algo, lr, frag = self.ops, self.algo, self.cfg.lr, self.frags[f]

        def build():
            import jax

            def fn(outer, workers):
                o, w = algo_mod.land(ops, algo, lr, outer, workers, frag)
                return o, tuple(w)

            return jax.jit(fn)

        return _cached(self._key("land", f), build)

    def timing_at(self, t: int):
        """The :class:`kfsim.sim.localsgd.LocalTiming` of the compressor phase at t."""
        from kfsim.sim.localsgd import predict_local

        key = self.comp.phase_of(t)
        if key not in self._timing:
            cfg = self.cfg
            cl = timing.cluster(cfg.cluster, cfg.bandwidth_gbit, cfg.workers)
            prof = timing.model_profile(self.model, max(1, cfg.batch // cfg.workers))
            self._timing[key] = predict_local(prof, cl, self.comp.step(t), cfg.workers, self.algo,
                                              collective=cfg.collective)
        return self._timing[key]

    def run(self, state: LocalState | None = None, *, until: int | None = None,
            writer: records.Writer | None = None, history: list | None = None,
            progress: Callable[[records.Step], None] | None = None) -> sync.RunResult:
        """Train from ``state`` (fresh if None) up to step ``until`` (default cfg.steps)."""
        import jax
        import jax.numpy as jnp

        cfg, algo = self.cfg, self.algo
        state = init_state(cfg) if state is None else state
        until = cfg.steps if until is None else min(until, cfg.steps)
        history = list(history or [])
        outer, workers, clock, sent = state.outer, tuple(state.workers), state.clock, state.bytes_sent
        inner = self.inner_fn()
        per = self.base.batches.per_epoch
        t0 = last = time.perf_counter()
        for t in range(state.step, until):
            idx = self.base.batches.indices(t)
            workers, loss = inner(outer, workers, self.base.X, self.base.Y, jnp.asarray(idx))
            f = algo.starts(t)
            if f is not None:
                outer, workers = self.start_fn(f, t)(outer, workers, jnp.asarray(np.int32(t)))
            g = algo.lands(t)
            if g is not None:
                outer, workers = self.land_fn(g)(outer, workers)
            tm = self.timing_at(t)
            dt, nbytes = tm.step_s(t), tm.bytes_at(t)
            clock += dt
            sent += nbytes
            acc, extra = None, {"sim_clock_s": clock, "epoch": t // per}
            if (t + 1) % cfg.eval_every == 0 or t + 1 == cfg.steps:
                extra["test_loss"], acc = self.base.test_metrics(outer.anchor)
            rec = records.Step(t, dt, nbytes, float(loss), acc, extra)
            history.append(rec)
            if writer is not None:
                writer.add(rec)
            if progress is not None:
                now = time.perf_counter()
                progress(rec._replace(extra={**extra, "wall_s": now - last}))
                last = now
        jax.block_until_ready(outer.anchor)
        state = LocalState(outer, workers, max(state.step, until), clock, sent)
        return sync.RunResult(cfg, state, history, sync.summarize(cfg, history, time.perf_counter() - t0))
