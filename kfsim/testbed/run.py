"""Run one msrun multi-node MindSpore job on a :class:`~kfsim.testbed.netns.Testbed`.

One msrun per namespace ("node"), each with one local worker::

    ip netns exec kfsim-w<i> msrun --worker_num=N --local_worker_num=1
        --master_addr=<w0's ip> --master_port=P --node_rank=i --join=True script args…

Node 0's msrun also runs the scheduler. Every msrun is started in its own
process group (setsid); on timeout, on the first failed node, or on
Ctrl-C, all groups are killed and any process left in the namespaces is
ended, so the next job starts clean. ``GLOG_v=3`` keeps the logs short.
The master port is picked from 29500–29999, away from MindSpore's data
ports 8118 + 256·rank (in a fresh namespace every port is free anyway).
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from kfsim.testbed import counters
from kfsim.testbed.netns import Testbed, kill_ns_processes

PORT_RANGE = (29500, 29999)


class JobResult(NamedTuple):
    returncodes: list[int]
    wall_s: float
    log_dir: Path
    tx_bytes: list[int]       # per node, eth0 frames sent during the job
    rx_bytes: list[int]
    timed_out: bool

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(rc == 0 for rc in self.returncodes)


def pick_port(rng: random.Random | None = None) -> int:
    rng = rng or random.Random()
    data_ports = {8118 + 256 * r for r in range(64)}
    while True:
        port = rng.randint(*PORT_RANGE)
        if port not in data_ports:
            return port


def msrun_argv(workers: int, node_rank: int, master_addr: str, port: int, log_dir: Path,
               script: str, args: list[str], cluster_time_out: int = 90) -> list[str]:
    from kfsim.launch.launcher import msrun_path
    msrun = msrun_path()
    return [msrun, f"--worker_num={workers}", "--local_worker_num=1", f"--master_addr={master_addr}",
            f"--master_port={port}", f"--node_rank={node_rank}", f"--log_dir={log_dir}", "--join=True",
            f"--cluster_time_out={cluster_time_out}", script, *args]


def run_job(tb: Testbed, script: str, args: list[str] | None = None, *, log_dir: str | Path,
            timeout_s: float = 240.0, env: dict | None = None, port: int | None = None,
            workers: int | None = None, independent: bool = False) -> JobResult:
    """Run ``script args`` on the first ``workers`` namespaces of ``tb`` (default all).

    ``independent``: instead of one job, start ``workers`` separate one-worker
    jobs at once (each its own scheduler, ``--worker_num=1``): the same CPU
    contention as a ``workers``-rank job with no communication between them,
    which is how compute and codec costs are calibrated."""
    n = tb.workers if workers is None else int(workers)
    if not 1 <= n <= tb.workers:
        raise ValueError(f"workers must be in 1..{tb.workers}, got {workers}")
    if not Path(script).exists():
        raise ValueError(f"worker script {script} does not exist")
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    port = port or pick_port()
    from kfsim.launch.preflight import interpreter_path
    base_env = {**os.environ, "GLOG_v": "3", "PYTHONUNBUFFERED": "1", "PATH": interpreter_path(), **(env or {})}
    c0 = [counters.read_worker(i) for i in range(n)]
    procs: list[subprocess.Popen] = []
    t0 = time.monotonic()
    timed_out = False
    try:
        for i in range(n):
            node_log = (log_dir / f"node{i}").resolve()   # also the cwd: MindSpore writes rank_<r>/ there
            node_log.mkdir(exist_ok=True)
            if independent:
                argv = tb.exec_argv(i, msrun_argv(1, 0, tb.ip(i), port, node_log, script, _own_dirs(args, i)))
            else:
                argv = tb.exec_argv(i, msrun_argv(n, i, tb.ip(0), port, node_log, script, list(args or [])))
            out = open(node_log / "msrun.out", "w")
            procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                          env={**base_env, "MS_WORKER_IP": tb.ip(i)}, cwd=str(node_log)))
            out.close()
        deadline = t0 + timeout_s
        while True:
            rcs = [p.poll() for p in procs]
            if all(rc is not None for rc in rcs):
                break
            if any(rc not in (None, 0) for rc in rcs):   # one node failed: give the rest a moment
                _wait(procs, 5.0)
                break
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(0.1)
    finally:
        _kill(procs)
        for i in range(n):
            kill_ns_processes(tb.ns(i))
    wall = time.monotonic() - t0
    c1 = [counters.read_worker(i) for i in range(n)]
    rcs = [p.returncode if p.returncode is not None else -9 for p in procs]
    return JobResult(rcs, wall, log_dir, [b.tx_bytes - a.tx_bytes for a, b in zip(c0, c1)],
                     [b.rx_bytes - a.rx_bytes for a, b in zip(c0, c1)], timed_out)


def _own_dirs(args, i: int) -> list[str]:
    """Independent jobs must not share output paths: ``{node}`` in an argument becomes the node index."""
    return [a.replace("{node}", str(i)) for a in (args or [])]


def _wait(procs, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and any(p.poll() is None for p in procs):
        time.sleep(0.1)


def _kill(procs) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [p for p in procs if p.poll() is None]
        for p in alive:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
        _wait(alive, 3.0)


def tail_logs(result: JobResult, lines: int = 20) -> str:
    """The last lines of every node's msrun output and worker logs (for error messages)."""
    out = []
    for f in sorted(result.log_dir.rglob("*.log")) + sorted(result.log_dir.rglob("msrun.out")):
        try:
            text = f.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        out.append(f"--- {f}\n" + "\n".join(text))
    return "\n".join(out)


def python_script(module_file: str) -> str:
    """Absolute path of a worker script shipped in :mod:`kfsim.testbed.workers`."""
    return str(Path(__file__).parent / "workers" / module_file)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use kfsim testbed / calibrate / validate")
