"""The technique study: train once per compressor, time at two bandwidths.

For every compressor spec a synchronous run with real numerics is made (same
seed, data order and hyper-parameters). From the run we report:

* compression ratio = dense fp32 bytes of the model / bytes one worker sends
  per iteration (all tensors, all rounds);
* final test accuracy and its difference from the uncompressed run;
* time per iteration T_b from the timing simulator at each bandwidth b
  (default 1 and 10 Gbit/s) and speedup_b = T_b(none) / T_b(compressor);
* time-to-accuracy at b: sum of T_b over the iterations up to the first
  evaluation reaching the target (the numerics do not depend on b, so one
  run serves every bandwidth).

Every number comes from these runs; nothing is copied from elsewhere.
"""
from __future__ import annotations

import csv
import json
import math
import time
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

import compressors
from kfsim.sim import plotstyle
from kfsim.sim.report import atomic_path, write_figure, write_text
from kfsim.train import loop, tasks, timing
from kfsim.train.config import RunConfig

DEFAULT_SPECS = (
    "none()",
    "quantize(bits=8)",          # int8 stochastic rounding
    "topk(ratio=0.01)",
    "ef(topk(ratio=0.01))",
    "ef(quantize(bits=4))",
    "ef(quantize(bits=8))",
    "powersgd(rank=2)",          # EF + warm start by default
    "powersgd(rank=4)",
    "signsgd()",
    "efsignsgd()",
)
DEFAULT_BANDWIDTHS = (1.0, 10.0)
BASELINE = "none()"


class StudyConfig(NamedTuple):
    task: str = "fmnist-mlp"
    specs: tuple = DEFAULT_SPECS
    workers: int = 4
    batch: int = 128
    steps: int = 600
    lr: float = 0.1
    momentum: float = 0.0
    seed: int = 0
    eval_every: int = 25
    limit_test: int | None = None
    target_accuracy: float = 0.78
    bandwidths: tuple = DEFAULT_BANDWIDTHS
    cluster: str = timing.NODES


def check_specs(specs: Sequence) -> list:
    """The compressors of a study (specs parsed here, once); ValueError naming any unknown one."""
    out, bad = [], []
    for s in specs:
        try:
            out.append(compressors.parse(s))
        except ValueError as exc:
            bad.append(f"{s}: {exc}")
    if bad:
        raise ValueError("unknown compressor spec(s):\n  " + "\n  ".join(bad) + "\n(see `kfsim compressors`)")
    return out


def ratio(comp, model: str) -> float:
    from kfsim.train import models

    shapes = models.get(model).shapes.values()
    dense = sum(math.prod(s) for s in shapes) * 32
    sent = sum(comp.wire_bits(s) for s in shapes)
    return dense / sent if sent else math.inf


def iteration_times(comp, model: str, cfg: StudyConfig, bandwidth: float, steps: int) -> list[float]:
    cl = timing.cluster(cfg.cluster, bandwidth, cfg.workers)
    clock = timing.Clock(model, cfg.workers, cfg.batch, cl)
    return [clock.iteration(comp, t) for t in range(steps)]


def run_study(cfg: StudyConfig, out_dir: str | Path, *, log: Callable[[str], None] = print,
              progress: Callable[[int, int, str], Callable | None] | None = None) -> list[dict]:
    """Run every spec, write ``study.csv``, ``study.json``, ``accuracy_vs_time.png``
    and one run record per compressor under ``runs/``; return the rows.

    ``progress(i, n, spec)``, called before run i of n, may return that run's
    per-step callback (``progress`` of :func:`kfsim.train.loop.run`)."""
    out = Path(out_dir)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    comps = check_specs(cfg.specs)
    baseline = compressors.parse(BASELINE)
    if baseline.spec not in [c.spec for c in comps]:
        comps = [baseline] + comps  # differences and speedups need the baseline
    if not cfg.bandwidths:
        raise ValueError("study needs at least one bandwidth")
    task = tasks.load(cfg.task, None, cfg.limit_test)
    model = tasks.TASKS[cfg.task]
    rows, curves = [], {}
    for i, comp in enumerate(comps):
        spec = comp.spec
        rc = RunConfig(task=cfg.task, compressor=comp, workers=cfg.workers, batch=cfg.batch, steps=cfg.steps,
                       lr=cfg.lr, momentum=cfg.momentum, seed=cfg.seed, eval_every=cfg.eval_every,
                       limit_test=cfg.limit_test, target_accuracy=cfg.target_accuracy, cluster=cfg.cluster,
                       bandwidth_gbit=cfg.bandwidths[0])
        t0 = time.perf_counter()
        res = loop.run(rc, record=str(out / "runs" / f"{i:02d}_{slug(spec)}.jsonl"), task=task,
                       progress=None if progress is None else progress(i, len(comps), spec))
        row = {"compressor": spec, "ratio": ratio(comp, model),
               "final_accuracy": res.summary["final_accuracy"],
               "final_train_loss": res.summary["final_train_loss"],
               "diverged": res.summary["diverged"], "tta_step": res.summary["time_to_accuracy_step"]}
        for b in cfg.bandwidths:
            times = iteration_times(comp, model, cfg, b, len(res.steps))
            row[f"iter_s@{b:g}G"] = sum(times) / len(times)
            row[f"tta_s@{b:g}G"] = None if row["tta_step"] is None else sum(times[:row["tta_step"] + 1])
            curves.setdefault(b, {})[spec] = curve(res.steps, times)
        row["wall_s"] = time.perf_counter() - t0
        rows.append(row)
        log(f"[{i + 1}/{len(comps)}] {spec}: accuracy {row['final_accuracy']:.4f}, ratio {row['ratio']:.1f}x, "
            f"{row['wall_s']:.0f}s wall")
    base = next(r for r in rows if r["compressor"] == baseline.spec)
    for r in rows:
        r["accuracy_diff"] = r["final_accuracy"] - base["final_accuracy"]
        for b in cfg.bandwidths:
            r[f"speedup@{b:g}G"] = base[f"iter_s@{b:g}G"] / r[f"iter_s@{b:g}G"]
    write_csv(out / "study.csv", rows, cfg.bandwidths)
    write_text(out / "study.json", json.dumps({"config": cfg._asdict(), "rows": rows}, indent=1, default=str))
    plot(out / "accuracy_vs_time.png", curves, cfg)
    return rows


def curve(steps, times) -> list[tuple[float, float]]:
    """(simulated seconds, accuracy) at each evaluation."""
    pts, clock = [], 0.0
    for s, t in zip(steps, times):
        clock += t
        if s.accuracy is not None:
            pts.append((clock, s.accuracy))
    return pts


def slug(spec: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in spec).strip("_")


def columns(bandwidths) -> list[str]:
    cols = ["compressor", "ratio", "final_accuracy", "accuracy_diff"]
    for b in bandwidths:
        cols += [f"iter_s@{b:g}G", f"speedup@{b:g}G"]
    for b in bandwidths:
        cols.append(f"tta_s@{b:g}G")
    return cols + ["tta_step", "final_train_loss", "diverged", "wall_s"]


def write_csv(path: Path, rows: list[dict], bandwidths) -> None:
    cols = columns(bandwidths)
    with atomic_path(path) as tmp, tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in cols})


@plotstyle.styled
def figure(curves: dict, cfg: StudyConfig):
    """Test accuracy against simulated training time, one panel per bandwidth, one series per
    compressor (same colour and marker in every panel), the target accuracy dotted."""
    bws = list(curves)
    fig, axes = plotstyle.figure(1, len(bws), width=plotstyle.WIDE if len(bws) > 1 else plotstyle.NARROW,
                                 height=3.3, squeeze=False, sharey=True)
    specs = list(dict.fromkeys(spec for b in bws for spec in curves[b]))
    times = [p[0] for b in bws for pts in curves[b].values() for p in pts]
    for ax, b in zip(axes[0], bws):
        for i, spec in enumerate(specs):
            pts = curves[b].get(spec) or []
            if pts:
                ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], label=spec, **plotstyle.series(i),
                        markersize=3.5)
        ax.axhline(100 * cfg.target_accuracy, color=plotstyle.REFERENCE, ls=":", lw=1,
                   label=f"target {cfg.target_accuracy:.0%}")
        plotstyle.log_if_spans(ax, "x", times)
        ax.set_xlabel("simulated training time [s]")
        ax.set_title(f"{b:g} Gbit/s between nodes, {cfg.workers} workers")
    axes[0][0].set_ylabel("test accuracy [%]")
    plotstyle.legend_below(fig)
    fig.suptitle(f"{cfg.task}: test accuracy against simulated training time")
    plotstyle.declutter(fig)
    return fig


def plot(path: Path, curves: dict, cfg: StudyConfig) -> Path:
    """:func:`figure`, written to ``path`` (PNG) and its ``.svg``."""
    return write_figure(figure(curves, cfg), path)
