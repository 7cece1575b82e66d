"""MindSpore's CPU kernel pool per rank: the host's cores split between its ranks vs MindSpore's default.

p ranks of the launcher's own worker (``kfsim/launch/worker.py``, the wide MLP 784-H-H-10,
global batch B) on the emulated cluster, one msrun per network namespace, all on this
machine's cores (:func:`kfsim.testbed.compressed.run_steps`). Each spec runs with
``--op-threads 0`` (MindSpore's own pool) and with the split the worker takes by default
(cores / p, :func:`kfsim.launch.host.share`), the two alternated ``--rounds`` times
(machine speed drifts); rank 0's median step over the kept steps, then the median over rounds.
``--independent`` times p one-worker jobs in step instead (what ``kfsim calibrate`` prices
compute and codec from). Prints spec, both step times and their ratio, side by side.

Needs root (network namespaces); one testbed at a time.

    sudo .venv/bin/python benchmarks/bench_op_threads.py [--workers 2] [--rate 10000] [--rounds 2]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SPECS = ["native", "powersgd(rank=4)", "quantize(bits=8)", "ef(topk(ratio=0.01))"]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=1400)
    ap.add_argument("--batch", type=int, default=64, help="global batch")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rate", type=float, default=10000.0, help="link rate, Mbit/s")
    ap.add_argument("--steps", type=int, default=14, help="steps per job (the first 2 dropped)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--independent", action="store_true")
    ap.add_argument("--specs", nargs="+", default=SPECS)
    ap.add_argument("--logs", default=None, help="log folder (default: a temporary one)")
    a = ap.parse_args(argv)
    from kfsim.testbed.compressed import run_steps
    from kfsim.testbed.netns import Shape, Testbed, require
    from kfsim.launch.host import share
    require()
    split = share(a.workers)
    print(f"{a.workers} {'independent one-worker jobs' if a.independent else 'ranks'} on this host, "
          f"{a.rate:g} Mbit/s links, MLP 784-{a.hidden}-{a.hidden}-10, global batch {a.batch}, "
          f"{a.steps} steps per job; split = {split} kernel thread(s) per rank", flush=True)
    times = {}
    with Testbed(a.workers, Shape(a.rate)) as tb:
        for r in range(a.rounds):
            for spec in a.specs:
                for threads in ((0, split) if r % 2 == 0 else (split, 0)):
                    run = run_steps(tb, a.workers, spec, a.hidden, a.batch, steps=a.steps, skip=2,
                                    independent=a.independent, log_root=a.logs, op_threads=threads)
                    times.setdefault((spec, threads), []).append(run.step_s)
                    print(f"  round {r + 1} {spec:<22} op_threads={threads or 'MindSpore default'}: "
                          f"{run.step_s * 1e3:.1f} ms", flush=True)
    print(f"\n| spec | MindSpore default ms | {split} thread(s) per rank ms | default / split |")
    print("|---|---|---|---|")
    for spec in a.specs:
        d, s = (statistics.median(times[spec, t]) for t in (0, split))
        print(f"| {spec} | {d * 1e3:.1f} | {s * 1e3:.1f} | {d / s:.2f}x |")


if __name__ == "__main__":
    main()
