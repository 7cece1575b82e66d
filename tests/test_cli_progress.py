"""Progress and outputs of long commands: --json step lines, --quiet, plain lines, results/<command>/.

Each command runs in-process (typer's CliRunner, stderr not a terminal) in a
temporary working directory, so the default output folders are checked where
a user would find them.
"""
from __future__ import annotations

import importlib
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kfsim.cli as cli
from kfsim import records
from kfsim.cli.progress import Reporter, clean
from kfsim.launch import launcher

for _mod in cli.COMMAND_MODULES:
    importlib.import_module(_mod)

runner = CliRunner()
SMALL = ["--workers", "2", "--limit-train", "1024", "--limit-test", "128"]


def _have_fmnist() -> bool:
    from kfsim.data import fashion_mnist
    return fashion_mnist.available()


needs_data = pytest.mark.skipif(not _have_fmnist(), reason="Fashion-MNIST not installed")


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KFSIM_PROGRESS_EVERY", "1000")
    return tmp_path


@needs_data
def test_train_json_lines_and_default_outputs(cwd):
    r = runner.invoke(cli.app, ["train", "--steps", "40", "--eval-every", "20", "--json", *SMALL])
    assert r.exit_code == 0, r.output
    assert r.stderr == ""
    objs = json_lines(r.stdout)  # every line is one JSON object
    steps = [o for o in objs if o["event"] == "step"]
    assert [o["step"] for o in steps] == list(range(40))
    assert all(isinstance(o["loss"], float) and math.isfinite(o["loss"]) for o in steps)
    assert all(o["ms_per_step"] > 0 for o in steps)
    assert [o["step"] for o in steps if o["accuracy"] is not None] == [19, 39]
    summary = objs[-1]
    assert summary["event"] == "summary" and summary["steps"] == 40 and summary["diverged"] is False
    assert summary["out"] == "results/train"
    assert summary["files"] == ["results/train/record.jsonl", "results/train/summary.json"]
    rec = records.read(cwd / "results/train/record.jsonl")
    assert [o["loss"] for o in steps] == rec.losses  # the step lines are the record's steps
    assert "wall_s" not in rec.steps[0].extra        # the wall time goes to progress only
    saved = json.loads((cwd / "results/train/summary.json").read_text())
    assert saved["final_train_loss"] == rec.losses[-1] == summary["final_train_loss"]


@needs_data
def test_train_quiet_prints_only_the_path_and_plain_lines(cwd):
    r = runner.invoke(cli.app, ["train", "--steps", "4", "--eval-every", "2", "-q", "--out", "mine", *SMALL])
    assert r.exit_code == 0, r.output
    assert r.stdout == "mine\n" and r.stderr == ""
    assert len(records.read(cwd / "mine/record.jsonl").steps) == 4
    # default mode, stderr not a terminal: plain lines (first step, evaluations, last step), table on stdout
    r = runner.invoke(cli.app, ["train", "--steps", "4", "--eval-every", "2", *SMALL])
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    assert [x.split()[3] for x in lines] == ["1/4", "2/4", "4/4"], lines
    assert all(" loss " in x and "ms/step" in x for x in lines)
    assert "accuracy" in lines[-1]
    assert r.stdout.splitlines()[-1] == "wrote results/train/record.jsonl, results/train/summary.json"
    # --json --quiet: the summary object alone
    r = runner.invoke(cli.app, ["train", "--steps", "2", "--json", "-q", *SMALL])
    objs = json_lines(r.stdout)
    assert len(objs) == 1 and objs[0]["event"] == "summary" and objs[0]["steps"] == 2


@needs_data
def test_study_default_folder_and_run_events(cwd):
    r = runner.invoke(cli.app, ["study", "-c", "none()", "--steps", "4", "--eval-every", "2", "--json",
                                "--workers", "2", "--limit-test", "128"])
    assert r.exit_code == 0, r.output
    objs = json_lines(r.stdout)
    steps = [o for o in objs if o["event"] == "step"]
    assert [(o["run"], o["step"]) for o in steps] == [("none()", t) for t in range(4)]
    assert [o["event"] for o in objs if o["event"] not in ("step",)] == ["log", "summary"]
    assert objs[-1]["out"] == "results/study" and objs[-1]["rows"][0]["compressor"] == "none()"
    assert {"study.csv", "study.json", "accuracy_vs_time.png", "runs"} <= {p.name for p in (cwd / "results/study").iterdir()}
    assert len(list((cwd / "results/study/runs").glob("*.jsonl"))) == 1
    assert not (cwd / "study-out").exists()


def _fake_launch(calls: list):
    """Stands in for kfsim.launch.launch: streams a record through the launcher's RecordTail."""
    def fake(spec, **kw):
        calls.append(kw)
        kw["log"]("msrun started")
        tail = launcher.RecordTail(kw["record"], kw["progress"])
        with records.Writer(kw["record"], "mindspore", {"compressor": spec}) as w:
            for t in range(3):
                w.add(records.Step(t, 0.002 * (t + 1), 100, 2.0 - 0.1 * t, None, {"rank_loss": 1.0}))
                if t < 2:
                    tail.poll()
        tail.finish()
        Path(kw["log_dir"]).mkdir(parents=True, exist_ok=True)
        return launcher.LaunchResult(Path(kw["record"]), Path(kw["log_dir"]), 1.5)
    return fake


def test_launch_record_and_logs_under_results_launch(cwd, monkeypatch):
    import kfsim.launch

    calls: list = []
    monkeypatch.setattr(kfsim.launch, "launch", _fake_launch(calls))
    r = runner.invoke(cli.app, ["launch", "--steps", "3", "--json"])
    assert r.exit_code == 0, r.output
    assert calls[0]["record"] == Path("results/launch/record.jsonl")
    assert calls[0]["log_dir"] == Path("results/launch/logs")
    objs = json_lines(r.stdout)
    steps = [o for o in objs if o["event"] == "step"]
    assert [o["step"] for o in steps] == [0, 1, 2]  # each once, in order, partly after the rename
    assert [o["ms_per_step"] for o in steps] == pytest.approx([2.0, 4.0, 6.0])  # the worker's measured step
    assert objs[-1]["record"] == "results/launch/record.jsonl" and objs[-1]["logs"] == "results/launch/logs"
    r = runner.invoke(cli.app, ["launch", "--steps", "3", "-q"])
    assert r.stdout == "results/launch\n" and r.stderr == ""
    r = runner.invoke(cli.app, ["launch", "--steps", "3"])
    assert r.stdout.splitlines()[-2:] == ["run record: results/launch/record.jsonl", "logs: results/launch/logs"]
    assert "msrun started" in r.stderr and "launch mlp: step 3/3" in r.stderr


def test_record_tail_partial_lines_and_stale_partial(tmp_path):
    path = tmp_path / "r.jsonl"
    partial = tmp_path / ("r.jsonl" + records.PARTIAL_SUFFIX)
    partial.write_text('{"kind": "step", "step": 9, "time_s": 1, "bytes_sent": 0, "loss": 1}\n')
    seen: list = []
    tail = launcher.RecordTail(path, seen.append)
    assert not partial.exists()  # an earlier job's partial record is not taken for this one's
    line = json.dumps({"kind": "step", "step": 0, "time_s": 0.5, "bytes_sent": 8, "loss": 2.5,
                       "accuracy": None, "extra": {}})
    with partial.open("w") as f:
        f.write('{"kind": "header", "source": "mindspore", "meta": {}}\n' + line[:20])
        f.flush()
        tail.poll()
        assert seen == []  # half a line is not a step yet
        f.write(line[20:] + "\n")
        f.flush()
        tail.poll()
    assert [(s.step, s.loss, s.extra["wall_s"]) for s in seen] == [(0, 2.5, 0.5)]
    partial.rename(path)
    tail.finish()
    assert len(seen) == 1


def test_reporter_modes(capsys):
    assert clean({"a": float("nan"), "b": [float("inf"), 1.5], "p": Path("x")}) == {"a": None, "b": [None, 1.5],
                                                                                     "p": "x"}
    rec = records.Step(0, 0.01, 4, float("nan"), None, {"wall_s": 0.003})
    with Reporter("x", as_json=True) as rep:
        rep.steps("x", total=1)(rec)
        rep.log("hello")
    assert json_lines(capsys.readouterr().out) == [
        {"event": "step", "command": "x", "step": 0, "loss": None, "ms_per_step": 3.0, "accuracy": None,
         "bytes_sent": 4, "time_s": 0.01, "sim_time_s": None, "test_loss": None},
        {"event": "log", "command": "x", "message": "hello"}]
    with Reporter("x", tty=True) as rep:  # the rich display, forced
        assert rep.mode == "rich"
        rep.steps("bar", total=1)(rec._replace(loss=1.25))
        items = rep.items("cells")
        items.status("now")
        items.advance("cell done")
    rep.finish("out", ["out/a"])
    cap = capsys.readouterr()
    assert "cell done" in cap.err and "bar" in cap.err and cap.out == "wrote out/a\n"


def test_scale_and_validate_quiet_print_the_default_folder(cwd):
    r = runner.invoke(cli.app, ["scale", "--workers", "2", "-c", "none()", "--no-plot", "--quiet"])
    assert r.exit_code == 0, r.output
    assert r.stdout == "results/scale\n" and (cwd / "results/scale/scale.csv").is_file()
    cases = Path(__file__).resolve().parents[1] / "profiles/validate/validate.json"  # an earlier run's cases
    r = runner.invoke(cli.app, ["validate", "--merge", str(cases), "-q"])
    assert r.exit_code == 0, r.output
    assert r.stdout == "results/validate\n" and r.stderr == ""
    assert json.loads((cwd / "results/validate/validate.json").read_text()) == json.loads(cases.read_text())
    assert (cwd / "results/validate/validate.png").is_file()
