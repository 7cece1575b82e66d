"""``kfsim plan``: choose a compressor per tensor, fastest predicted under an error budget."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from kfsim.cli import app, check_out_file, fail, options


@app.command("plan")
def plan(
    candidate: Optional[List[str]] = typer.Option(None, "--candidate", "-c",
                                                  help="candidate compressor spec (repeat; default: none(), fp16(), "
                                                       "sumquant(), ef(topk(ratio=0.01)), powersgd(rank=4))"),
    budget: float = typer.Option(0.1, help="largest whole-gradient relative error ‖C(g)−g‖/‖g‖ of the "
                                           "decoded mean, measured on the task's gradients"),
    task: str = typer.Option("fmnist-mlp", help="fmnist-mlp, fmnist-cnn or kjv-charlm"),
    workers: int = typer.Option(4, "--workers", "-n", help="workers (simulated, and priced)"),
    batch: int = typer.Option(128, "--global-batch", help="global batch, split over the workers"),
    batches: int = typer.Option(3, help="training steps whose gradients the errors are measured on"),
    cluster: str = typer.Option("nodes", help="'nodes' (one RTX 3090 per node), 'seed' or a cluster profile file"),
    bandwidth: Optional[float] = typer.Option(None, parser=options.gbit, metavar=options.RATE,
                                              help="inter-node bandwidth, e.g. 200Mbit/s (default: the cluster's)"),
    collective: Optional[str] = typer.Option(None, help="ring, tree, rhd, hierarchical, ps, mccl"),
    seed: int = typer.Option(0),
    lr: float = typer.Option(0.1, help="learning rate of the SGD steps the gradients come from"),
    limit_train: Optional[int] = typer.Option(None, help="use the first N training samples"),
    out: Path = typer.Option(Path("results/plan/plan.toml"), "--out", "-o", help="the plan file to write (.toml)"),
    imports: List[str] = options.import_option(),
    config: Optional[Path] = options.config_option(),
) -> None:
    """Measure each candidate's error per tensor on real gradients, then pick per tensor the
    compressors whose plan the simulator predicts fastest within the error budget; write the
    plan file that `kfsim train --plan`, `kfsim launch --plan`, `kfsim scale --plan` and
    `kfsim advise --plan` read."""
    from kfsim.data import DataUnavailable
    from kfsim.plans.build import DEFAULT_CANDIDATES, build
    from kfsim.plans.file import dumps
    from kfsim.sim.report import write_text

    try:
        if out.suffix != ".toml":
            raise ValueError(f"--out {out}: a plan file is written as .toml")
        check_out_file(out, "--out")
        p, choice = build(task, list(candidate) if candidate else DEFAULT_CANDIDATES, budget, workers=workers,
                          batch=batch, batches=batches, cluster=cluster, bandwidth_gbit=bandwidth,
                          collective=collective, seed=seed, lr=lr, limit_train=limit_train)
        write_text(out, dumps(p))
    except (ValueError, DataUnavailable) as exc:
        raise fail(exc) from None
    con = Console(width=140)
    t = Table(title=f"kfsim plan: {task}, {workers} workers, {p.chosen['cluster']} at "
                    f"{p.chosen['bandwidth_gbit'] * 1000:g} Mbit/s, budget {budget:g} ({choice.method}, "
                    f"{choice.evaluated} plans priced)")
    for c in ("compressor", "predicted s/iter", "relative error", "within budget"):
        t.add_column(c, justify="left" if c == "compressor" else "right")
    for u in choice.uniform:
        t.add_row(f"uniform {u['spec']}", f"{u['predicted_s']:.5f}", f"{u['error']:.4g}", "yes" if u["feasible"] else "no")
    t.add_row("[bold]plan[/bold]", f"{choice.predicted_s:.5f}", f"{choice.error:.4g}", "yes")
    con.print(t)
    for path, spec in p.tensors:
        con.print(f"  {path:12s} {spec}")
    if choice.best_uniform:
        con.print(f"plan vs best uniform ({choice.best_uniform['spec']}): "
                  f"{choice.best_uniform['predicted_s'] / choice.predicted_s:.3f}x faster (predicted)")
    con.print(f"wrote {out}")
