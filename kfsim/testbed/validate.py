"""``kfsim validate``: predict with the simulator from calibrated profiles, then measure.

Held-out cases:

* collectives of sizes *not* used in calibration: predicted by
  :func:`kfsim.sim.algorithms.allreduce` / ``allgather`` with the named
  collective and α, β, γ of the profile file as the simulator loads it;
* native data-parallel training steps of an MLP: predicted by
  :func:`kfsim.sim.predict.predict_iteration` (no overlap: MindSpore's
  reducer runs after the whole backward pass; one all-reduce per gradient
  tensor) from the profile's measured compute and fitted link;
* compressed training steps (when :mod:`kfsim.launch` provides the worker).

Relative error = (predicted − measured) / measured.
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np

from kfsim.sim import plotstyle
from kfsim.sim.report import write_figure
from kfsim.testbed import microbench
from kfsim.testbed.netns import Shape, Testbed
from kfsim.testbed.profile import read_profile
from kfsim.testbed.training import mlp_name, run_native

PER_TENSOR_BUCKET_MB = 1e-9   # one bucket per tensor (DistributedGradReducer all-reduces each gradient)


def worker_bucket_mb(spec: str) -> float:
    """The bucket cap the launcher's worker exchanges ``spec`` with: the native baseline
    (``"native"``, recorded as kind ``"none"``) is MindSpore's DistributedGradReducer, one
    all-reduce per gradient; a compressor runs in kfsim's reducer, one collective per bucket
    of ``compressors.buckets.DEFAULT_BUCKET_BYTES`` and round."""
    from compressors.buckets import DEFAULT_BUCKET_BYTES
    return PER_TENSOR_BUCKET_MB if spec in ("native", "none") else DEFAULT_BUCKET_BYTES / 2**20


class Case(NamedTuple):
    kind: str            # "allreduce" / "allgather" / a compressor spec
    detail: str          # size or model
    rate_mbit: float
    p: int
    predicted_s: float
    measured_s: float
    bytes_per_worker: float = float("nan")

    @property
    def rel_error(self) -> float:
        return (self.predicted_s - self.measured_s) / self.measured_s


def predict_collective(profile: str | Path, op: str, p: int, nbytes: float) -> float:
    from kfsim.sim import algorithms
    cl = read_profile(profile)
    net = algorithms.net_params(cl)
    fn = algorithms.allreduce if op == "allreduce" else algorithms.allgather
    return float(fn(cl.collective, p, float(nbytes), net))


def predict_training(profile: str | Path, layers: Sequence[int], p: int, compressor: str = "none",
                     bucket_mb: float = PER_TENSOR_BUCKET_MB):
    from kfsim.sim.predict import predict_iteration
    cl = read_profile(profile)   # registers the profile's models
    return predict_iteration(mlp_name(layers), cl, compressor, p, overlap=False, bucket_mb=bucket_mb)


def profile_for(directory: str | Path, name: str, rate: float, p: int) -> Path:
    """The (rate, p) profile if calibrated, else the pooled one for the rate."""
    d = Path(directory)
    for cand in (d / f"{name}-{rate:g}mbit-p{p}.toml", d / f"{name}-{rate:g}mbit.toml"):
        if cand.exists():
            return cand
    raise ValueError(f"no profile for {rate:g} Mbit/s in {d} "
                     f"(run `kfsim calibrate --name {name} --bandwidth {rate:g}Mbit/s`)")


def validate_collectives(directory, name, rates, workers, sizes, repeats=3, log_root=None, log=print) -> list[Case]:
    cases = []
    with Testbed(max(workers), Shape(rates[0])) as tb:
        for rate in rates:
            tb.reshape(Shape(rate))
            for p in workers:
                prof = profile_for(directory, name, rate, p)
                log(f"collectives {rate:g} Mbit/s p={p} (profile {prof.name})")
                for m in microbench.run_cell(tb, p, sizes, repeats=repeats, log_root=log_root):
                    pred = predict_collective(prof, m.op, p, m.nbytes)
                    cases.append(Case(m.op, f"{m.nbytes / 2**20:g} MiB", rate, p, pred, m.seconds, m.tx_per_rank))
    return cases


def validate_native(directory, name, rates, workers, layers, batch=64, steps=3, log_root=None, log=print) -> list[Case]:
    cases = []
    with Testbed(max(workers), Shape(rates[0])) as tb:
        for rate in rates:
            tb.reshape(Shape(rate))
            for p in workers:
                prof = profile_for(directory, name, rate, p)
                pred = predict_training(prof, layers, p)
                log(f"native training {mlp_name(layers)} {rate:g} Mbit/s p={p}: predicted {pred.total_s:.3f} s")
                run = run_native(tb, p, layers, batch, steps=steps, compute_only=False, log_root=log_root)
                cases.append(Case("none", mlp_name(layers), rate, p, pred.total_s, run.step_s, run.tx_per_step))
    return cases


def predict_steps(profile: str | Path, hidden: int, p: int, spec: str, global_batch: int) -> float:
    """Predicted step of the launcher's worker: the simulator's iteration (no overlap, the worker's
    buckets: :func:`worker_bucket_mb`) plus the worker's all-reduce of the scalar loss."""
    from kfsim.sim import algorithms
    from kfsim.sim.predict import predict_iteration
    from kfsim.testbed.compressed import wide_name
    cl = read_profile(profile)
    br = predict_iteration(wide_name(hidden), cl, "none" if spec == "native" else spec, p,
                           batch_per_worker=max(global_batch // p, 1), overlap=False,
                           bucket_mb=worker_bucket_mb(spec))
    loss_ar = float(algorithms.allreduce(cl.collective, p, 4.0, algorithms.net_params(cl)))
    return br.total_s + loss_ar


def validate_compressed(directory, name, rates, workers, specs, hidden=1400, global_batch=64, steps=5,
                        log_root=None, log=print, imports=()) -> list[Case]:
    """Native and compressed training steps of kfsim.launch's worker: predicted, then measured."""
    from kfsim.testbed.compressed import run_steps, wide_name
    cases = []
    with Testbed(max(workers), Shape(rates[0])) as tb:
        for rate in rates:
            tb.reshape(Shape(rate))
            for p in workers:
                prof = profile_for(directory, name, rate, p)
                for spec in specs:
                    pred = predict_steps(prof, hidden, p, spec, global_batch)
                    log(f"{spec} {wide_name(hidden)} {rate:g} Mbit/s p={p}: predicted {pred:.3f} s")
                    r = run_steps(tb, p, spec, hidden, global_batch, steps=steps, skip=2, log_root=log_root,
                                  imports=imports)
                    cases.append(Case("none" if spec == "native" else spec, wide_name(hidden), rate, p, pred,
                                      r.step_s, r.tx_per_step))
                    log(f"  measured {r.step_s:.3f} s ({(pred - r.step_s) / r.step_s:+.1%})")
    return cases


def repredict(cases: Sequence[Case], directory, name: str, hidden: int = 1400, global_batch: int = 64,
              layers: Sequence[int] | None = None) -> list[Case]:
    """The same measured cases with predictions recomputed from the current profiles
    (e.g. after a calibration cell was re-measured). Cases are recognised by kind/detail."""
    out = []
    for c in cases:
        prof = profile_for(directory, name, c.rate_mbit, c.p)
        if c.kind in ("allreduce", "allgather"):
            nbytes = float(c.detail.split()[0]) * 2**20
            pred = predict_collective(prof, c.kind, c.p, nbytes)
        elif c.detail.startswith("wide-"):
            spec = "native" if c.kind == "none" else c.kind
            pred = predict_steps(prof, int(c.detail.split("-")[1]), c.p, spec, global_batch)
        elif c.detail.startswith("mlp-"):
            pred = predict_training(prof, [int(x) for x in c.detail.split("-")[1:]], c.p).total_s
        else:
            raise ValueError(f"cannot re-predict case {c}")
        out.append(c._replace(predicted_s=pred))
    return out


def summary(cases: Sequence[Case]) -> tuple[float, float]:
    """(median |relative error|, max |relative error|)."""
    errs = [abs(c.rel_error) for c in cases]
    if not errs:
        raise ValueError("no cases")
    return statistics.median(errs), max(errs)


def speedups(cases: Sequence[Case]) -> list[tuple[float, int, str, float]]:
    """Measured speedup of each compressor over native all-reduce ("none"), per (rate, p, model)."""
    base = {(c.rate_mbit, c.p, c.detail): c.measured_s for c in cases if c.kind == "none"}
    return [(c.rate_mbit, c.p, c.kind, base[(c.rate_mbit, c.p, c.detail)] / c.measured_s)
            for c in cases if c.kind not in ("none", "allreduce", "allgather") and (c.rate_mbit, c.p, c.detail) in base]


KIND_LABELS = {"none": "none (native all-reduce)", "allreduce": "all-reduce alone", "allgather": "all-gather alone"}


@plotstyle.styled
def figure(cases: Sequence[Case]):
    """Predicted against measured time (log-log where the times span decades), one marker per
    kind of case, y = x solid and the ±15 % band shaded."""
    fig, ax = plotstyle.figure(width=plotstyle.NARROW, height=4.4)
    times = [t for c in cases for t in (c.measured_s, c.predicted_s)]
    lo, hi = min(times) / 1.4, max(times) * 1.4
    xs = np.geomspace(lo, hi, 50)
    ax.fill_between(xs, xs / 1.15, xs * 1.15, color="0.88", lw=0, label="±15 % of measured")
    ax.plot(xs, xs, color=plotstyle.REFERENCE, lw=0.8, marker="none", ls="-", label="predicted = measured")
    for i, kind in enumerate(sorted({c.kind for c in cases})):
        sel = [c for c in cases if c.kind == kind]
        ax.plot([c.measured_s for c in sel], [c.predicted_s for c in sel], markersize=5,
                label=KIND_LABELS.get(kind, kind), **{**plotstyle.series(i), "linestyle": "none"})
    for which in ("x", "y"):
        plotstyle.log_if_spans(ax, which, times)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel("measured time [s]")
    ax.set_ylabel("predicted time (kfsim) [s]")
    med, worst = summary(cases)
    ax.set_title(f"testbed vs simulator, {len(cases)} cases: median |error| {med:.1%}, worst {worst:.1%}")
    ax.legend(loc="upper left")
    plotstyle.declutter(fig)
    return fig


def plot(cases: Sequence[Case], path: str | Path) -> Path:
    """:func:`figure`, written to ``path`` (PNG) and its ``.svg``."""
    return write_figure(figure(cases), path)
