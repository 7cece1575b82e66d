"""Simulated local SGD / DiLoCo: H = 1 equals per-step averaging, resume, timing, study, CLI errors."""
from __future__ import annotations

import jax
import numpy as np
import pytest
from typer.testing import CliRunner

from compressors.outer import LocalSGD
from kfsim import cli
from kfsim.sim.localsgd import predict_local
from kfsim.train import checkpoint, local, local_study, loop, timing
from kfsim.train.config import RunConfig
from tests.test_cli_errors import check_error

KW = dict(workers=4, batch=64, eval_every=3)


@pytest.mark.parametrize("spec", ["ef(topk(ratio=0.01))", "sumquant(bits=4, workers=16)"])
def test_one_local_step_with_plain_outer_step_is_per_step_averaging_bit_for_bit(fmnist_small, spec):
    cfg = RunConfig(compressor=spec, steps=6, **KW)
    plain = loop.run(cfg, task=fmnist_small)
    loc = loop.run(cfg.replace(local_steps=1, outer_lr=1.0, outer_momentum=0.0), task=fmnist_small)
    for k, v in plain.state.params.items():
        assert np.array_equal(np.asarray(v), np.asarray(loc.state.outer.anchor[k])), k
    assert [s.loss for s in plain.steps] == [s.loss for s in loc.steps]
    assert [s.accuracy for s in plain.steps] == [s.accuracy for s in loc.steps]
    assert [s.bytes_sent for s in plain.steps] == [s.bytes_sent for s in loc.steps]
    for r, w in enumerate(loc.state.workers):  # the EF residuals are the per-step run's, worker by worker
        assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in
                   zip(jax.tree_util.tree_leaves(w.comp), jax.tree_util.tree_leaves(plain.state.states[r])))
    if spec.startswith("ef"):  # an outer step that is not plain averaging changes the trajectory
        other = loop.run(cfg.replace(local_steps=1, outer_lr=0.7, outer_momentum=0.9), task=fmnist_small)
        assert other.steps[-1].loss != plain.steps[-1].loss


def _leaves(state):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves((state.outer, state.workers))]


@pytest.mark.parametrize("until", [4, 5])  # 4: fragment 1's exchange (started after step 3) is in flight
def test_streaming_checkpoint_resume_is_bit_identical(fmnist_small, tmp_path, until):
    cfg = RunConfig(compressor="ef(topk(ratio=0.05))", steps=10, momentum=0.9, local_steps=4, fragments=2,
                    overlap_steps=1, outer_lr=0.7, outer_momentum=0.9, **KW)
    full = loop.run(cfg, task=fmnist_small)
    part = local.LocalTrainer(cfg, fmnist_small).run(until=until)
    if until == 4:
        assert any(np.any(np.asarray(v)) for v in part.state.outer.inflight.values())
    path = checkpoint.save(tmp_path / "ck.npz", cfg, part.state, part.steps)
    cfg2, state, hist = checkpoint.load(path)
    assert cfg2 == cfg and state.step == until and state.clock == part.state.clock
    assert all(np.array_equal(a, b) for a, b in zip(_leaves(state), _leaves(part.state)))
    rest = local.LocalTrainer(cfg, fmnist_small).run(state, history=hist)
    assert all(np.array_equal(a, b) for a, b in zip(_leaves(rest.state), _leaves(full.state)))
    assert [s.loss for s in rest.steps] == [s.loss for s in full.steps]
    assert rest.state.clock == full.state.clock and rest.state.bytes_sent == full.state.bytes_sent


def test_checkpoint_state_names(fmnist_small):
    cfg = RunConfig(compressor="ef(topk(ratio=0.05))", steps=2, local_steps=2, momentum=0.9, **KW)
    names = set(checkpoint.array_names(cfg, local.init_state(cfg)))
    for want in ("outer/anchor/w1", "outer/momentum/b2", "outer/inflight/w2", "worker0/accum/w1",
                 "worker3/pending/b1", "worker1/inner/w1", "worker2/comp/w1/residual"):
        assert want in names, want
    assert not any(n.startswith(("params/", "opt/")) for n in names)


def test_fragments_sync_in_turn(fmnist_small):
    cfg = RunConfig(compressor="none()", steps=4, local_steps=4, fragments=2, eval_every=4, workers=2, batch=32)
    res = loop.run(cfg, task=fmnist_small)
    first, second = local.names(cfg)[:2], local.names(cfg)[2:]
    for w in res.state.workers:  # fragment 1 synced after step 3; fragment 0 after step 1, then 2 local steps
        assert not any(np.any(np.asarray(w.accum[k])) for k in second)
        assert all(np.any(np.asarray(w.accum[k])) for k in first)
    sent = [s.bytes_sent for s in res.steps]
    assert sent[0] == sent[2] == 0 and sent[1] > 0 and sent[3] > 0


def test_timing_exchange_every_h_steps_with_overlap():
    prof = timing.model_profile("mlp", 32)
    cl = timing.cluster("nodes", 0.1, 4)
    one = predict_local(prof, cl, "none()", 4, LocalSGD(1))
    eight = predict_local(prof, cl, "none()", 4, LocalSGD(8))
    assert eight.exchange_s == one.exchange_s and one.exchange_s[0] > 100 * one.inner_s
    assert eight.mean_step_s == pytest.approx(one.inner_s + one.exchange_s[0] / 8, rel=1e-12)
    assert [eight.bytes_at(t) for t in range(8)] == [0] * 7 + [int(one.payload_bytes[0])]
    stream = predict_local(prof, cl, "none()", 4, LocalSGD(8, fragments=2, delay=3))
    assert sum(stream.payload_bytes) == one.payload_bytes[0]
    for e, x in zip(stream.exposed_s, stream.exchange_s):
        assert e == pytest.approx(max(0.0, x - 3 * stream.inner_s))
    assert stream.step_s(3) == stream.inner_s and stream.step_s(6) > stream.inner_s  # lands 3 steps later
    alone = predict_local(prof, cl, "none()", 1, LocalSGD(8))
    assert alone.exchange_s == (0.0,) and alone.mean_step_s == alone.inner_s


def test_local_study_rows(fmnist_small, tmp_path, monkeypatch):
    monkeypatch.setattr(local_study.tasks, "load", lambda *a, **k: fmnist_small)
    cfg = local_study.LocalStudyConfig(specs=("none()",), local_steps=(2,), steps=4, eval_every=2, workers=2,
                                       batch=32, target_accuracy=0.2)
    rows = local_study.run_local_study(cfg, tmp_path, log=lambda s: None)
    assert [r["method"] for r in rows] == ["per-step", "local H=2"]
    assert rows[1]["bytes_per_worker"] * 2 == rows[0]["bytes_per_worker"]
    assert rows[0]["tta_speedup@0.1G"] == 1.0
    assert rows[1]["step_s@0.1G"] < rows[0]["step_s@0.1G"] and rows[1]["step_s@1G"] < rows[1]["step_s@0.1G"]
    for f in ("study.csv", "study.json", "accuracy_vs_time.png"):
        assert (tmp_path / f).stat().st_size > 0
    assert len(list((tmp_path / "runs").glob("*.jsonl"))) == 2


runner = CliRunner()


@pytest.mark.parametrize("argv,mention", [
    (["train", "--local-steps", "0"], "local steps"),
    (["train", "--outer-lr", "0.5"], "--local-steps"),
    (["train", "--fragments", "2"], "--local-steps"),
    (["train", "--local-steps", "8", "--fragments", "3"], "multiple of fragments"),
    (["train", "--local-steps", "4", "--overlap-steps", "4"], "overlap steps"),
    (["train", "--local-steps", "4", "--outer-momentum", "1"], "outer momentum"),
    (["train", "--local-steps", "4", "--mode", "async"], "mode"),
    (["train", "--local-steps", "8", "--fragments", "8", "--task", "fmnist-mlp"], "tensors"),
    (["train", "--local-steps", "x"], "--local-steps"),
    (["study", "--family", "nope"], "--family"),
    (["study", "--local-steps", "8"], "--family local"),
    (["study", "--family", "local", "--local-steps", "1,0"], "local steps"),
    (["study", "--family", "local", "--local-steps", "a"], "--local-steps"),
    (["study", "--family", "local", "-c", "nosuch"], "nosuch"),
    (["study", "--family", "local", "--workers", "32", "--global-batch", "128"], "headroom"),
])
def test_bad_local_flags_give_one_error_line(tmp_path, argv, mention):
    r = runner.invoke(cli.app, argv + ["--out", str(tmp_path / "out")])
    check_error(r, mention)
    assert not (tmp_path / "out").exists()


def test_train_config_section_sets_local_sgd(tmp_path):
    from kfsim.records import read

    cfg = ('[train]\nsteps = 4\nglobal_batch = 32\nworkers = 2\nlimit_train = 256\nlimit_test = 64\n'
           'eval_every = 2\nlocal_steps = 4\nfragments = 2\noverlap_steps = 1\nouter_lr = 0.5\nquiet = true\n')
    (tmp_path / "kfsim.toml").write_text(cfg)
    r = runner.invoke(cli.app, ["train", "--config", str(tmp_path / "kfsim.toml"), "--out", str(tmp_path / "a"),
                                "--outer-momentum", "0.8"])
    assert r.exit_code == 0, r.output
    rec = read(tmp_path / "a" / "record.jsonl")
    assert (rec.meta["local_steps"], rec.meta["fragments"], rec.meta["overlap_steps"]) == (4, 2, 1)
    assert (rec.meta["outer_lr"], rec.meta["outer_momentum"]) == (0.5, 0.8)
    assert [s.bytes_sent > 0 for s in rec.steps] == [False, True, False, True]
    (tmp_path / "bad.toml").write_text('[study]\nlocal_steps = "x"\n')
    check_error(runner.invoke(cli.app, ["study", "--config", str(tmp_path / "bad.toml")]), "local_steps")
