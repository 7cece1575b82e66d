"""Async replay (staleness-0 equals synchronous) and bit-identical checkpoint/resume."""
from __future__ import annotations

import json

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
    with pytest.raises(ValueError, match=r"layout .*'none\(\)'.*state leaf 'worker0/\S+/residual' is unexpected"):
        load_one_line(path)
    # the other way round: a stateless run's checkpoint under an error-feedback config
    plain = loop.Trainer(cfg.replace(compressor="none()"), fmnist_small).run()
    path = checkpoint.save(tmp_path / "ck2.npz", cfg, plain.state, plain.steps)
    with pytest.raises(ValueError, match=r"state leaf 'worker0/\S+/residual' is missing"):
        load_one_line(path)


def load_one_line(path):
    try:
        return checkpoint.load(path)
    except ValueError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(path)), str(exc)
        raise


def test_checkpoint_of_another_model_names_the_tensor(tmp_path):
    cfg = RunConfig(compressor="ef(topk(ratio=0.01))", workers=2, batch=32, steps=2, eval_every=2)
    state = loop.init_state(cfg)
    path = checkpoint.save(tmp_path / "ck.npz", cfg.replace(task="fmnist-cnn"), state)
    with pytest.raises(ValueError, match=r"layout .*'fmnist-cnn'.*state leaf '(params|opt)/\w+'"):
        load_one_line(path)


def test_arrays_are_keyed_by_path_and_load_in_any_order(tmp_path):
    cfg = RunConfig(compressor="powersgd(rank=2)", workers=3, batch=48, steps=2, eval_every=2, momentum=0.9)
    state = loop.init_state(cfg)
    path = checkpoint.save(tmp_path / "ck.npz", cfg, state)
    with np.load(path) as z:
        names, arrays = z.files, {k: z[k] for k in z.files}
    params = sorted(state.params)
    assert {f"params/{k}" for k in params} <= set(names) and {f"opt/{k}" for k in params} <= set(names)
    assert all(any(n.startswith(f"worker{r}/") and n.endswith("/residual") for n in names) for r in range(3))
    assert any(n.startswith("worker2/") and n.endswith("/inner/q") for n in names)
    assert not any(n.startswith("leaf") for n in names)
    np.savez(tmp_path / "reordered.npz", **dict(reversed(list(arrays.items()))))
    _, back, _ = checkpoint.load(tmp_path / "reordered.npz")
    assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(state)
    assert all(np.array_equal(a, b) for a, b in zip(_leaves(back), _leaves(state)))


@pytest.mark.parametrize("kw", [dict(exchange="vmap"), dict(mode="async", jitter=0.3)])
def test_vmap_and_async_states_round_trip(tmp_path, kw):
    cfg = RunConfig(compressor="ef(topk(ratio=0.01))", workers=2, batch=32, steps=2, eval_every=2, **kw)
    state = checkpoint._fresh(cfg, (0,))
    path = checkpoint.save(tmp_path / "ck.npz", cfg, state)
    with np.load(path) as z:
        assert any(n.startswith("workers/" if cfg.exchange == "vmap" else "worker1/") for n in z.files)
    _, back, _ = checkpoint.load(path)
    assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(state)
    assert all(np.array_equal(a, b) for a, b in zip(_leaves(back), _leaves(state)))


def test_an_old_format_checkpoint_says_so(tmp_path):
    doc = {"format": "kfsim-train-checkpoint/1", "config": RunConfig().to_dict(), "step": 1, "leaves": 1,
           "treedef": "PyTreeDef(*)", "history": []}
    path = tmp_path / "old.npz"
    np.savez(path, leaf00000=np.zeros(3, np.float32),
             meta=np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8))
    with pytest.raises(ValueError, match=r"written by an older kfsim .*kfsim-train-checkpoint/1.*restart"):
        load_one_line(path)


def test_corrupt_or_truncated_files_give_one_clear_line(tmp_path):
    cfg = RunConfig(compressor="ef(topk(ratio=0.01))", workers=2, batch=32, steps=2, eval_every=2)
    good = checkpoint.save(tmp_path / "ck.npz", cfg, loop.init_state(cfg)).read_bytes()
    middle = bytearray(good)
    i = len(good) // 2
    middle[i:i + 64] = bytes(b ^ 0xFF for b in middle[i:i + 64])
    cases = {"truncated": (good[:len(good) // 2], "corrupt or truncated checkpoint"),
             "cut": (good[:-10], "corrupt or truncated checkpoint"),
             "flipped": (bytes(middle), r"corrupt or truncated checkpoint \(BadZipFile: Bad CRC-32"),
             "garbage": (b"not a checkpoint", r"not a kfsim checkpoint \(not an .npz archive\)"),
             "empty": (b"", "empty file, not a checkpoint")}
    for name, (data, message) in cases.items():
        path = tmp_path / f"{name}.npz"
        path.write_bytes(data)
        with pytest.raises(ValueError, match=message):
            load_one_line(path)
    with pytest.raises(ValueError, match="cannot read the checkpoint"):
        load_one_line(tmp_path / "missing.npz")


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
