"""Measured speedup of compressed reducers over native all-reduce on the emulated cluster.

The table issue 14 asks for: compressor x bandwidth x workers -> measured step, native
step, speedup, and the codec's share of the step. Every job is the launcher's own worker
(``kfsim/launch/worker.py``: the wide MLP 784-H-H-10, H = 2900 is 10.7M parameters,
Fashion-MNIST, global batch B) started with one msrun per network namespace
(:func:`kfsim.testbed.compressed.run_steps`), links shaped by ``tc``; first 2 steps
(compilation) dropped, rank 0's median step kept.

* ``local ms``: the same spec's step as p one-worker jobs at once (batch B/p each): compute
  plus codec under the same CPU contention (p workers on this machine's cores), no network;
* ``codec share`` = (local - local native) / step: what encode/decode adds, over the step.

Targets (issue 14, item 4): at 1 Gbit/s with 4 workers ef(topk 1%) and PowerSGD r4 >= 1.5x
faster than native; at 200 Mbit/s int8 ahead of native (> 1x).

Needs root (network namespaces); one testbed at a time.

    sudo .venv/bin/python benchmarks/bench_testbed_speedups.py [--hidden 2900] [--workers 4]
        [--rates 1000 200] [--steps 6]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SPECS = ["native", "ef(topk(ratio=0.01))", "powersgd(rank=4)", "quantize(bits=8)"]
TARGETS = {(1000.0, "ef(topk(ratio=0.01))"): 1.5, (1000.0, "powersgd(rank=4)"): 1.5,
           (200.0, "quantize(bits=8)"): 1.0}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=2900)
    ap.add_argument("--batch", type=int, default=64, help="global batch")
    ap.add_argument("--workers", type=int, nargs="+", default=[4])
    ap.add_argument("--rates", type=float, nargs="+", default=[1000.0, 200.0], help="link rates, Mbit/s")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--specs", nargs="+", default=SPECS)
    ap.add_argument("--logs", default=None, help="log folder (default: a temporary one)")
    a = ap.parse_args(argv)
    from kfsim.launch.ms_models import wide_mlp_params
    from kfsim.testbed.compressed import run_steps
    from kfsim.testbed.netns import Shape, Testbed, require
    require()
    specs = ["native"] + [s for s in a.specs if s != "native"]
    nparams = sum(v.size for v in wide_mlp_params(a.hidden).values())
    print(f"model: MLP 784-{a.hidden}-{a.hidden}-10 ({nparams / 1e6:.2f}M parameters), global batch {a.batch}, "
          f"{a.steps} steps per job (2 dropped)", flush=True)
    rows, local = [], {}
    with Testbed(max(a.workers), Shape(a.rates[0])) as tb:
        for p in a.workers:
            for spec in specs:  # no network: p one-worker jobs at once
                local[p, spec] = run_steps(tb, p, spec, a.hidden, a.batch, steps=a.steps, independent=True,
                                           log_root=a.logs).step_s
                print(f"  p={p} {spec}: local {1e3 * local[p, spec]:.1f} ms", flush=True)
        for rate in a.rates:
            tb.reshape(Shape(rate))
            for p in a.workers:
                native = None
                for spec in specs:
                    r = run_steps(tb, p, spec, a.hidden, a.batch, steps=a.steps, log_root=a.logs)
                    native = r.step_s if spec == "native" else native
                    rows.append((p, rate, spec, r.step_s, native, local[p, spec], local[p, "native"], r.tx_per_step))
                    print(f"  p={p} {rate:g} Mbit/s {spec}: {1e3 * r.step_s:.1f} ms/step", flush=True)
    print()
    print("| workers | Mbit/s | compressor | step ms | native step ms | speedup | target | local ms (no network) "
          "| codec share | MB sent/step/worker |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for p, rate, spec, step, native, loc, loc_native, tx in rows:
        speed = native / step
        want = TARGETS.get((rate, spec)) if p == 4 else None
        if want is None:
            verdict = "-"
        elif want == 1.0:  # "ahead of native"
            verdict = f"{'met' if speed > 1.0 else 'MISSED'} > 1x"
        else:
            verdict = f"{'met' if speed >= want else 'MISSED'} >= {want:g}x"
        share = "-" if spec == "native" else f"{(loc - loc_native) / step:.0%}"
        print(f"| {p} | {rate:g} | {spec} | {1e3 * step:.1f} | {1e3 * native:.1f} | {speed:.2f}x | {verdict} "
              f"| {1e3 * loc:.1f} | {share} | {tx / 1e6:.2f} |")


if __name__ == "__main__":
    main()
