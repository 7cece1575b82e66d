"""``kfsim study``: regenerate the technique table from real simulated runs."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from kfsim.cli import app, check_out_dir, fail, options
from kfsim.cli.progress import Reporter, json_option, out_option, quiet_option


def _fmt(v, pct=False):
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        return f"{v:+.2%}" if pct else f"{v:.4g}"
    return str(v)


FAMILIES = ("compressors", "local")


def _int_list(value) -> list[int]:
    from kfsim import units

    out = []
    for x in units.split_list(value):
        try:
            out.append(int(x))
        except ValueError:
            raise typer.BadParameter(f"expected whole numbers, got {x!r}") from None
    return out


@app.command("study")
def study(
    out: Path = out_option("study", "CSV, JSON, PNG + SVG, run records in runs/"),
    spec: Optional[List[str]] = typer.Option(None, "--compressor", "-c",
                                             help="compressor spec (repeatable; default: the technique table)"),
    imports: List[str] = options.import_option(),
    config: Optional[Path] = options.config_option(),
    task: str = typer.Option("fmnist-mlp", help="fmnist-mlp, fmnist-cnn or kjv-charlm"),
    workers: int = typer.Option(4, "--workers", "-n"),
    batch: int = typer.Option(128, "--global-batch", help="global batch, split over the workers"),
    steps: int = typer.Option(600, help="iterations per compressor"),
    lr: float = typer.Option(0.1),
    momentum: float = typer.Option(0.0),
    seed: int = typer.Option(0),
    eval_every: int = typer.Option(25, help="evaluate every N steps (time-to-accuracy resolution)"),
    limit_test: Optional[int] = typer.Option(None, help="evaluate on the first N test samples"),
    target: Optional[float] = typer.Option(None, help="target accuracy for time-to-accuracy (default: the task's, "
                                           "0.78 on Fashion-MNIST, 0.30 on kjv-charlm)"),
    bandwidth: Optional[List[float]] = typer.Option(None, "--bandwidth", "-b", parser=options.gbit_list,
                                                    callback=options.flatten, metavar=options.RATES,
                                                    help="inter-node bandwidths, e.g. 1Gbit/s,10Gbit/s "
                                                         "(repeatable; default 1Gbit/s and 10Gbit/s)"),
    cluster: str = typer.Option("nodes", help="'nodes' (one RTX 3090 per node), 'seed' or a profile file"),
    family: str = typer.Option("compressors", help="compressors: the technique table; local: local SGD / "
                               "DiLoCo (H x compressor) against per-step compression; default bandwidths "
                               "100Mbit/s,1Gbit/s"),
    local_steps: Optional[List[int]] = typer.Option(None, "--local-steps", parser=_int_list, callback=options.flatten,
                                                    metavar="H[,H...]", help="--family local: inner steps per "
                                                    "outer step (default 1,8,32)"),
    outer_lr: float = typer.Option(0.7, help="--family local: outer learning rate"),
    outer_momentum: float = typer.Option(0.9, help="--family local: outer Nesterov momentum"),
    limit_train: Optional[int] = typer.Option(None, help="--family local: train on the first N samples"),
    quiet: bool = quiet_option(),
    as_json: bool = json_option(),
) -> None:
    """Train once per compressor; report ratio, accuracy, time per iteration, speedup and time-to-accuracy."""
    from kfsim.data import DataUnavailable
    from kfsim.train import study as st
    from kfsim.train.tasks import target_accuracy

    console = Console(width=160)
    try:
        target = target_accuracy(task, target)
    except ValueError as exc:
        raise fail(exc) from None
    if family not in FAMILIES:
        raise fail(f"--family must be one of {', '.join(FAMILIES)}, got {family!r}")
    if family == "local":
        return _local(locals())
    if local_steps or limit_train is not None or (outer_lr, outer_momentum) != (0.7, 0.9):
        raise fail("--local-steps, --outer-lr, --outer-momentum and --limit-train apply to --family local")
    try:
        cfg = st.StudyConfig(task=task, specs=tuple(spec) if spec else st.DEFAULT_SPECS, workers=workers,
                             batch=batch, steps=steps, lr=lr, momentum=momentum, seed=seed, eval_every=eval_every,
                             limit_test=limit_test, target_accuracy=target,
                             bandwidths=tuple(bandwidth) if bandwidth else st.DEFAULT_BANDWIDTHS, cluster=cluster)
        from kfsim.train.config import RunConfig

        RunConfig(task=task, workers=workers, batch=batch, steps=steps, lr=lr, momentum=momentum, seed=seed,
                  eval_every=eval_every, target_accuracy=target)
        for b in cfg.bandwidths:
            if not b > 0:
                raise ValueError(f"--bandwidth must be > 0 Gbit/s, got {b:g}")
        st.check_specs(cfg.specs)
        check_out_dir(out)
        with Reporter("study", quiet=quiet, as_json=as_json) as rep:
            bars = []

            def per_run(i: int, n: int, spec: str):
                for bar in bars:  # one bar at a time; each finished run is logged as a line
                    bar.close()
                bars[:] = [rep.steps(f"[{i + 1}/{n}] {spec}", total=steps, run=spec, run_index=i)]
                return bars[0]

            rows = st.run_study(cfg, out, log=rep.log, progress=per_run)
    except (ValueError, DataUnavailable) as exc:
        raise fail(exc) from None
    table = Table(title=f"kfsim study: {task}, {workers} workers, {steps} steps, target {target:.0%}")
    cols = st.columns(cfg.bandwidths)[:-3]
    for c in cols:
        table.add_column(c, justify="left" if c == "compressor" else "right")
    for r in rows:
        table.add_row(*[_fmt(r.get(c), pct=(c == "accuracy_diff")) for c in cols])
    if rep.human:
        console.print(table)
    rep.finish(out, [out / "study.csv", out / "accuracy_vs_time.png", out / "study.json", f"{out / 'runs'}/"],
               summary={"rows": rows})


def _local(a: dict) -> None:
    """``--family local`` (:mod:`kfsim.train.local_study`); ``a``: the command's arguments."""
    from kfsim.data import DataUnavailable
    from kfsim.train import local_study as ls
    from kfsim.train.config import RunConfig

    try:
        cfg = ls.LocalStudyConfig(
            task=a["task"], specs=tuple(a["spec"]) if a["spec"] else ls.DEFAULT_SPECS,
            local_steps=tuple(a["local_steps"]) if a["local_steps"] else ls.DEFAULT_LOCAL_STEPS,
            outer_lr=a["outer_lr"], outer_momentum=a["outer_momentum"], workers=a["workers"], batch=a["batch"],
            steps=a["steps"], lr=a["lr"], momentum=a["momentum"], seed=a["seed"], eval_every=a["eval_every"],
            limit_train=a["limit_train"], limit_test=a["limit_test"], target_accuracy=a["target"],
            bandwidths=tuple(a["bandwidth"]) if a["bandwidth"] else ls.DEFAULT_BANDWIDTHS, cluster=a["cluster"])
        RunConfig(task=cfg.task, workers=cfg.workers, batch=cfg.batch, steps=cfg.steps, lr=cfg.lr,
                  momentum=cfg.momentum, seed=cfg.seed, eval_every=cfg.eval_every, target_accuracy=cfg.target_accuracy)
        ls.configs(cfg)  # every row's configuration checked before anything runs
        check_out_dir(a["out"])
        with Reporter("study", quiet=a["quiet"], as_json=a["as_json"]) as rep:
            bars = []

            def per_run(i: int, n: int, label: str):
                for bar in bars:
                    bar.close()
                bars[:] = [rep.steps(f"[{i + 1}/{n}] {label}", total=cfg.steps, run=label, run_index=i)]
                return bars[0]

            rows = ls.run_local_study(cfg, a["out"], log=rep.log, progress=per_run)
    except (ValueError, DataUnavailable) as exc:
        raise fail(exc) from None
    out = a["out"]
    table = Table(title=f"kfsim study --family local: {cfg.task}, {cfg.workers} workers, {cfg.steps} steps, "
                        f"target {cfg.target_accuracy:.0%}, outer lr {cfg.outer_lr:g}, momentum {cfg.outer_momentum:g}")
    cols = ls.columns(cfg.bandwidths)[:-3]
    for c in cols:
        table.add_column(c, justify="left" if c in ("method", "compressor") else "right")
    for r in rows:
        table.add_row(*[_fmt(r.get(c)) for c in cols])
    if rep.human:
        Console(width=200).print(table)
    rep.finish(out, [out / "study.csv", out / "accuracy_vs_time.png", out / "study.json", f"{out / 'runs'}/"],
               summary={"rows": rows})
