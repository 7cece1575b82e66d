"""Benchmark: the cost of progress reporting in simulated training.

The same synchronous run (Fashion-MNIST MLP, ``--workers`` workers, ``--spec``)
is timed three ways, interleaved, ``--repeats`` times each after a warm-up run
that compiles every step (the minimum is kept):

* bare: ``Trainer.run()`` with no writer and no progress (losses read back at
  evaluations only);
* json: ``kfsim train --json``'s callback (a JSON line per step, to /dev/null)
  and the run record, as the command runs by default;
* rich: the rich progress display's callback (forced on, to /dev/null).

Printed side by side: seconds per run and the ratio to bare.

    python benchmarks/bench_progress.py [--steps 300] [--workers 4] [--spec 'ef(topk(ratio=0.01))'] [--repeats 3]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--spec", default="ef(topk(ratio=0.01))")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()

    from kfsim import records
    from kfsim.cli.progress import Reporter
    from kfsim.train import loop
    from kfsim.train.config import RunConfig

    cfg = RunConfig(compressor=a.spec, workers=a.workers, steps=a.steps, eval_every=a.steps, limit_test=500)
    trainer = loop.Trainer(cfg)
    devnull = open(os.devnull, "w")
    tmp = tempfile.mkdtemp(prefix="kfsim-bench-progress-")

    def bare():
        trainer.run()

    def json_mode():
        with contextlib.redirect_stdout(devnull), Reporter("train", as_json=True) as rep, \
                records.Writer(os.path.join(tmp, "r.jsonl"), "simulated", {}) as w:
            trainer.run(writer=w, progress=rep.steps("train", total=a.steps))

    def rich_mode():
        with contextlib.redirect_stderr(io.StringIO()), Reporter("train", tty=True) as rep:
            trainer.run(progress=rep.steps("train", total=a.steps))

    ways = {"bare": bare, "json": json_mode, "rich": rich_mode}
    t0 = time.perf_counter()
    for fn in ways.values():
        fn()  # compile (and warm the caches) once
    print(f"warm-up (compile) {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    best = {k: float("inf") for k in ways}
    for _ in range(a.repeats):
        for name, fn in ways.items():
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    print(f"{a.steps} steps, {a.workers} workers, {a.spec}; min of {a.repeats} interleaved repeats")
    print(f"{'mode':>6} {'s/run':>8} {'ms/step':>8} {'x bare':>7}")
    for name, s in best.items():
        print(f"{name:>6} {s:8.3f} {s / a.steps * 1e3:8.2f} {s / best['bare']:7.3f}")


if __name__ == "__main__":
    main()
