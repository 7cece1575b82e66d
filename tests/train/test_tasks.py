"""Every task trains: the CNN on Fashion-MNIST and the char-LM on the KJV text reduce their loss."""
from __future__ import annotations

import numpy as np

from kfsim.train import loop, tasks
from kfsim.train.config import RunConfig


def test_cnn_learns(fmnist_small):
    task = fmnist_small._replace(name="fmnist-cnn", model="cnn")
    res = loop.run(RunConfig(task="fmnist-cnn", compressor="ef(topk(ratio=0.1))", workers=2, batch=32, steps=25,
                             eval_every=25, lr=0.1), task=task)
    losses = [s.loss for s in res.steps]
    assert np.mean(losses[-5:]) < np.mean(losses[:5])


def test_charlm_learns(kjv_available):
    task = tasks.load("kjv-charlm", limit_train=4096, limit_test=512)
    assert task.x_train.shape[1] == 16 and task.x_train.dtype == np.int32
    res = loop.run(RunConfig(task="kjv-charlm", compressor="powersgd(rank=2)", workers=2, batch=64, steps=20,
                             eval_every=20, lr=0.5), task=task)
    losses = [s.loss for s in res.steps]
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.3
    assert res.summary["final_accuracy"] > 1 / 73


def test_each_task_has_a_reachable_default_target():
    """The studies' default time-to-accuracy target is the task's: a char-LM's next-character
    accuracy never reaches Fashion-MNIST's 78 % (it is ~34 % after a default study's 600 steps)."""
    import pytest
    assert set(tasks.TARGET_ACCURACY) == set(tasks.TASKS)
    assert tasks.target_accuracy("kjv-charlm") == 0.30 and tasks.target_accuracy("fmnist-mlp") == 0.78
    assert tasks.target_accuracy("kjv-charlm", 0.5) == 0.5  # an explicit --target wins
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        tasks.target_accuracy("nope")


def test_study_takes_the_tasks_target(kjv_available, tmp_path):
    import json

    from typer.testing import CliRunner

    from kfsim import cli
    from tests.test_cli_errors import check_error
    runner = CliRunner()
    common = ["--family", "local", "-c", "none", "--local-steps", "2", "--steps", "4", "--eval-every", "2",
              "--limit-train", "256", "--limit-test", "64", "--workers", "2", "--global-batch", "16", "--quiet"]
    r = runner.invoke(cli.app, ["study", "--task", "kjv-charlm", *common, "--out", str(tmp_path / "kjv")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "kjv" / "study.json").read_text())["config"]["target_accuracy"] == 0.30
    r = runner.invoke(cli.app, ["study", "--task", "kjv-charlm", "--target", "0.2", *common,
                                "--out", str(tmp_path / "kjv2")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "kjv2" / "study.json").read_text())["config"]["target_accuracy"] == 0.2
    check_error(runner.invoke(cli.app, ["study", "--task", "nope", "--out", str(tmp_path / "x")]), "unknown task")
    assert not (tmp_path / "x").exists()
