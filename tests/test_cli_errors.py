"""Bad input to any `kfsim` command: one `error:` line, a non-zero exit, no traceback, no lost files.

In-process (typer's CliRunner) for the sweep; a few subprocess runs prove the real
exit status and stderr of the installed entry point.
"""
from __future__ import annotations

import gzip
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kfsim.cli as cli
from kfsim import records
from kfsim.sim import report

for _mod in cli.COMMAND_MODULES:
    importlib.import_module(_mod)

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
KFSIM = [sys.executable, "-c", "from kfsim.cli import main; main()"]


def lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.strip()]


def check_error(r, mention: str, code: int | None = None) -> str:
    """The run failed with exactly one error line on stderr that names `mention`; returns it."""
    out = r.output + (str(r.exception) if r.exception and not isinstance(r.exception, SystemExit) else "")
    assert "Traceback" not in out, out
    assert r.exit_code != 0, out
    if code is not None:
        assert r.exit_code == code, out
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    err = lines(r.stderr)
    assert len(err) == 1, r.stderr
    assert err[0].startswith("error: "), err[0]
    assert mention.lower() in err[0].lower(), err[0]
    return err[0]


@pytest.fixture
def files(tmp_path):
    """A directory, a regular file with known content, a bad TOML, a non-config file."""
    (tmp_path / "adir").mkdir()
    (tmp_path / "existing.txt").write_text("keep me\n")
    (tmp_path / "bad.toml").write_text("[scale\nmodel = \n")
    (tmp_path / "cases.json").write_text("{not json")
    (tmp_path / "unknown-key.toml").write_text('[advise]\nbandwith = "1Gbit/s"\n')
    (tmp_path / "bad-value.toml").write_text("[scale]\nworkers = 0\n")
    (tmp_path / "broken.py").write_text("1 / 0\n")
    return tmp_path


# (argv, text the error line must contain); paths are relative to the `files` fixture.
CASES = [
    # scale
    (["scale", "--out", "/proc/kfsim-x", "-c", "none", "--workers", "2"], "--out /proc/kfsim-x"),
    (["scale", "--out", "{d}/existing.txt", "-c", "none", "--workers", "2"], "not a directory"),
    (["scale", "--config", "{d}/adir"], "adir"),
    (["scale", "--config", "{d}/missing.toml"], "missing.toml"),
    (["scale", "--config", "{d}/bad.toml"], "bad.toml"),
    (["scale", "--workers", "abc"], "--workers"),
    (["scale", "--workers", "0"], "scale.workers"),
    (["scale", "--workers", "-4"], "scale.workers"),
    (["scale", "--model", "alexnet"], "alexnet"),
    (["scale", "-c", "nosuch()"], "nosuch"),
    (["scale", "--bandwidth", "0Gbit/s"], "--bandwidth"),
    (["scale", "--bandwidth", "10"], "needs a unit"),
    (["scale", "--bandwidth", "10Gbit"], "unknown bandwidth unit"),
    (["scale", "--gpus-per-node", "0"], "--gpus-per-node"),
    (["scale", "--nics-per-node", "0"], "--nics-per-node"),
    (["scale", "--interference", "0.5"], "--interference"),
    (["scale", "--jitter", "-1"], "--jitter"),
    (["scale", "--jitter", "x"], "--jitter"),
    (["scale", "--device", "tpu9"], "tpu9"),
    (["scale", "--inter", "carrier-pigeon"], "carrier-pigeon"),
    (["scale", "--collective", "zz"], "zz"),
    (["scale", "--network", "wat"], "network"),
    (["scale", "--bucket-mb", "100000"], "bucket_mb"),
    (["scale", "--bogus"], "--bogus"),
    # advise
    (["advise", "--out", "/proc/kfsim-x", "--bandwidth", "1Gbit/s", "--workers", "2"], "--out /proc/kfsim-x"),
    (["advise", "--config", "{d}/adir"], "adir"),
    (["advise", "--bandwidth", "1Gbit/s,x"], "--bandwidth"),
    (["advise", "--bandwidth", "0Mbit/s"], "bandwidth"),
    (["advise", "--workers", "2,-1"], "workers"),
    (["advise", "-c", "nosuch"], "nosuch"),
    (["advise", "--baseline", "nosuch"], "nosuch"),
    (["advise", "--latency", "-1us"], "--latency"),
    (["advise", "--latency", "50"], "needs a unit"),
    (["advise", "--config", "{d}/unknown-key.toml"], "advise.bandwith"),
    (["advise", "--config", "{d}/bad-value.toml"], "scale.workers"),
    # train (all rejected before a step runs)
    (["train", "--record", "/proc/kfsim-x", "--steps", "1"], "--record /proc/kfsim-x"),
    (["train", "--record", "{d}/adir", "--steps", "1"], "--record"),
    (["train", "--checkpoint", "{d}/adir", "--steps", "1"], "--checkpoint"),
    (["train", "--workers", "0"], "workers"),
    (["train", "--steps", "-1"], "steps"),
    (["train", "--task", "nosuch"], "nosuch"),
    (["train", "-c", "nosuch"], "nosuch"),
    (["train", "--mode", "weird"], "weird"),
    (["train", "--grad-mode", "x"], "grad_mode"),
    (["train", "--cluster", "{d}/missing.toml"], "missing.toml"),
    (["train", "--bandwidth", "-1Gbit/s"], "bandwidth"),
    (["train", "--bandwidth", "1"], "needs a unit"),
    (["train", "--config", "{d}/unknown-key.toml"], "advise.bandwith"),
    (["train", "--config", "{d}/bad.toml"], "bad.toml"),
    (["train", "--import", "{d}/missing.py"], "--import {d}/missing.py"),
    (["train", "--import", "{d}/broken.py"], "ZeroDivisionError"),
    (["train", "--collective", "zz"], "zz"),
    (["train", "--lr", "abc"], "--lr"),
    # study
    (["study", "--out", "{d}/existing.txt", "-c", "none", "--steps", "1"], "not a directory"),
    (["study", "--out", "/proc/kfsim-x", "-c", "none", "--steps", "1"], "--out /proc/kfsim-x"),
    (["study", "--bandwidth", "0Gbit/s", "-c", "none", "--steps", "1", "--out", "{d}/s"], "--bandwidth"),
    (["study", "-c", "nosuch", "--steps", "1", "--out", "{d}/s"], "nosuch"),
    (["study", "--steps", "0", "--out", "{d}/s"], "steps"),
    (["study", "--workers", "-3", "--out", "{d}/s"], "workers"),
    # launch (rejected before msrun starts)
    (["launch", "--import", "no_such_module_kfsim"], "--import no_such_module_kfsim"),
    (["launch", "--record", "/proc/kfsim-x"], "--record /proc/kfsim-x"),
    (["launch", "--record", "{d}/adir"], "--record"),
    (["launch", "--workers", "0"], "workers"),
    (["launch", "-c", "nosuch"], "nosuch"),
    (["launch", "--device", "TPU"], "TPU"),
    (["launch", "--rng", "nope"], "nope"),
    (["launch", "--global-batch", "3", "--workers", "2"], "divisible"),
    (["launch", "--timeout", "1 fortnight"], "--timeout"),
    (["launch", "--resume", "5"], "--ckpt-dir"),
    (["launch", "--timeout", "0"], "--timeout"),
    (["launch", "--bucket-mb", "0"], "--bucket-mb"),
    (["launch", "--bucket-mb", "nan"], "--bucket-mb"),
    (["launch", "--bucket-mb", "-2"], "--bucket-mb"),
    (["launch", "-c", "native", "--bucket-mb", "4"], "native baseline"),
    # testbed / calibrate / validate (rejected before any namespace or root check)
    (["testbed", "--workers", "1000"], "--workers"),
    (["testbed", "--workers", "0"], "--workers"),
    (["testbed", "--layers", "abc"], "layers"),
    (["testbed", "--bandwidth", "-1Mbit/s"], "--bandwidth"),
    (["testbed", "--latency", "5"], "needs a unit"),
    (["testbed", "--steps", "0"], "--steps"),
    (["calibrate", "--bandwidth", "x"], "--bandwidth"),
    (["calibrate", "--workers", "1"], "--workers"),
    (["calibrate", "--sizes", "a,b"], "--sizes"),
    (["calibrate", "-c", "nosuch"], "nosuch"),
    (["calibrate", "--out", "{d}/existing.txt"], "not a directory"),
    (["validate", "--merge", "{d}/missing.json"], "missing.json"),
    (["validate", "--merge", "{d}/cases.json"], "cases.json"),
    (["validate", "--what", "nope"], "--what"),
    (["validate", "--png", "{d}/adir"], "--png"),
    # the root
    (["nosuchcmd"], "nosuchcmd"),
]


@pytest.mark.parametrize("argv,mention", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_gives_one_error_line(files, argv, mention):
    argv = [a.replace("{d}", str(files)) for a in argv]
    r = runner.invoke(cli.app, argv)
    check_error(r, mention.replace("{d}", str(files)))
    assert (files / "existing.txt").read_text() == "keep me\n"


def test_failed_run_keeps_existing_outputs(tmp_path):
    out = tmp_path / "scale"
    out.mkdir()
    for name in ("scale.csv", "scale.json", "scale.png"):
        (out / name).write_text("good\n")
    r = runner.invoke(cli.app, ["scale", "--workers", "0", "--out", str(out)])
    check_error(r, "scale.workers", code=2)
    assert all((out / n).read_text() == "good\n" for n in ("scale.csv", "scale.json", "scale.png"))
    rec = tmp_path / "run.jsonl"
    rec.write_text("good record\n")
    r = runner.invoke(cli.app, ["train", "--task", "nosuch", "--record", str(rec)])
    check_error(r, "nosuch", code=2)
    assert rec.read_text() == "good record\n"


def test_atomic_report_writes(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("good\n")
    with pytest.raises(ValueError):  # the second row has a field the header lacks: fails mid-write
        report.write_csv(path, [{"a": 1}, {"a": 2, "b": 3}])
    assert path.read_text() == "good\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv"]  # no temp file left
    report.write_csv(path, [{"a": 1}])
    assert path.read_text().splitlines() == ["a", "1"]
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask  # ordinary permissions, not mkstemp's 0600


def test_atomic_records(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text("good\n")

    def steps():
        yield records.Step(0, 0.1, 10, 1.0)
        raise RuntimeError("crash mid-write")

    with pytest.raises(RuntimeError):
        records.write(path, "simulated", {}, steps())
    assert path.read_text() == "good\n" and sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl"]
    # a streaming writer that crashes keeps its steps in <path>.partial, the old record untouched
    with pytest.raises(RuntimeError):
        with records.Writer(path, "simulated", {"x": 1}) as w:
            w.add(records.Step(0, 0.1, 10, 1.0))
            raise RuntimeError("crash")
    assert path.read_text() == "good\n"
    partial = tmp_path / ("run.jsonl" + records.PARTIAL_SUFFIX)
    assert len(partial.read_text().splitlines()) == 2
    with records.Writer(path, "simulated", {"x": 1}) as w:
        w.add(records.Step(0, 0.1, 10, 1.0))
    assert len(records.read(path).steps) == 1 and not partial.exists()


def test_unexpected_exception_is_one_line_with_debug_hint(monkeypatch, tmp_path):
    import kfsim.cli.scale_cmd as scale_cmd

    def boom(*a, **k):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(scale_cmd, "run_scale", boom)
    args = ["scale", "--workers", "2", "-c", "none", "--out", str(tmp_path)]
    r = runner.invoke(cli.app, args)
    line = check_error(r, "RuntimeError: boom; second line", code=1)
    assert "KFSIM_DEBUG=1" in line
    monkeypatch.setenv("KFSIM_DEBUG", "1")
    r = runner.invoke(cli.app, args)
    assert isinstance(r.exception, RuntimeError)  # the traceback is let through


def _fake_fmnist(d: Path, payload: bytes) -> Path:
    d.mkdir()
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                 "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        (d / name).write_bytes(payload)
    return d


@pytest.mark.parametrize("kind", ["truncated", "not-gzip"])
def test_corrupt_data_files(tmp_path, monkeypatch, kind):
    from kfsim.data import fashion_mnist

    payload = gzip.compress(b"\0" * 4096)[:30] if kind == "truncated" else b"this is not gzip at all"
    d = _fake_fmnist(tmp_path / "fm", payload)
    monkeypatch.setenv(fashion_mnist.ENV_DIR, str(d))
    fashion_mnist._load.cache_clear()
    r = runner.invoke(cli.app, ["train", "--steps", "1", "--limit-train", "64", "--limit-test", "64"])
    check_error(r, "train-images-idx3-ubyte.gz", code=2)
    assert "corrupt or truncated" in r.stderr


def _run(args, **env):
    return subprocess.run(KFSIM + args, capture_output=True, text=True, cwd=ROOT, timeout=240,
                          env={**os.environ, "COLUMNS": "80", **env})


def check_proc(p: subprocess.CompletedProcess, mention: str, code: int = 2) -> None:
    assert "Traceback" not in p.stdout + p.stderr, p.stderr
    assert p.returncode == code, (p.returncode, p.stderr)
    err = lines(p.stderr)
    assert len(err) == 1 and err[0].startswith("error: ") and mention in err[0], p.stderr


def test_subprocess_out_and_config(tmp_path):
    existing = tmp_path / "existing.txt"
    existing.write_text("keep me\n")
    check_proc(_run(["scale", "--out", "/proc/kfsim-x", "-c", "none", "--workers", "2"]), "--out /proc/kfsim-x")
    check_proc(_run(["scale", "--out", str(existing), "-c", "none", "--workers", "2"]), str(existing))
    check_proc(_run(["advise", "--config", str(tmp_path)]), str(tmp_path))
    check_proc(_run(["scale", "--workers", "abc"]), "--workers")
    assert existing.read_text() == "keep me\n"


def test_subprocess_launch_testbed_and_data(tmp_path):
    check_proc(_run(["launch", "--import", "no_such_module_kfsim"]), "no_such_module_kfsim")
    check_proc(_run(["launch", "--record", "/proc/kfsim-x"]), "--record /proc/kfsim-x")
    check_proc(_run(["testbed", "--workers", "1000"]), "--workers")
    d = _fake_fmnist(tmp_path / "fm", gzip.compress(b"\0" * 4096)[:30])
    check_proc(_run(["train", "--steps", "1"], KFSIM_FASHION_MNIST_DIR=str(d)), "truncated")


def _have_fmnist() -> bool:
    from kfsim.data import fashion_mnist
    return fashion_mnist.available()


@pytest.mark.skipif(not _have_fmnist(), reason="Fashion-MNIST not installed")
def test_train_divergence_is_reported(tmp_path):
    from kfsim.train import loop

    rec = tmp_path / "run.jsonl"
    r = runner.invoke(cli.app, ["train", "--lr", "1e6", "--steps", "4", "--workers", "2", "--global-batch", "64",
                                "--limit-train", "512", "--limit-test", "128", "--eval-every", "4", "--json",
                                "--record", str(rec), "--out", str(tmp_path / "out")])
    line = check_error(r, "diverged", code=3)
    assert "--lr 1e+06" in line
    summary = json.loads(lines(r.stdout)[-1])
    assert summary["diverged"] is True
    assert len(records.read(rec).steps) == 4  # the record of the diverged run is kept, complete
    # the rule itself
    S = records.Step
    assert loop.divergence([S(0, 0, 0, 2.3), S(1, 0, 0, 2.0)]) is None
    assert "step 1" in loop.divergence([S(0, 0, 0, 2.3), S(1, 0, 0, float("nan"))])
    assert "1000x" in loop.divergence([S(0, 0, 0, 2.3), S(1, 0, 0, 2.3e4)])
