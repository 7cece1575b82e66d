"""Synchronous simulated data-parallel training with real numerics (the Trainer).

Each iteration t:
  1. the global batch is samples perm_e[i*B:(i+1)*B] of the training set
     (e = t // steps_per_epoch, perm_e = permutation from the generator
     seeded (seed, e); the last partial batch of an epoch is dropped);
  2. worker r differentiates its shard batch[r::N];
  3. the compressor in force at t (``comp.step(t)``) runs its exchange
     protocol among the N workers (per-worker states; see kfsim.train.step);
  4. SGD(+momentum) applies the mean estimate;
  5. the simulated clock advances by the timing simulator's iteration time
     and ``bytes_sent`` by what one worker put on the wire.

All randomness is counter-based — data order from (seed, epoch), compressor
keys from (seed, step, rank) — so the run state (params, optimizer, every
compressor state, server state, step, simulated clock, bytes) determines the
rest of the run: a checkpoint of it resumes bit-identically.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, NamedTuple

import numpy as np

import backends
from kfsim import records
from kfsim.train import models, optim, step as step_mod, tasks, timing
from kfsim.train.config import RunConfig


class TrainState(NamedTuple):
    params: dict
    opt: dict
    states: tuple          # one compressor state per worker
    server_state: Any      # server-side compressor state (() if none)
    step: int              # iterations done
    clock: float           # simulated seconds so far
    bytes_sent: int        # bytes one worker sent so far


class RunResult(NamedTuple):
    config: RunConfig
    state: TrainState
    steps: list            # kfsim.records.Step per iteration (or applied update)
    summary: dict


def get_ops(name: str):
    """The ops namespace of a backend of ``backends`` (training jits steps: JAX)."""
    return backends.get(name)


def init_state(cfg: RunConfig, params: dict | None = None) -> TrainState:
    """Fresh run state: parameters from init_params(model, seed), zero momentum,
    one fresh compressor state per worker (stacked on a worker axis when
    ``cfg.exchange == "vmap"``)."""
    ops = get_ops(cfg.backend)
    model = tasks.TASKS[cfg.task]
    params = models.init_params(model, cfg.seed) if params is None else params
    jp = _to_backend(ops, params)
    comp = cfg.comp.step(0)
    states = tuple(comp.init(ops, jp) for _ in range(cfg.workers))
    if cfg.exchange == "vmap":
        states = step_mod.stack_trees(states)
    server_state = () if cfg.server_comp is None else cfg.server_comp.step(0).init(ops, jp)
    return TrainState(jp, _to_backend(ops, optim.init(params)), states, server_state, 0, 0.0, 0)


def _to_backend(ops, tree):
    import jax

    return jax.tree_util.tree_map(lambda a: ops.asarray(np.asarray(a)), tree)


def epoch_order(seed: int, epoch: int, n: int) -> np.ndarray:
    """Sample order of an epoch: a permutation from the generator seeded (seed, epoch)."""
    return np.random.default_rng([int(seed), int(epoch), 0x5EED]).permutation(n).astype(np.int32)


class Batches:
    """Index of the global batch at any step (stateless, so resumable)."""

    def __init__(self, n: int, batch: int, seed: int):
        if n < batch:
            raise ValueError(f"training set has {n} samples, fewer than the global batch {batch}")
        self.n, self.batch, self.seed = n, batch, seed
        self.per_epoch = n // batch
        self._epoch, self._perm = -1, None

    def indices(self, t: int) -> np.ndarray:
        e, i = divmod(t, self.per_epoch)
        if e != self._epoch:
            self._epoch, self._perm = e, epoch_order(self.seed, e, self.n)
        return self._perm[i * self.batch:(i + 1) * self.batch]


def wire_bytes(comp, params, t: int, workers: int = 1) -> int:
    """Payload bytes one of ``workers`` hands to the collectives at step t (the compressor's exchange plan)."""
    return comp.step(t).payload_bytes(params, workers)


_DEVICE: list = []  # (host array, its device copy), newest last


def _on_device(a: np.ndarray):
    """The device copy of a task's array, shared by every Trainer of that task:
    a 60000x784 training set is a 188 MB copy, which a fresh Trainer would
    otherwise make (and its first step wait for) again."""
    import jax
    import jax.numpy as jnp

    for host, dev in _DEVICE:
        if host is a:
            return dev
    dev = jax.block_until_ready(jnp.asarray(a))
    _DEVICE.append((a, dev))
    del _DEVICE[:-4]
    return dev


_COMPILED: dict = {}
_MAX_COMPILED = 32


class Trainer:
    """Holds data, compiled steps (one per compressor phase) and the clock."""

    def __init__(self, cfg: RunConfig, task: tasks.Task | None = None):
        self.cfg = cfg
        self.ops = get_ops(cfg.backend)
        self.model = tasks.TASKS[cfg.task]
        self.task = task or tasks.load(cfg.task, cfg.limit_train, cfg.limit_test)
        self.comp = cfg.comp
        self.server = cfg.server_comp
        self.batches = Batches(len(self.task.x_train), cfg.batch, cfg.seed)
        self.X, self.Y = _on_device(self.task.x_train), _on_device(self.task.y_train)
        self.evaluate = step_mod.make_eval(self.model)
        self._bytes: dict = {}
        self._clock = None
        self._template = models.init_params(self.model, cfg.seed)
        self._perm_dev = None

    # -- pieces ---------------------------------------------------------------
    def clock(self) -> timing.Clock:
        if self._clock is None:
            cl = timing.cluster(self.cfg.cluster, self.cfg.bandwidth_gbit, self.cfg.workers)
            coll = self.cfg.collective or ("ps" if self.server is not None else None)
            self._clock = timing.Clock(self.model, self.cfg.workers, self.cfg.batch, cl, coll, self.server)
        return self._clock

    def _key(self, t: int) -> tuple:
        cfg = self.cfg
        return (self.model, cfg.compressor, self.comp.phase_of(t), cfg.server_compressor,
                None if self.server is None else self.server.phase_of(t), cfg.workers, cfg.backend,
                cfg.lr, cfg.momentum, cfg.seed, cfg.grad_mode, cfg.exchange)

    def _raw_step(self, t: int) -> Callable:
        cfg = self.cfg
        return step_mod.sync_step(
            self.model, self.comp.step(t), cfg.workers, self.ops, lr=cfg.lr, momentum=cfg.momentum,
            seed=cfg.seed, server=None if self.server is None else self.server.step(t),
            grad_mode=cfg.grad_mode, exchange_mode=cfg.exchange)

    @staticmethod
    def _cache(key, build: Callable) -> Callable:
        if key not in _COMPILED:
            if len(_COMPILED) >= _MAX_COMPILED:
                _COMPILED.pop(next(iter(_COMPILED)))
            _COMPILED[key] = build()
        return _COMPILED[key]

    def step_fn(self, t: int) -> Callable:
        """The compiled step ``(params, opt, states, server_state, X, Y, idx, t)
        -> (params, opt, states, server_state, loss)`` for the compressor phase
        at t (shared by every Trainer with the same numerics, so repeated runs
        compile once). It donates nothing (callers may keep their inputs)."""
        def build():
            import jax

            inner = self._raw_step(t)
            return jax.jit(lambda p, o, s, ss, X, Y, idx, tt: inner(p, o, s, ss, X[idx], Y[idx], tt))

        return self._cache(self._key(t), build)

    def _loop_fn(self, t: int) -> Callable:
        """What :meth:`run` calls each step: ``(params, opt, states,
        server_state, X, Y, perm, t) -> (..., loss, t + 1)`` with the epoch's
        order ``perm`` and the step counter ``t`` on the device (no host work
        or transfer per step); params, optimizer and compressor states are
        donated (run() owns them: it copies what it is given)."""
        per, batch = self.batches.per_epoch, self.cfg.batch

        def build():
            import jax
            from jax import lax

            inner = self._raw_step(t)

            def fn(p, o, s, ss, X, Y, perm, tt):
                idx = lax.dynamic_slice(perm, ((tt % per) * batch,), (batch,))
                p, o, s, ss, loss = inner(p, o, s, ss, X[idx], Y[idx], tt)
                return p, o, s, ss, loss, tt + 1

            return jax.jit(fn, donate_argnums=(0, 1, 2, 3))

        return self._cache(("run", per, batch) + self._key(t), build)

    def _perm(self, epoch: int):
        if self._perm_dev is None or self._perm_dev[0] != epoch:
            import jax.numpy as jnp

            self._perm_dev = (epoch, jnp.asarray(epoch_order(self.cfg.seed, epoch, self.batches.n)))
        return self._perm_dev[1]

    def bytes_at(self, t: int) -> int:
        key = self.comp.phase_of(t)
        if key not in self._bytes:
            self._bytes[key] = wire_bytes(self.comp, self._template, t, self.cfg.workers)
        return self._bytes[key]

    def test_metrics(self, params) -> tuple[float, float]:
        return self.evaluate(params, self.task.x_test, self.task.y_test)

    # -- the loop ---------------------------------------------------------------
    def run(self, state: TrainState | None = None, *, until: int | None = None,
            writer: records.Writer | None = None, history: list | None = None,
            progress: Callable[[records.Step], None] | None = None) -> RunResult:
        """Train from ``state`` (fresh if None) up to step ``until`` (default cfg.steps).

        The steps are dispatched without waiting for them: the epoch order
        and the step counter live on the device, and the losses are read
        back together at each evaluation (and the end); with a ``writer`` or
        ``progress`` also every ``FLUSH`` steps. Records reach the writer and
        ``progress`` in step order, each once its loss is known; ``progress``'s
        copy has ``extra["wall_s"]``, the mean wall time per step since the
        previous read-back (no extra host sync)."""
        import jax
        import jax.numpy as jnp

        cfg = self.cfg
        if state is None:
            state = init_state(cfg, self._template)  # (copied to the device: run() donates its buffers)
        else:  # run() donates the buffers it steps with; the caller keeps its own
            state = state._replace(**{f: jax.tree_util.tree_map(lambda a: jnp.array(a, copy=True),
                                                                 getattr(state, f))
                                      for f in ("params", "opt", "states", "server_state")})
        until = cfg.steps if until is None else min(until, cfg.steps)
        history = list(history or [])
        p, o, s, ss = state.params, state.opt, state.states, state.server_state
        clock, sent = state.clock, state.bytes_sent
        per = self.batches.per_epoch
        pending: list = []  # (step, dt, nbytes, device loss, acc, extra), oldest first
        flush_every = FLUSH if (writer is not None or progress is not None) else None

        def flush():
            losses = jax.device_get([q[3] for q in pending])
            now = time.perf_counter()
            wall = (now - window[0]) / max(len(pending), 1)  # mean wall s/step since the last read-back
            window[0] = now
            for (t, dt, nbytes, _, acc, extra), loss in zip(pending, losses):
                rec = records.Step(t, dt, nbytes, float(loss), acc, extra)
                history.append(rec)
                if writer is not None:
                    writer.add(rec)
                if progress is not None:
                    progress(rec._replace(extra={**extra, "wall_s": wall}))
            pending.clear()

        t0 = time.perf_counter()
        window = [t0]
        phase = fn = dt = nbytes = None
        tt = jnp.asarray(np.int32(state.step))
        for t in range(state.step, until):
            key = self._key(t)
            if key != phase:
                phase, fn = key, self._loop_fn(t)
                dt, nbytes = self.clock().iteration(self.comp, t), self.bytes_at(t)
            p, o, s, ss, loss, tt = fn(p, o, s, ss, self.X, self.Y, self._perm(t // per), tt)
            clock += dt
            sent += nbytes
            acc, extra = None, {"sim_clock_s": clock, "epoch": t // per}
            if (t + 1) % cfg.eval_every == 0 or t + 1 == cfg.steps:
                test_loss, acc = self.test_metrics(p)
                extra["test_loss"] = test_loss
            pending.append((t, dt, nbytes, loss, acc, extra))
            if acc is not None or (flush_every is not None and len(pending) >= flush_every):
                flush()
        flush()
        jax.block_until_ready(p)
        wall = time.perf_counter() - t0
        state = TrainState(p, o, s, ss, max(state.step, until), clock, sent)
        return RunResult(cfg, state, history, summarize(cfg, history, wall))


FLUSH = 32  # steps between loss read-backs when records are streamed (writer / progress)


def time_to_accuracy(history, target: float | None) -> tuple[float | None, int | None]:
    """(simulated seconds, step) at the first evaluation reaching ``target``;
    (None, None) if never reached. Resolution: the evaluation interval."""
    if target is None:
        return None, None
    for s in history:
        if s.accuracy is not None and s.accuracy >= target:
            return s.extra["sim_clock_s"], s.step
    return None, None


def summarize(cfg: RunConfig, history, wall_s: float) -> dict:
    evals = [s for s in history if s.accuracy is not None]
    last = evals[-1] if evals else None
    tta, tta_step = time_to_accuracy(history, cfg.target_accuracy)
    sim = history[-1].extra["sim_clock_s"] if history else 0.0
    return {
        "compressor": cfg.compressor, "workers": cfg.workers, "steps": len(history),
        "final_accuracy": None if last is None else last.accuracy,
        "final_test_loss": None if last is None else last.extra.get("test_loss"),
        "final_train_loss": history[-1].loss if history else None,
        "sim_time_s": sim, "time_per_iteration_s": sim / len(history) if history else None,
        "bytes_per_worker": sum(s.bytes_sent for s in history),
        "time_to_accuracy_s": tta, "time_to_accuracy_step": tta_step,
        "target_accuracy": cfg.target_accuracy, "wall_s": wall_s,
        "diverged": bool(history) and not math.isfinite(history[-1].loss),
    }


def meta(cfg: RunConfig) -> dict:
    d = cfg.to_dict()
    d["model"] = tasks.TASKS[cfg.task]
    return d
