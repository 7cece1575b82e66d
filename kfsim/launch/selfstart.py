"""Start a script under this interpreter's ``msrun`` (what ``examples/`` do when run plainly).

    args = example_parser(__doc__, compressor="ef(topk(ratio=0.05))", steps=30, lr=0.1).parse_args()
    run_example(train, args, __file__)   # a rank: train(args); else: itself under msrun, --workers ranks

The ranks' logs go to a fresh temporary folder and are printed after msrun
ends; msrun's workers start ``python`` from a PATH led by this interpreter's
folder, so they run in this environment. Returns msrun's exit status.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from kfsim.launch.launcher import REPO, free_port, interpreter_path, msrun_path


def under_msrun(script: str | Path, argv: list[str], workers: int = 2, timeout_s: float = 600,
                tail: int = 3000) -> int:
    """Run ``script argv`` as ``workers`` msrun ranks on this machine; print each rank's log tail."""
    if workers < 1:
        raise SystemExit(f"error: --workers must be >= 1, got {workers}")
    logs = Path(tempfile.mkdtemp(prefix="kfsim-example-"))
    env = dict(os.environ, GLOG_v="3", PATH=interpreter_path(),  # msrun starts `python`: this one
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    cmd = [msrun_path(), f"--worker_num={workers}", f"--local_worker_num={workers}",
           f"--master_port={free_port(workers)}", f"--log_dir={logs}", "--join=True",
           "--cluster_time_out=120", f"--tail_worker_log={workers}", str(script), *argv]
    code = subprocess.run(cmd, env=env, cwd=logs, start_new_session=True, timeout=timeout_s,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    for r in range(workers):
        log = logs / f"worker_{r}.log"
        print(log.read_text().strip()[-tail:] if log.exists() else f"(rank {r} wrote no log)")
    if code:
        print(f"msrun exited {code} (logs in {logs})")
    return code


def example_parser(doc: str, *, compressor: str, steps: int, lr: float) -> argparse.ArgumentParser:
    """The options every MindSpore example takes (its defaults given)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--compressor", default=compressor, help="kfsim compressor spec")
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument("--workers", type=int, default=2, help="ranks when starting itself under msrun")
    return ap


def run_example(train, args, script: str) -> None:
    """In a process msrun started: ``train(args)``; run plainly: ``script`` under msrun (exit 1 if it fails)."""
    if "MS_ROLE" in os.environ:
        train(args)
    elif under_msrun(script, sys.argv[1:], workers=args.workers):
        raise SystemExit(1)
