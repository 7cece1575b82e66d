"""Run a simulated training configuration: synchronous (:mod:`kfsim.train.sync`)
or asynchronous (:mod:`kfsim.train.async_replay`), optionally writing its run record.

The names of the synchronous trainer are re-exported here (``loop.Trainer``,
``loop.TrainState``, ``loop.init_state``...), so ``kfsim.train.loop`` is the
one module a user of simulated training needs.

Divergence (``summary["diverged"]``, :func:`divergence`): a run has diverged
when any recorded training loss is non-finite (NaN/inf) or exceeds
``DIVERGENCE_FACTOR`` (1000) times the first step's loss. ``kfsim train``
reports a diverged run with one ``error:`` line on stderr and exit status 3.
"""
from __future__ import annotations

from kfsim import records
from kfsim.train import async_replay, tasks
from kfsim.train.config import RunConfig
from kfsim.train.sync import (Batches, RunResult, Trainer, TrainState, epoch_order, init_state, meta,  # noqa: F401
                              summarize, time_to_accuracy, wire_bytes)


DIVERGENCE_FACTOR = 1e3


def divergence(steps) -> str | None:
    """Why the run of these steps (``records.Step``) diverged, or None (rule: module docstring)."""
    import math
    if not steps:
        return None
    first = steps[0].loss
    for s in steps:
        if not math.isfinite(s.loss):
            return f"loss {s.loss} at step {s.step}"
        if math.isfinite(first) and first > 0 and s.loss > DIVERGENCE_FACTOR * first:
            return (f"loss {s.loss:.3g} at step {s.step} is over {DIVERGENCE_FACTOR:g}x "
                    f"the first loss {first:.3g}")
    return None


def mark_divergence(res: RunResult) -> RunResult:
    """Set ``summary["diverged"]`` by :func:`divergence` (also catches exploding finite losses)."""
    res.summary["diverged"] = bool(res.summary.get("diverged")) or divergence(res.steps) is not None
    return res


def make_trainer(cfg: RunConfig, task: tasks.Task | None = None):
    """The synchronous trainer of ``cfg``: per-step (:class:`Trainer`) or local SGD
    (:class:`kfsim.train.local.LocalTrainer`, when ``cfg.local_steps`` is set)."""
    if cfg.local is None:
        return Trainer(cfg, task)
    from kfsim.train.local import LocalTrainer

    return LocalTrainer(cfg, task)


def run(cfg: RunConfig, *, record: str | None = None, task: tasks.Task | None = None,
        progress=None) -> RunResult:
    """Run a whole configuration (sync or async) and optionally write its run record."""
    if cfg.mode == "async":
        return mark_divergence(async_replay.run(cfg, record=record, task=task, progress=progress))
    trainer = make_trainer(cfg, task)
    if cfg.local is None:
        trainer.clock().iteration(trainer.comp, 0)  # a bad cluster or collective fails before the record opens
    else:
        trainer.timing_at(0)
    if record is None:
        return mark_divergence(trainer.run(progress=progress))
    with records.Writer(record, "simulated", meta(cfg)) as w:
        return mark_divergence(trainer.run(writer=w, progress=progress))
