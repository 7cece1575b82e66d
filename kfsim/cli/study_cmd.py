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
    target: float = typer.Option(0.78, help="target accuracy for time-to-accuracy"),
    bandwidth: Optional[List[float]] = typer.Option(None, "--bandwidth", "-b", parser=options.gbit_list,
                                                    callback=options.flatten, metavar=options.RATES,
                                                    help="inter-node bandwidths, e.g. 1Gbit/s,10Gbit/s "
                                                         "(repeatable; default 1Gbit/s and 10Gbit/s)"),
    cluster: str = typer.Option("nodes", help="'nodes' (one RTX 3090 per node), 'seed' or a profile file"),
    quiet: bool = quiet_option(),
    as_json: bool = json_option(),
) -> None:
    """Train once per compressor; report ratio, accuracy, time per iteration, speedup and time-to-accuracy."""
    from kfsim.data import DataUnavailable
    from kfsim.train import study as st

    console = Console(width=160)
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
