"""Per-tensor plans vs the best uniform compressor on the testbed's calibrated clusters, side by side.

For 4 workers at 50 / 200 / 1000 Mbit/s (the calibrated profiles
``profiles/testbed-<rate>mbit-p4.toml``), Fashion-MNIST MLP: every
candidate's error per tensor is measured once on real gradients
(``kfsim.plans.errors``), then per rate ``kfsim.plans.choose`` picks the
plan within the error budget. Printed per rate: the best uniform candidate
within the same budget, both predicted step times and their ratio; then the
test accuracy of simulated training (4 workers, real numerics) after the
study's step budget (``kfsim study``: 600 steps, global batch 128) for the
plan and for the uniform compressor.

The *measured* step time on the testbed (msrun workers in network
namespaces, ``kfsim validate --what compressed``) is not run here: it needs
root, network namespaces and minutes per case: ``benchmarks/bench_plans_testbed.py``
runs it (the worker trains this same MLP there, the plan priced as the worker runs).

    python benchmarks/bench_plans.py [--budget 0.3] [--steps 600] [--batches 3]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from kfsim.plans import choose, errors
from kfsim.plans.build import DEFAULT_CANDIDATES
from kfsim.train import timing
from kfsim.train.config import RunConfig
from kfsim.train.loop import run

RATES_MBIT = (50, 200, 1000)
ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=0.3, help="whole-gradient relative error budget")
    ap.add_argument("--steps", type=int, default=600, help="training steps (the study's budget)")
    ap.add_argument("--batches", type=int, default=3, help="steps whose gradients the errors are measured on")
    a = ap.parse_args()
    t0 = time.perf_counter()
    grads = errors.gradients("fmnist-mlp", 4, 128, a.batches)
    errs = errors.measure(list(DEFAULT_CANDIDATES), grads)
    print(f"errors of {len(errs.candidates)} candidates on {a.batches} steps of real gradients "
          f"({time.perf_counter() - t0:.0f} s); per tensor {errs.names}:")
    for spec, rel in zip(errs.candidates, errs.relative()):
        print(f"  {spec:60.60s} " + " ".join(f"{x:8.3g}" for x in rel))
    profile = timing.model_profile("mlp", 32)
    rows = []
    for rate in RATES_MBIT:
        cl = timing.cluster(str(ROOT / "profiles" / f"testbed-{rate}mbit-p4.toml"))
        ch = choose.choose(errs, profile, cl, 4, a.budget)
        rows.append((rate, ch))
    print(f"\npredicted s/iter, 4 workers, budget {a.budget:g} (whole-gradient relative error)")
    print(f"{'Mbit/s':>7} {'best uniform':>28} {'uniform s':>10} {'plan s':>10} {'uniform/plan':>13} "
          f"{'plan err':>9}  plan")
    for rate, ch in rows:
        u = ch.best_uniform
        print(f"{rate:7d} {u['spec'][:28]:>28} {u['predicted_s']:10.5f} {ch.predicted_s:10.5f} "
              f"{u['predicted_s'] / ch.predicted_s:13.3f} {ch.error:9.3g}  "
              + ", ".join(f"{k}={v.split('(')[0]}" for k, v in ch.tensors.items()))
    print(f"\ntest accuracy after {a.steps} steps (simulated training, 4 workers, global batch 128, lr 0.1)")
    acc = {}
    for rate, ch in rows:
        for label, spec in (("plan", ch.spec), ("uniform", ch.best_uniform["spec"])):
            if spec not in acc:
                res = run(RunConfig(task="fmnist-mlp", compressor=spec, workers=4, batch=128, steps=a.steps,
                                    eval_every=a.steps, seed=0))
                acc[spec] = res.summary["final_accuracy"]
        print(f"{rate:7d} Mbit/s  plan {acc[ch.spec]:.4f}   best uniform ({ch.best_uniform['spec'][:28]}) "
              f"{acc[ch.best_uniform['spec']]:.4f}")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
