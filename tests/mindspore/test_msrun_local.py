"""Local SGD / DiLoCo as a real 2-worker msrun job, against the simulation (``kfsim.train.local``).

The same model, shards, seed, compressor and LocalSGD settings run as a
MindSpore job (``launch(..., local=LocalSGD(...))``) and simulated give loss
trajectories within test_msrun.TOL[spec] (the per-step compressors'
tolerance) at every step, and outer parameters θ within the same bound. One
job covers the whole algorithm: H = 4 with two streaming fragments, an
exchange overlapping the next inner step, outer lr 0.7 and Nesterov
momentum 0.9, pseudo-gradients compressed by a *scheduled* codec (dense
warm-up, then top-k with per-worker EF: fragment 0's reducer switches phase
between its exchanges at steps 1 and 5), started from the command line
(``kfsim launch --local-steps ...``). A second job (``launch()``) resumes its
step-4 checkpoint: steps 4..7 and the step-8 checkpoint (θ, outer momentum,
a_r, the EF residuals) are bit-identical.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

from compressors.outer import LocalSGD
from kfsim import records
from kfsim.launch import launch
from tests.mindspore.test_msrun import TOL

INNER = "ef(topk(ratio=0.01))"
SPEC = f"warmup({INNER}, steps=2)"
ALGO = LocalSGD(local_steps=4, outer_lr=0.7, outer_momentum=0.9, fragments=2, delay=1)
STEPS = 8


def simulate(spec, algo, steps):
    from kfsim.train import loop
    from kfsim.train.config import RunConfig
    cfg = RunConfig(task="fmnist-mlp", compressor=spec, workers=2, batch=64, lr=0.1, steps=steps, seed=0,
                    eval_every=10_000, limit_test=64, local_steps=algo.local_steps, outer_lr=algo.outer_lr,
                    outer_momentum=algo.outer_momentum, fragments=algo.fragments, overlap_steps=algo.delay)
    return loop.run(cfg)


def checkpoint_arrays(path) -> dict:
    import backends.mindspore  # noqa: F401  (MindSpore's NumPy-1.x start-up, before its first call)
    import mindspore as ms
    return {k: v.asnumpy() for k, v in ms.load_checkpoint(str(path)).items()}


class Job(NamedTuple):
    kw: dict
    rec: records.RunRecord
    sim: object
    full: list  # each rank's step-8 checkpoint arrays (before the resume test rewrites them)


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Job:
    """The fresh job (checkpoints at steps 4 and 8) and its simulation, shared by the module's tests."""
    from typer.testing import CliRunner

    import kfsim.cli.launch_cmd  # noqa: F401  (registers `launch` on the app)
    from kfsim import cli
    d = tmp_path_factory.mktemp("local")
    kw = dict(workers=2, steps=STEPS, batch=64, seed=0, rng="exact", local=ALGO, ckpt_dir=d / "ckpt",
              ckpt_every=4, fingerprint_every=2, timeout_s=600)  # replicas compared on θ every 2 steps
    argv = ["launch", "-c", SPEC, "--workers", "2", "--steps", str(STEPS), "--global-batch", "64", "--seed", "0",
            "--rng", "exact", "--local-steps", str(ALGO.local_steps), "--outer-lr", str(ALGO.outer_lr),
            "--outer-momentum", str(ALGO.outer_momentum), "--fragments", str(ALGO.fragments),
            "--overlap-steps", str(ALGO.delay), "--ckpt-dir", str(d / "ckpt"), "--ckpt-every", "4",
            "--fingerprint-every", "2", "--timeout", "600", "--out", str(d / "out"), "--quiet"]
    run = CliRunner().invoke(cli.app, argv)
    assert run.exit_code == 0, run.output
    rec = records.read(d / "out" / "record.jsonl")
    full = [checkpoint_arrays(d / "ckpt" / f"rank{r}.step8.ckpt") for r in range(2)]
    return Job(kw, rec, simulate(SPEC, ALGO, STEPS), full)


def test_local_sgd_job_matches_simulation(job):
    rec, sim, full = job.rec, job.sim, job.full
    assert rec.source == "mindspore" and [s.step for s in rec.steps] == list(range(STEPS))
    assert rec.meta["local"] == dict(ALGO._asdict())
    assert [s.extra.get("checkpoint") for s in rec.steps] == [None, None, None, 4, None, None, None, 8]
    diffs = [abs(a.loss - b.loss) for a, b in zip(rec.steps, sim.steps)]
    assert max(diffs) < TOL[INNER], diffs
    # the exchanges happen where the simulation has them (fragment f after steps 1, 3, 5, 7), with its bytes:
    # fragment 0 dense at step 1 (warm-up), sparse at step 5 (the same reducer, its next phase)
    assert [s.bytes_sent for s in rec.steps] == [s.bytes_sent for s in sim.steps]
    assert 0 < rec.steps[5].bytes_sent < rec.steps[1].bytes_sent / 10
    assert [s.extra.get("fragment") for s in rec.steps] == [ALGO.starts(t) for t in range(STEPS)]
    assert [s.extra.get("landed") for s in rec.steps] == [ALGO.lands(t) for t in range(STEPS)]
    assert sum(s.bytes_sent > 0 for s in rec.steps) == STEPS // ALGO.period
    theta = {k: np.asarray(v) for k, v in sim.state.outer.anchor.items()}
    for r in range(2):
        for k, v in theta.items():
            assert np.max(np.abs(full[r][f"local.anchor.{k}"] - v)) < TOL[INNER], (r, k)
    assert any(np.any(full[0][f"local.momentum.{k}"] != 0) for k in theta)  # the outer momentum is live
    # the replicas share θ bit for bit and differ in their own progress a_r (and their EF residuals)
    assert all(np.array_equal(full[0][f"local.anchor.{k}"], full[1][f"local.anchor.{k}"]) for k in theta)
    assert any(not np.array_equal(full[0][f"local.accum.{k}"], full[1][f"local.accum.{k}"]) for k in theta)


def test_local_sgd_job_resumes_bit_identically(job, tmp_path):
    """A second job resumes the step-4 checkpoint: steps 4..7 and every array of the step-8 checkpoint
    (net, θ, outer momentum, mean in flight, a_r, pending_r, EF residuals, step counters) as the first's."""
    kw, ck = job.kw, job.kw["ckpt_dir"]
    with pytest.raises(ValueError, match="checkpoint does not match this run: local"):
        launch(SPEC, **{**kw, "local": ALGO._replace(outer_lr=0.5)}, resume_step=4)
    res = records.read(launch(SPEC, record=tmp_path / "res.jsonl", log_dir=tmp_path / "l1", resume_step=4,
                              **kw).record)
    assert [s.step for s in res.steps] == [4, 5, 6, 7]
    assert [(s.loss, s.extra["rank_loss"], s.bytes_sent) for s in res.steps] == \
        [(s.loss, s.extra["rank_loss"], s.bytes_sent) for s in job.rec.steps[4:]]
    again = [checkpoint_arrays(ck / f"rank{r}.step8.ckpt") for r in range(2)]
    for r in range(2):
        assert again[r].keys() == job.full[r].keys()
        assert [k for k in job.full[r] if not np.array_equal(again[r][k], job.full[r][k])] == [], r

@pytest.mark.parametrize("argv, mention", [
    (["--outer-lr", "0.5"], "set local_steps (--local-steps H)"),
    (["--local-steps", "0"], "local steps must be an int >= 1"),
    (["--local-steps", "4", "--fragments", "3"], "multiple of fragments"),
    (["--local-steps", "4", "--fragments", "2", "--overlap-steps", "2"], "delay"),
    (["--local-steps", "8", "--fragments", "8"], "exceeds the model's 4 tensors"),
    (["--local-steps", "4", "--outer-momentum", "1"], "outer momentum"),
    (["--local-steps", "4", "-c", "native"], "'native'"),
    (["--local-steps", "x"], "--local-steps"),
])
def test_bad_local_flags_fail_before_any_worker_starts(tmp_path, monkeypatch, argv, mention):
    import subprocess

    from typer.testing import CliRunner

    from kfsim import cli
    from tests.test_cli_errors import check_error
    started = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a) or (_ for _ in ()).throw(AssertionError))
    check_error(CliRunner().invoke(cli.app, ["launch", *argv, "--out", str(tmp_path / "out")]), mention)
    assert not started


def test_launch_and_train_share_the_local_options():
    """One definition (kfsim.cli.local_options): the same flags, defaults and help in both commands."""
    import typer

    from kfsim import cli
    cmds = typer.main.get_command(cli.app).commands
    keys = ("local_steps", "outer_lr", "outer_momentum", "fragments", "overlap_steps")

    def opts(name):
        return {p.name: (p.opts, p.default, p.help, p.metavar) for p in cmds[name].params if p.name in keys}

    assert opts("launch") == opts("train") and len(opts("launch")) == len(keys)
