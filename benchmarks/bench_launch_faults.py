"""Benchmark: how fast the launcher tells the truth about a dead job (kfsim.launch.supervise / watchdog).

Two real 2-worker msrun jobs (``none()``, Fashion-MNIST MLP, CPU):

* rank death: rank 1 is SIGKILLed from outside once its heartbeat reaches step 3;
  measured: seconds from the kill to ``launch()`` raising the LaunchError that
  names the rank and the signal (target 2 s; MindSpore's own heartbeat takes ~30 s);
* launcher death: ``kfsim launch --json`` is SIGKILLed after three streamed steps;
  measured: seconds from the kill until no msrun, scheduler or rank process of the
  job is left (target 2 s: the parent-death signals act at once, the watchdogs
  within their 0.5 s poll).

Printed side by side: measured seconds, the target and their ratio.

    python benchmarks/bench_launch_faults.py [--repeats 1]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def wait_step(log_dir: Path, rank: int, step: int, within: float = 300) -> None:
    hb, deadline = log_dir / f"hb.rank{rank}", time.time() + within
    while time.time() < deadline:
        text = hb.read_text() if hb.exists() else ""
        if text.isdigit() and int(text) >= step:
            return
        time.sleep(0.05)
    raise SystemExit(f"rank {rank} did not reach step {step}")


def rank_death(tmp: Path) -> tuple[float, str]:
    from kfsim.launch import LaunchError, launch, supervise
    logs, killed = tmp / "logs", {}

    def killer():
        wait_step(logs, 1, 3)
        for pid in supervise.processes_with(str(logs)):
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            if b"MS_ROLE=MS_WORKER" in env and b"RANK_ID=1" in env:
                killed["t"] = time.time()
                os.kill(pid, signal.SIGKILL)
                return

    threading.Thread(target=killer, daemon=True).start()
    try:
        launch("none()", steps=100_000, fingerprint_every=0, log_dir=logs, timeout_s=300)
    except LaunchError as exc:
        return time.time() - killed["t"], str(exc).splitlines()[0][:110]
    raise SystemExit("the job did not fail")


def launcher_death(tmp: Path) -> tuple[float, str]:
    from kfsim.launch import supervise
    from kfsim.launch.watchdog import start_time
    out = tmp / "run"
    proc = subprocess.Popen([sys.executable, "-c", "from kfsim.cli import main; main()", "launch", "-c", "none()",
                             "--steps", "100000", "--fingerprint-every", "0", "--json", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    seen = 0
    for line in proc.stdout:
        seen += json.loads(line).get("event") == "step"
        if seen == 3:
            break
    job = supervise.processes_with(str(out / "logs"))
    t0 = time.time()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    while any(start_time(p) is not None for p in job) and time.time() - t0 < 30:
        time.sleep(0.01)
    left = [p for p in job if start_time(p) is not None]
    for p in left:
        os.kill(p, signal.SIGKILL)
    return time.time() - t0, f"{len(job)} processes, {len(left)} left after 30 s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    a = ap.parse_args()
    rows = []
    for _ in range(a.repeats):
        with tempfile.TemporaryDirectory(prefix="kfsim-bench-faults-") as d:
            rows.append(("rank SIGKILL -> LaunchError", *rank_death(Path(d)), 2.0))
        with tempfile.TemporaryDirectory(prefix="kfsim-bench-faults-") as d:
            rows.append(("launcher SIGKILL -> job gone", *launcher_death(Path(d)), 2.0))
    print(f"{'event':30s} {'measured s':>10s} {'target s':>9s} {'ratio':>6s}  detail")
    for what, s, detail, target in rows:
        print(f"{what:30s} {s:10.2f} {target:9.1f} {s / target:6.2f}  {detail}")


if __name__ == "__main__":
    main()
