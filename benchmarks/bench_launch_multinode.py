"""Benchmark: a two-node ``kfsim launch`` on two network namespaces (kfsim.launch.nodes), needs root.

Two namespaces of :class:`kfsim.testbed.netns.Testbed` stand for two machines, each
running its own launcher (``none()``, Fashion-MNIST MLP, CPU, 2 ranks in all):

* wall time of a 3-step job, node 0 and node 1, next to the same job on one node
  (``--workers 2``, no namespaces): what multi-node set-up costs;
* a rank dying on the other node: rank 1 (node 1) is SIGKILLed once its heartbeat
  reaches step 3; measured: seconds from the kill to each node's LaunchError.
  Node 1 sees its own rank die (target 2 s) and tells node 0 over the launchers'
  link (:mod:`kfsim.launch.nodelink`; target 2 s too). Without the link node 0
  learnt it only from MindSpore's scheduler, which times the node out (its
  heartbeat: ~30 s; measured 29.4 s before the link).

    python benchmarks/bench_launch_multinode.py
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

JOB = ("import sys, time; from kfsim.launch import launch, LaunchError\n"
       "try:\n    launch('none()', workers=2, steps={steps}, fingerprint_every=1, log_dir={logs!r}, timeout_s=600, {node})\n"
       "except LaunchError as e:\n    print(f'{{time.time():.3f}} error: ' + str(e).splitlines()[0][:150]); sys.exit(1)\n"
       "print(f'{{time.time():.3f}} ok')\n")


def job_argv(steps: int, logs: Path, node: str = "") -> list[str]:
    return [sys.executable, "-c", JOB.format(steps=steps, logs=str(logs), node=node)]


def two_nodes(tb, tmp: Path, steps: int, kill_at: int | None = None):
    """Start both nodes; optionally SIGKILL rank 1 at step ``kill_at``. Returns (kill time, [(t, line)])."""
    from kfsim.launch import supervise
    procs = [subprocess.Popen(tb.exec_argv(i, job_argv(steps, tmp / f"n{i}", f"nodes=2, node_rank={i}, "
                                                       f"master_addr={tb.ip(0)!r}, master_port=29518")),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    t0, killed = time.time(), None
    if kill_at is not None:
        hb = tmp / "n1" / "hb.rank1"
        while not (hb.exists() and hb.read_text().isdigit() and int(hb.read_text()) >= kill_at):
            if time.time() - t0 > 300:
                raise SystemExit("rank 1 did not reach the kill step")
            time.sleep(0.05)
        for pid in supervise.processes_with(str(tmp / "n1")):
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            if b"MS_ROLE=MS_WORKER" in env:
                killed = time.time()
                os.kill(pid, signal.SIGKILL)
    ends = []
    for p in procs:
        last = p.communicate(timeout=600)[0].strip().splitlines()[-1]
        ends.append((float(last.split()[0]), last.split(" ", 1)[1]) if last[:1].isdigit() else (time.time(), last))
    return (killed if kill_at is not None else t0), ends


def main() -> None:
    from kfsim.testbed import netns
    netns.require()
    with tempfile.TemporaryDirectory(prefix="kfsim-bench-nodes-") as d:
        tmp = Path(d)
        t0 = time.time()
        r = subprocess.run(job_argv(3, tmp / "single"), capture_output=True, text=True)
        single = time.time() - t0
        assert r.returncode == 0, r.stdout + r.stderr
        with netns.Testbed(2) as tb:
            start, ends = two_nodes(tb, tmp / "ok", 3)
            assert all(line == "ok" for _, line in ends), ends
            killed, deaths = two_nodes(tb, tmp / "die", 100_000, kill_at=3)
    print(f"{'measured':44s} {'s':>7s} {'reference s':>12s} {'ratio':>6s}")
    for i, (t, _) in enumerate(ends):
        print(f"{f'3-step job, node {i} of 2 (wall)':44s} {t - start:7.2f} {single:12.2f} {(t - start) / single:6.2f}"
              "  (reference: the same job on one node)")
    for i, (t, line) in enumerate(deaths):
        where = "its own rank" if i == 1 else "a rank on the other node"
        print(f"{f'node {i}: {where} SIGKILLed -> error':44s} {t - killed:7.2f} {2.0:12.1f} {(t - killed) / 2.0:6.2f}"
              f"  (reference: the 2 s target{'' if i == 1 else '; MindSpore heartbeat alone ~30 s'})")
        print(f"    {line}")


if __name__ == "__main__":
    main()
