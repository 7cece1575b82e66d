"""The launcher fails fast and tells the truth (kfsim.launch.preflight / supervise / watchdog).

Preflight: bad data, folders, memory or schedule are one ``error:`` line before any
process starts. Then three real 2-worker msrun jobs (~30 s each): a rank killed by
SIGKILL is reported within 2 s naming the rank and the signal; a rank out of memory
(``--oom-at``: a real allocation failure under a lowered address-space limit) is
named as such with its log's line; SIGKILL of the ``kfsim launch`` process leaves no
msrun, scheduler or worker process, and per-step progress streams while it runs.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kfsim.launch import LaunchError, launch
from kfsim.launch.supervise import processes_with
from kfsim.launch.watchdog import start_time

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_process(monkeypatch):
    started = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a) or (_ for _ in ()).throw(AssertionError))
    return started


def test_preflight_refuses_before_any_process(tmp_path, monkeypatch, no_process):
    with pytest.raises(ValueError, match="resume step 30 must be < steps 30"):
        launch("none()", steps=30, resume_step=30, ckpt_dir=tmp_path / "ck")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="record folder .*afile: exists and is not a directory"):
        launch("none()", record=tmp_path / "afile" / "r.jsonl")
    with pytest.raises(ValueError, match="log folder /proc/kfsim-x: cannot write there"):
        launch("none()", log_dir="/proc/kfsim-x")
    # memory: the check refuses what does not fit, and nothing in the checkpoint folder is lost
    ck = tmp_path / "old"
    ck.mkdir()
    (ck / "meta.json").write_text("{}")
    (ck / "rank0.step4.ckpt").write_bytes(b"weights")
    with pytest.raises(ValueError, match=r"2 workers x 931322.57 GiB each .* do not fit"):
        launch("none()", workers=2, worker_mem=10**15, ckpt_dir=ck, overwrite=True)
    assert (ck / "rank0.step4.ckpt").read_bytes() == b"weights"
    monkeypatch.setenv("KFSIM_FASHION_MNIST_DIR", str(tmp_path / "nodata"))
    with pytest.raises(ValueError, match="Fashion-MNIST train data missing: .*nodata"):
        launch("none()", log_dir=tmp_path / "l")
    assert not no_process


@pytest.mark.parametrize("argv,mention", [
    (["--steps", "30", "--resume", "30", "--ckpt-dir", "{d}/ck"], "resume step 30 must be < steps 30"),
    (["--worker-mem", "1000000"], "do not fit"),
    (["--ckpt-dir", "{d}/afile/sub"], "--ckpt-dir"),
    ([], "Fashion-MNIST train data missing"),
], ids=["resume", "memory", "ckpt-dir", "data"])
def test_cli_preflight_is_one_error_line(tmp_path, monkeypatch, no_process, argv, mention):
    import kfsim.cli as cli
    import kfsim.cli.launch_cmd  # noqa: F401 - registers the command
    (tmp_path / "afile").write_text("x")
    if not argv:
        monkeypatch.setenv("KFSIM_FASHION_MNIST_DIR", str(tmp_path / "nodata"))
    r = CliRunner().invoke(cli.app, ["launch", "--out", str(tmp_path / "o"),
                                     *[a.replace("{d}", str(tmp_path)) for a in argv]])
    err = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.exit_code != 0 and "Traceback" not in r.output, r.output
    assert len(err) == 1 and err[0].startswith("error: ") and mention in err[0], r.stderr
    assert not no_process


def _rank_pid(log_dir: Path, rank: int) -> int:
    for pid in processes_with(str(log_dir)):
        try:
            env = (Path(f"/proc/{pid}/environ")).read_bytes().split(b"\0")
        except OSError:
            continue
        if b"MS_ROLE=MS_WORKER" in env and f"RANK_ID={rank}".encode() in env:
            return pid
    raise AssertionError(f"rank {rank} not found")


def _wait_step(log_dir: Path, rank: int, step: int, within: float = 240) -> None:
    hb = log_dir / f"hb.rank{rank}"
    deadline = time.time() + within
    while time.time() < deadline:
        text = hb.read_text() if hb.exists() else ""
        if text.isdigit() and int(text) >= step:
            return
        time.sleep(0.05)
    raise AssertionError(f"rank {rank} did not reach step {step}")


def test_killed_rank_is_named_within_2s(tmp_path):
    logs = tmp_path / "logs"
    killed = {}

    def killer():
        _wait_step(logs, 1, 3)
        pid = _rank_pid(logs, 1)
        killed["t"] = time.time()
        os.kill(pid, signal.SIGKILL)
        killed["pid"] = pid

    threading.Thread(target=killer, daemon=True).start()
    seen = []
    with pytest.raises(LaunchError) as info:
        launch("none()", steps=100_000, fingerprint_every=0, log_dir=logs, timeout_s=300, progress=seen.append)
    latency = time.time() - killed["t"]
    msg = str(info.value).splitlines()[0]
    print(f"SIGKILL of rank 1 -> LaunchError in {latency:.2f} s: {msg}")
    assert msg.startswith(f"rank 1 (pid {killed['pid']}) was killed by SIGKILL (signal 9)"), msg
    assert "worker_1.log: " in msg and "logs kept in" in msg
    assert latency < 2.0, (latency, msg)
    assert seen and seen[0].step == 0  # progress streamed while the job ran
    assert not processes_with(str(logs)), "a process of the failed job is still running"


def test_out_of_memory_rank_is_named_with_its_log_line(tmp_path):
    logs = tmp_path / "logs"
    t0 = time.time()
    with pytest.raises(LaunchError) as info:
        launch("none()", steps=50, fingerprint_every=0, log_dir=logs, timeout_s=300, extra_args=["--oom-at", "3"])
    msg = str(info.value).splitlines()[0]
    print(msg)
    assert msg.startswith("rank 1 (pid ") and "exited with code 1: out of memory; worker_1.log: " in msg, msg
    assert "Unable to allocate" in msg or "MemoryError" in msg, msg
    assert time.time() - t0 < 150  # not MindSpore's heartbeat timeout, nor the stall check (90 s)
    assert not processes_with(str(logs))


def test_sigkill_of_the_launcher_leaves_no_process(tmp_path):
    """`kfsim launch --json` streams one step object per step; SIGKILL it mid-run: msrun (its
    parent-death signal), the scheduler and the ranks (theirs, and their watchdogs) all end."""
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", "from kfsim.cli import main; main()", "launch", "-c", "none()",
                             "--steps", "100000", "--fingerprint-every", "0", "--json", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=open(tmp_path / "stderr", "w"), text=True, cwd=ROOT)
    try:
        steps = []
        for line in proc.stdout:
            event = json.loads(line)
            if event.get("event") == "step":
                steps.append(event["step"])
                if len(steps) == 3:
                    break
        assert steps == [0, 1, 2], (steps, (tmp_path / "stderr").read_text()[-2000:])
        job = processes_with(str(out / "logs"))
        assert len(job) >= 4, job  # msrun, the scheduler, 2 ranks
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.time() + 5
        while time.time() < deadline and any(start_time(p) is not None for p in job):
            time.sleep(0.1)
        left = {p: a[:2] for p, a in job.items() if start_time(p) is not None}
        assert not left, f"still running after the launcher's SIGKILL: {left}"
    finally:
        proc.kill()
        proc.wait()
        for pid in processes_with(str(out / "logs")):
            os.kill(pid, signal.SIGKILL)
