"""Per-tensor plan vs the best uniform compressor on the testbed: predicted and measured step, side by side.

Model: the Fashion-MNIST MLP (``mlp``, 784-256-10), because the testbed's
worker (``kfsim.launch``'s msrun worker, started per namespace by
:func:`kfsim.testbed.compressed.run_steps`) trains it as well as the wide
benchmark MLP — so the plan is chosen on that model's real gradients
(``kfsim.plans.errors``), measured on it on the testbed, and its accuracy is
that same model's in simulated training: one model on all three sides (the
wide MLP is no ``kfsim.train`` task, so it has no gradients to plan on and
no accuracy to report).

Per rate (4 workers; 50 / 200 / 1000 Mbit/s; calibrated profiles
``profiles/testbed-<rate>mbit-p4.toml``): ``kfsim.plans.choose`` picks the
plan within the error budget, priced as the worker runs (no overlap: the
exchange after the whole backward pass; plus the worker's all-reduce of the
scalar loss, as ``kfsim.testbed.validate.predict_steps``), and the best uniform
candidate within the same budget. (The worker's compressed reducer buckets as
the simulator does — 25 MiB, so this model is one bucket, its record says
``buckets: 1`` — not one collective per tensor as MindSpore's native reducer.)
Both run on the emulated cluster (the plan
with its paths as the worker's sorted tensor positions, as ``kfsim launch
--plan`` does); the first 2 steps (graph compilation) are dropped and the
median step of rank 0 is kept, the median over ``--repeats`` jobs reported.
Then the test accuracy of simulated training (4 workers, real numerics) after
the study's step budget (600 steps, global batch 128) for both.

Needs root (network namespaces); one testbed at a time (fixed namespace names).

    sudo .venv/bin/python benchmarks/bench_plans_testbed.py [--budget 0.3] [--steps 8] [--repeats 1]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from compressors.buckets import DEFAULT_BUCKET_BYTES
from kfsim.plans import choose, errors
from kfsim.plans.build import DEFAULT_CANDIDATES
from kfsim.plans.file import make
from kfsim.sim import algorithms
from kfsim.testbed.compressed import run_steps
from kfsim.testbed.netns import Shape, Testbed
from kfsim.testbed.profile import read_profile
from kfsim.train import timing
from kfsim.train.config import RunConfig
from kfsim.train.loop import run

RATES_MBIT = (50, 200, 1000)
WORKERS = 4
ROOT = Path(__file__).resolve().parent.parent
AS_THE_WORKER_RUNS = {"overlap": False, "bucket_mb": DEFAULT_BUCKET_BYTES / 2**20}  # after the backward


def plan_cases(errs, budget: float, batch: int, rates=RATES_MBIT):
    """Per rate: (rate, Choice, plan spec for the worker, predicted plan s, predicted uniform s)."""
    out = []
    profile = timing.model_profile("mlp", batch // WORKERS)
    for rate in rates:
        cl = read_profile(ROOT / "profiles" / f"testbed-{rate}mbit-p{WORKERS}.toml")
        ch = choose.choose(errs, profile, cl, WORKERS, budget, predict=AS_THE_WORKER_RUNS)
        if ch.best_uniform is None:
            raise SystemExit(f"error: no uniform candidate meets the budget {budget:g} at {rate} Mbit/s")
        loss_ar = float(algorithms.allreduce(cl.collective, WORKERS, 4.0, algorithms.net_params(cl)))
        worker_spec = make("mlp", "none()", ch.tensors).compressor(indexed=True).spec
        out.append((rate, ch, worker_spec, ch.predicted_s + loss_ar, ch.best_uniform["predicted_s"] + loss_ar))
    return out


def measure(cases, batch: int, steps: int, repeats: int, log_root: str | None):
    """{(rate, worker spec): [median step of each job]} on the testbed."""
    got: dict = {}
    with Testbed(WORKERS, Shape(cases[0][0])) as tb:
        for rate, ch, worker_spec, _, _ in cases:
            tb.reshape(Shape(rate))
            for spec in dict.fromkeys((worker_spec, ch.best_uniform["spec"])):
                for _ in range(repeats):
                    r = run_steps(tb, WORKERS, spec, batch=batch, steps=steps, skip=2, log_root=log_root,
                                  model="mlp")
                    got.setdefault((rate, spec), []).append(r.step_s)
                print(f"  {rate:5d} Mbit/s {spec[:70]:70s} {statistics.median(got[(rate, spec)]):.4f} s "
                      f"(jobs: {', '.join(f'{x:.4f}' for x in got[(rate, spec)])})", flush=True)
    return {k: statistics.median(v) for k, v in got.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=0.3, help="whole-gradient relative error budget")
    ap.add_argument("--batch", type=int, default=128, help="global batch (the study's)")
    ap.add_argument("--steps", type=int, default=8, help="testbed steps per job (the first 2 are dropped)")
    ap.add_argument("--repeats", type=int, default=1, help="testbed jobs per case")
    ap.add_argument("--train-steps", type=int, default=600, help="simulated-training steps (the study's budget)")
    ap.add_argument("--batches", type=int, default=3, help="steps whose gradients the errors are measured on")
    ap.add_argument("--log-root", default=None, help="where the testbed jobs' logs go (default: a temp dir)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("error: the testbed needs root (network namespaces)")
    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    grads = errors.gradients("fmnist-mlp", WORKERS, a.batch, a.batches)
    errs = errors.measure(list(DEFAULT_CANDIDATES), grads)
    print(f"relative error per tensor {errs.names} on {a.batches} steps of real gradients:")
    for spec, rel in zip(errs.candidates, errs.relative()):
        print(f"  {spec:40.40s} " + " ".join(f"{x:8.3g}" for x in rel))
    cases = plan_cases(errs, a.budget, a.batch)
    print(f"\ntestbed jobs ({WORKERS} workers, global batch {a.batch}, {a.steps} steps, 2 dropped, "
          f"{a.repeats} job(s) per case):", flush=True)
    meas = measure(cases, a.batch, a.steps, a.repeats, a.log_root)
    load1 = os.getloadavg()[0]
    acc = {}
    for _, ch, _, _, _ in cases:
        for spec in (ch.spec, ch.best_uniform["spec"]):
            if spec not in acc:
                res = run(RunConfig(task="fmnist-mlp", compressor=spec, workers=WORKERS, batch=a.batch,
                                    steps=a.train_steps, eval_every=a.train_steps, seed=0))
                acc[spec] = res.summary["final_accuracy"]
    print(f"\nstep time [s], {WORKERS} workers, mlp 784-256-10, budget {a.budget:g} (whole-gradient relative "
          f"error); accuracy: simulated training, {a.train_steps} steps, global batch {a.batch}")
    print(f"{'Mbit/s':>6} {'best uniform':>14} {'pred unif':>9} {'meas unif':>9} {'pred plan':>9} "
          f"{'meas plan':>9} {'meas plan/unif':>14} {'pred plan/unif':>14} {'acc plan':>8} {'acc unif':>8}  plan")
    for rate, ch, wspec, p_plan, p_unif in cases:
        u = ch.best_uniform["spec"]
        m_plan, m_unif = meas[(rate, wspec)], meas[(rate, u)]
        print(f"{rate:6d} {u[:14]:>14} {p_unif:9.4f} {m_unif:9.4f} {p_plan:9.4f} {m_plan:9.4f} "
              f"{m_plan / m_unif:14.3f} {p_plan / p_unif:14.3f} {acc[ch.spec]:8.4f} {acc[u]:8.4f}  "
              + ", ".join(f"{k}={v.split('(')[0]}" for k, v in ch.tensors.items()))
    print(f"\nmachine: {os.cpu_count()} CPU cores shared with other work (load average {load0:.1f} at the "
          f"start, {load1:.1f} after the testbed jobs); {time.perf_counter() - t0:.0f} s in all")


if __name__ == "__main__":
    main()
