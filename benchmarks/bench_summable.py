"""Summable quantization against fp16 and native all-reduce: simulator and emulated testbed, side by side.

1. Simulator, the seed scenario (BERT-large, 16 workers, 1 Gbit/s inter-node):
   predicted time per iteration of ``none``, ``fp16``, ``int8`` (per-worker
   scales: all-gather) and ``sumquant`` (shared scales, integer all-reduce),
   and each one's speedup over ``none`` and over ``fp16``.
2. Testbed (root; network namespaces, ``tc``-shaped links): the launcher's
   worker (``wide`` MLP, ~10M parameters) at RATE Mbit/s with P workers,
   MindSpore native all-reduce vs ``sumquant`` (and ``fp16``), measured step
   times and bytes on the wire per step, in one run.

    python benchmarks/bench_summable.py [--rate 200] [--workers 4] [--steps 6] [--no-testbed]
"""
from __future__ import annotations

import argparse
import os

SPEC = "sumquant(bits=4, workers=16)"


def simulator() -> None:
    from kfsim import catalog
    from kfsim.sim.predict import predict_iteration
    cl = catalog.seed_cluster()
    cl = cl._replace(inter=cl.inter._replace(bandwidth=1e9 / 8))
    t = {s: predict_iteration("bert-large", cl, s, 16).total_s for s in ("none()", "fp16()", "int8()", SPEC)}
    print("simulator: BERT-large, 16 workers, 1 Gbit/s (seed cluster)")
    print(f"{'compressor':>30} {'ms/iter':>10} {'× none':>8} {'× fp16':>8}")
    for s, v in t.items():
        print(f"{s:>30} {v * 1e3:10.1f} {t['none()'] / v:8.2f} {t['fp16()'] / v:8.2f}")


def testbed(rate: float, p: int, steps: int) -> None:
    from kfsim.testbed.compressed import run_steps
    from kfsim.testbed.netns import Shape, Testbed
    specs = ["native", SPEC, "fp16()"]
    runs = {}
    with Testbed(p, Shape(rate)) as tb:
        for s in specs:
            runs[s] = run_steps(tb, p, s, steps=steps, batch=64 * p)
    base = runs["native"].step_s
    print(f"testbed: wide MLP (hidden 1400), {p} workers, {rate:g} Mbit/s, global batch {64 * p}")
    print(f"{'compressor':>30} {'s/step':>8} {'MB/step/worker':>15} {'speedup vs native':>18}")
    for s, r in runs.items():
        print(f"{s:>30} {r.step_s:8.3f} {r.tx_per_step / 1e6:15.2f} {base / r.step_s:18.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=200.0, help="link rate, Mbit/s")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--no-testbed", action="store_true", help="simulator only (no root needed)")
    a = ap.parse_args()
    simulator()
    if a.no_testbed:
        return
    if os.geteuid() != 0:
        raise SystemExit("error: the testbed needs root (network namespaces); use --no-testbed")
    testbed(a.rate, a.workers, a.steps)


if __name__ == "__main__":
    main()
