"""``kfsim study --family local``: local SGD / DiLoCo against per-step compression.

For every compressor spec C (default: none, int8-summable ``sumquant()`` —
4-bit levels summed in an int8 container with headroom for 16 workers — and
``ef(topk(ratio=0.01))``) the study trains, with the same seed, data order and
inner hyper-parameters:

* per-step: C on every step's gradients (:class:`kfsim.train.sync.Trainer`),
  timed by ``predict_iteration`` (DDP's bucket pipeline, overlapped);
* local, for each H (default 1, 8, 32): H inner steps, then C on the
  pseudo-gradients and the outer Nesterov step
  (:class:`kfsim.train.local.LocalTrainer`), timed by
  :mod:`kfsim.sim.localsgd`.

The numerics do not depend on the bandwidth, so one run per row serves every
bandwidth (default 100 Mbit/s and 1 Gbit/s): time per step and
time-to-accuracy (simulated seconds up to the first evaluation reaching the
target) are summed from each bandwidth's predicted step times, and
``tta_speedup@b`` is the per-step uncompressed run's time-to-accuracy over the
row's. Every number comes from these runs.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from kfsim.sim.report import write_csv, write_text
from kfsim.train import loop, models, study, tasks, timing
from kfsim.train.config import RunConfig

DEFAULT_SPECS = ("none()", "sumquant()", "ef(topk(ratio=0.01))")
DEFAULT_LOCAL_STEPS = (1, 8, 32)
DEFAULT_BANDWIDTHS = (0.1, 1.0)
BASELINE = "none()"


class LocalStudyConfig(NamedTuple):
    task: str = "fmnist-mlp"
    specs: tuple = DEFAULT_SPECS
    local_steps: tuple = DEFAULT_LOCAL_STEPS
    outer_lr: float = 0.7            # DiLoCo's outer Nesterov SGD (Douillard et al. 2023)
    outer_momentum: float = 0.9
    workers: int = 4
    batch: int = 128
    steps: int = 600
    lr: float = 0.1
    momentum: float = 0.0
    seed: int = 0
    eval_every: int = 25
    limit_train: int | None = None
    limit_test: int | None = None
    target_accuracy: float = 0.78
    bandwidths: tuple = DEFAULT_BANDWIDTHS
    cluster: str = timing.NODES


def configs(cfg: LocalStudyConfig) -> list[tuple[str, RunConfig]]:
    """(method label, run configuration) of every row, checked (one-line ValueError)."""
    if not cfg.bandwidths or not all(b > 0 for b in cfg.bandwidths):
        raise ValueError(f"the study needs bandwidths > 0, got {list(cfg.bandwidths)}")
    if not cfg.local_steps:
        raise ValueError("the local study needs at least one --local-steps value")
    comps = study.check_specs(cfg.specs)
    shapes = models.get(tasks.TASKS[cfg.task]).shapes if cfg.task in tasks.TASKS else {}
    for c in comps:  # integer headroom (sumquant's workers=) fails here, before any run
        c.exchange_plan({k: np.empty(s, np.float32) for k, s in shapes.items()}).check_workers(cfg.workers)
    specs = list(dict.fromkeys([BASELINE] + [c.spec for c in comps]))
    base = dict(task=cfg.task, workers=cfg.workers, batch=cfg.batch, steps=cfg.steps, lr=cfg.lr,
                momentum=cfg.momentum, seed=cfg.seed, eval_every=cfg.eval_every, limit_train=cfg.limit_train,
                limit_test=cfg.limit_test, target_accuracy=cfg.target_accuracy, cluster=cfg.cluster,
                bandwidth_gbit=cfg.bandwidths[0])
    out = []
    for spec in specs:
        out.append(("per-step", RunConfig(compressor=spec, **base)))
        for h in cfg.local_steps:
            out.append((f"local H={h}", RunConfig(compressor=spec, local_steps=h, outer_lr=cfg.outer_lr,
                                                  outer_momentum=cfg.outer_momentum, **base)))
    return out


def step_times(rc: RunConfig, bandwidth: float, steps: int) -> list[float]:
    """Predicted seconds of each of ``steps`` steps of run ``rc`` at ``bandwidth`` Gbit/s."""
    rc = rc.replace(bandwidth_gbit=bandwidth)
    if rc.local is None:
        cl = timing.cluster(rc.cluster, bandwidth, rc.workers)
        clock = timing.Clock(tasks.TASKS[rc.task], rc.workers, rc.batch, cl)
        return [clock.iteration(rc.comp, t) for t in range(steps)]
    from kfsim.sim.localsgd import predict_local

    cl = timing.cluster(rc.cluster, bandwidth, rc.workers)
    prof = timing.model_profile(tasks.TASKS[rc.task], max(1, rc.batch // rc.workers))
    tm = {}
    out = []
    for t in range(steps):
        key = rc.comp.phase_of(t)
        if key not in tm:
            tm[key] = predict_local(prof, cl, rc.comp.step(t), rc.workers, rc.local)
        out.append(tm[key].step_s(t))
    return out


def run_local_study(cfg: LocalStudyConfig, out_dir: str | Path, *, log: Callable[[str], None] = print,
                    progress: Callable[[int, int, str], Callable | None] | None = None) -> list[dict]:
    """Run every row; write ``study.csv``, ``study.json``, ``accuracy_vs_time.png`` and one
    run record per row under ``runs/``; return the rows."""
    runs = configs(cfg)
    out = Path(out_dir)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    task = tasks.load(cfg.task, cfg.limit_train, cfg.limit_test)
    rows, curves = [], {}
    for i, (method, rc) in enumerate(runs):
        label = f"{method} {rc.compressor}"
        t0 = time.perf_counter()
        res = loop.run(rc, record=str(out / "runs" / f"{i:02d}_{study.slug(label)}.jsonl"), task=task,
                       progress=None if progress is None else progress(i, len(runs), label))
        row = {"method": method, "compressor": rc.compressor, "local_steps": rc.local_steps,
               "final_accuracy": res.summary["final_accuracy"], "diverged": res.summary["diverged"],
               "bytes_per_worker": res.summary["bytes_per_worker"],
               "tta_step": res.summary["time_to_accuracy_step"]}
        for b in cfg.bandwidths:
            times = step_times(rc, b, len(res.steps))
            row[f"step_s@{b:g}G"] = sum(times) / len(times)
            row[f"tta_s@{b:g}G"] = None if row["tta_step"] is None else sum(times[:row["tta_step"] + 1])
            curves.setdefault(b, {})[label] = study.curve(res.steps, times)
        row["wall_s"] = time.perf_counter() - t0
        rows.append(row)
        log(f"[{i + 1}/{len(runs)}] {label}: accuracy {row['final_accuracy']:.4f}, "
            f"{row['bytes_per_worker']} B/worker, {row['wall_s']:.0f}s wall")
    base = next(r for r in rows if r["method"] == "per-step" and r["compressor"] == BASELINE)
    for r in rows:
        for b in cfg.bandwidths:
            mine, ref = r[f"tta_s@{b:g}G"], base[f"tta_s@{b:g}G"]
            r[f"tta_speedup@{b:g}G"] = None if mine is None or ref is None or mine <= 0 else ref / mine
    cols = columns(cfg.bandwidths)
    write_csv(out / "study.csv", [{k: ("" if r.get(k) is None else r[k]) for k in cols} for r in rows])
    write_text(out / "study.json", json.dumps({"config": cfg._asdict(), "rows": rows}, indent=1, default=str))
    study.plot(out / "accuracy_vs_time.png", curves, cfg)
    return rows


def columns(bandwidths) -> list[str]:
    cols = ["method", "compressor", "final_accuracy", "bytes_per_worker"]
    for b in bandwidths:
        cols += [f"step_s@{b:g}G", f"tta_s@{b:g}G", f"tta_speedup@{b:g}G"]
    return cols + ["tta_step", "local_steps", "diverged", "wall_s"]
