"""How long a finished msrun job keeps the launcher waiting: early finish vs waiting for msrun.

A rank writes ``done`` to its heartbeat once its record and checkpoints are
closed. MindSpore then tears down (~1-3 s) and msrun's scheduler notices the
unregistered nodes at its next 5 s poll. ``kfsim.launch.supervise.watch(early=True)``
(what ``launch()`` uses for a single-node job) returns at the last ``done``;
``early=False`` waits for msrun to exit. Both run here, alternating, on the same
short job (2 workers, ef(topk), --steps steps): the seconds from the last
``done`` to ``launch()`` returning, and the job's wall time.

Run:  .venv/bin/python benchmarks/bench_launch_finish.py [--repeats 2] [--steps 10]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def one(early: bool, steps: int, d: Path) -> tuple[float, float]:
    from kfsim.launch import launch, supervise
    original = supervise.watch

    def watch(*args, **kw):
        return original(*args, **{**kw, "early": early and kw.get("early", False)})

    supervise.watch = watch
    try:
        t0 = time.time()
        res = launch("ef(topk(ratio=0.01))", workers=2, steps=steps, batch=64, record=d / "r.jsonl",
                     log_dir=d / "logs", timeout_s=600)
        end = time.time()
    finally:
        supervise.watch = original
    last_done = max((res.log_dir / f"hb.rank{r}").stat().st_mtime for r in range(2))
    return end - last_done, end - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args(argv)
    if a.repeats < 1 or a.steps < 1:
        sys.exit("error: --repeats and --steps must be >= 1")
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs", flush=True)
    got = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="kfsim-finish-") as tmp:
        for i in range(a.repeats):
            for early in (False, True):
                d = Path(tmp) / f"{i}-{early}"
                d.mkdir()
                after, wall = one(early, a.steps, d)
                got[early].append((after, wall))
                print(f"  run {i}: {'early' if early else 'wait for msrun'}: {after:.2f} s after the last done, "
                      f"job {wall:.1f} s", flush=True)
    print("| finish | s after the last done (median) | job wall s (median) |")
    print("|---|---|---|")
    for early in (False, True):
        print(f"| {'early (launch default, one node)' if early else 'wait for msrun'} "
              f"| {statistics.median(x for x, _ in got[early]):.2f} | {statistics.median(w for _, w in got[early]):.1f} |")
    saved = statistics.median(w for _, w in got[False]) - statistics.median(w for _, w in got[True])
    print(f"saved per job: {saved:.1f} s (load average after: {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
