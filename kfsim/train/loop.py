"""Run a simulated training configuration: synchronous (:mod:`kfsim.train.sync`)
or asynchronous (:mod:`kfsim.train.async_replay`), optionally writing its run record.

The names of the synchronous trainer are re-exported here (``loop.Trainer``,
``loop.TrainState``, ``loop.init_state``...), so ``kfsim.train.loop`` is the
one module a user of simulated training needs.
"""
from __future__ import annotations

from kfsim import records
from kfsim.train import async_replay, tasks
from kfsim.train.config import RunConfig
from kfsim.train.sync import (Batches, RunResult, Trainer, TrainState, epoch_order, init_state, meta,  # noqa: F401
                              summarize, time_to_accuracy, wire_bytes)


def run(cfg: RunConfig, *, record: str | None = None, task: tasks.Task | None = None,
        progress=None) -> RunResult:
    """Run a whole configuration (sync or async) and optionally write its run record."""
    if cfg.mode == "async":
        return async_replay.run(cfg, record=record, task=task, progress=progress)
    trainer = Trainer(cfg, task)
    if record is None:
        return trainer.run(progress=progress)
    with records.Writer(record, "simulated", meta(cfg)) as w:
        return trainer.run(writer=w, progress=progress)
