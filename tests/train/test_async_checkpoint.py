"""Async replay (staleness-0 equals synchronous) and bit-identical checkpoint/resume."""
from __future__ import annotations

import jax
import numpy as np
import pytest

from kfsim.train import async_replay, checkpoint, loop
from kfsim.train.config import RunConfig


def _leaves(state):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves((state.params, state.opt, state.states))]


def test_staleness_zero_async_equals_sync(fmnist_small):
    kw = dict(compressor="ef(topk(ratio=0.01))", workers=4, batch=64, steps=8, eval_every=4, momentum=0.9)
    sync = loop.run(RunConfig(**kw), task=fmnist_small)
    asy = loop.run(RunConfig(mode="async", staleness=0, **kw), task=fmnist_small)
    assert asy.summary["staleness_histogram"] == {0: 32}
    assert all(np.array_equal(a, b) for a, b in zip(_leaves(sync.state), _leaves(asy.state)))
    assert [s.loss for s in sync.steps] == [s.loss for s in asy.steps]


def test_single_worker_async_equals_sync(fmnist_small):
    """One worker is never stale: the per-update path (n = 1 exchange with the
    server, weight 1/N = 1) must reproduce synchronous training."""
    kw = dict(compressor="ef(topk(ratio=0.05))", workers=1, batch=32, steps=6, eval_every=3)
    sync = loop.run(RunConfig(**kw), task=fmnist_small)
    asy = loop.run(RunConfig(mode="async", **kw), task=fmnist_small)
    assert asy.summary["staleness_histogram"] == {0: 6}
    for k in sync.state.params:
        np.testing.assert_allclose(np.asarray(asy.state.params[k]), np.asarray(sync.state.params[k]),
                                   rtol=0, atol=1e-6)


def test_async_replays_the_simulated_order(fmnist_small):
    cfg = RunConfig(compressor="none()", workers=4, batch=64, steps=5, eval_every=5, mode="async",
                    jitter=0.5, seed=3)
    events, _ = async_replay.schedule(cfg, "mlp")
    res = loop.run(cfg, task=fmnist_small)
    assert len(res.steps) == len(events) == 20
    assert [s.extra["worker"] for s in res.steps] == [e.worker for e in events]
    assert [s.extra["staleness"] for s in res.steps] == [[e.staleness] for e in events]
    assert sum(res.summary["staleness_histogram"].values()) == 20
    assert res.summary["mean_staleness"] > 0
    clocks = [s.extra["sim_clock_s"] for s in res.steps]
    assert clocks == sorted(clocks) and np.isfinite(res.steps[-1].loss)


@pytest.mark.parametrize("spec", ["ef(topk(ratio=0.01))", "powersgd(rank=2)"])
def test_checkpoint_resume_is_bit_identical(fmnist_small, tmp_path, spec):
    cfg = RunConfig(compressor=spec, workers=3, batch=48, steps=10, eval_every=4, momentum=0.9)
    full = loop.run(cfg, task=fmnist_small)
    part = loop.Trainer(cfg, fmnist_small).run(until=4)
    path = checkpoint.save(tmp_path / "ck.npz", cfg, part.state, part.steps)
    cfg2, state, hist = checkpoint.load(path)
    assert cfg2 == cfg and state.step == 4 and state.clock == part.state.clock
    resumed = loop.Trainer(cfg2, fmnist_small).run(state, history=hist)
    assert [s.loss for s in resumed.steps] == [s.loss for s in full.steps]
    assert [s.extra["sim_clock_s"] for s in resumed.steps] == [s.extra["sim_clock_s"] for s in full.steps]
    assert all(np.array_equal(a, b) for a, b in zip(_leaves(full.state), _leaves(resumed.state)))
    assert resumed.state.bytes_sent == full.state.bytes_sent


def test_run_with_checkpoints_resumes_after_interruption(fmnist_small, tmp_path):
    cfg = RunConfig(compressor="ef(topk(ratio=0.01))", workers=2, batch=32, steps=6, eval_every=3)
    full = loop.run(cfg, task=fmnist_small)
    ck = tmp_path / "ck.npz"
    first = loop.Trainer(cfg, fmnist_small).run(until=3)
    checkpoint.save(ck, cfg, first.state, first.steps)  # as if the process died after step 3
    res = checkpoint.run_with_checkpoints(cfg, ck, every=2, task=fmnist_small)
    assert [s.loss for s in res.steps] == [s.loss for s in full.steps]
    with pytest.raises(ValueError, match="different configuration"):
        checkpoint.run_with_checkpoints(cfg.replace(seed=5), ck, every=2, task=fmnist_small)


def test_checkpoint_rejects_a_different_layout(fmnist_small, tmp_path):
    cfg = RunConfig(compressor="ef(topk(ratio=0.01))", workers=2, batch=32, steps=2, eval_every=2)
    res = loop.Trainer(cfg, fmnist_small).run()
    path = checkpoint.save(tmp_path / "ck.npz", cfg.replace(compressor="none()"), res.state, res.steps)
    with pytest.raises(ValueError, match="layout"):
        checkpoint.load(path)


def test_async_checkpoint_resume_is_bit_identical(fmnist_small, tmp_path):
    cfg = RunConfig(compressor="ef(topk(ratio=0.01))", workers=3, batch=48, steps=4, eval_every=2, mode="async",
                    jitter=0.4, momentum=0.9, seed=2)
    full = loop.run(cfg, task=fmnist_small)
    trainer = loop.Trainer(cfg, fmnist_small)
    events, _ = async_replay.schedule(cfg, trainer.model)
    part, st = async_replay.replay(cfg, trainer, events, until=5)
    path = checkpoint.save(tmp_path / "a.npz", cfg, st, part.steps)
    cfg2, st2, hist = checkpoint.load(path)
    assert cfg2 == cfg and st2.done == 5 and st2.k_of == st.k_of and len(st2.versions) == len(st.versions)
    trainer2 = loop.Trainer(cfg2, fmnist_small)
    resumed, _ = async_replay.replay(cfg2, trainer2, async_replay.schedule(cfg2, trainer2.model)[0], state=st2,
                                     history=hist)
    assert [s.loss for s in resumed.steps] == [s.loss for s in full.steps]
    assert [s.extra["sim_clock_s"] for s in resumed.steps] == [s.extra["sim_clock_s"] for s in full.steps]
    assert all(np.array_equal(a, b) for a, b in zip(_leaves(full.state), _leaves(resumed.state)))
