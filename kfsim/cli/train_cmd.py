"""``kfsim train``: one simulated data-parallel run with real numerics."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from kfsim.cli import app, check_out_dir, check_out_file, fail, local_options, options
from kfsim.cli.progress import Reporter, json_option, out_option, quiet_option


@app.command("train")
def train(
    compressor: str = typer.Option("none()", "--compressor", "-c", help="compressor spec (see `kfsim compressors`)"),
    plan_file: Optional[Path] = typer.Option(None, "--plan", help="per-tensor plan file (`kfsim plan`) "
                                             "instead of --compressor"),
    imports: List[str] = options.import_option(),
    config: Optional[Path] = options.config_option(),
    task: str = typer.Option("fmnist-mlp", help="fmnist-mlp, fmnist-cnn or kjv-charlm"),
    workers: int = typer.Option(4, "--workers", "-n", help="simulated workers"),
    batch: int = typer.Option(128, "--global-batch", help="global batch, split over the workers "
                                                        "(worker r takes samples r, r + workers, ...)"),
    steps: int = typer.Option(200, help="iterations (async: global batches' worth of gradients)"),
    lr: float = typer.Option(0.1, help="learning rate"),
    momentum: float = typer.Option(0.0, help="heavy-ball momentum"),
    seed: int = typer.Option(0),
    eval_every: int = typer.Option(50, help="evaluate on the test split every N steps"),
    limit_train: Optional[int] = typer.Option(None, help="use the first N training samples"),
    limit_test: Optional[int] = typer.Option(None, help="use the first N test samples"),
    target: Optional[float] = typer.Option(None, help="target accuracy for time-to-accuracy"),
    cluster: str = typer.Option("nodes", help="'nodes' (one RTX 3090 per node), 'seed' or a cluster profile file"),
    bandwidth: Optional[float] = typer.Option(None, parser=options.gbit, metavar=options.RATE,
                                              help="inter-node bandwidth, e.g. 10Gbit/s (default: the cluster's)"),
    collective: Optional[str] = typer.Option(None, help="ring, tree, rhd, hierarchical, ps, mccl"),
    server_compressor: Optional[str] = typer.Option(None, help="parameter-server mode: compress the reply too"),
    mode: str = typer.Option("sync", help="sync or async"),
    staleness: Optional[int] = typer.Option(None, help="async: SSP bound (0 = synchronous rounds; none = fully async)"),
    jitter: float = typer.Option(0.0, help="async: compute time x LogNormal(sigma=jitter)"),
    grad_mode: str = typer.Option("loop", help="per-worker gradients: loop or vmap"),
    local_steps: Optional[int] = local_options.local_steps(),
    outer_lr: float = local_options.outer_lr(),
    outer_momentum: float = local_options.outer_momentum(),
    fragments: int = local_options.fragments(),
    overlap_steps: int = local_options.overlap_steps(),
    out: Path = out_option("train", "run record record.jsonl, summary.json"),
    record: Optional[Path] = typer.Option(None, help="write the run record (JSON lines) here instead of "
                                          "<out>/record.jsonl"),
    checkpoint: Optional[Path] = typer.Option(None, help="checkpoint file (resumed from if it exists)"),
    checkpoint_every: int = typer.Option(100, help="steps between checkpoints"),
    quiet: bool = quiet_option(),
    as_json: bool = json_option(),
) -> None:
    """Train a real model with N simulated workers and a compressor; simulated cluster time.

    A diverged run (a non-finite loss, or a loss over 1000x the first step's) prints its
    summary (diverged: true), then one error line on stderr, and exits with status 3."""
    from kfsim.data import DataUnavailable
    from kfsim.train import checkpoint as ckpt
    from kfsim.train import loop
    from kfsim.train.config import RunConfig

    try:
        from kfsim.plans.file import resolve
        from kfsim.train.tasks import TASKS

        compressor = resolve(compressor, plan_file, TASKS.get(task))
        cfg = RunConfig(task=task, compressor=compressor, workers=workers, batch=batch, steps=steps, lr=lr,
                        momentum=momentum, seed=seed, eval_every=eval_every, limit_train=limit_train,
                        limit_test=limit_test, target_accuracy=target, cluster=cluster, bandwidth_gbit=bandwidth,
                        collective=collective, server_compressor=server_compressor, mode=mode,
                        staleness=staleness, jitter=jitter, grad_mode=grad_mode, local_steps=local_steps,
                        outer_lr=outer_lr, outer_momentum=outer_momentum, fragments=fragments,
                        overlap_steps=overlap_steps)
        import compressors

        compressors.parse(compressor)
        if record is not None:
            check_out_file(record, "--record")
        if checkpoint is not None:
            if checkpoint.exists() and not checkpoint.is_file():
                raise ValueError(f"--checkpoint {checkpoint}: is not a regular file")
            check_out_file(checkpoint, "--checkpoint")
        check_out_dir(out)
        record = out / "record.jsonl" if record is None else record
        with Reporter("train", quiet=quiet, as_json=as_json) as rep:
            progress = rep.steps(f"train {task}", total=steps if mode == "sync" else None,
                                 compressor=compressor)
            if checkpoint is not None:
                res = ckpt.run_with_checkpoints(cfg, checkpoint, checkpoint_every, record=str(record),
                                                progress=progress)
            else:
                res = loop.run(cfg, record=str(record), progress=progress)
    except (ValueError, DataUnavailable) as exc:
        raise fail(exc) from None
    why = loop.divergence(res.steps)
    from kfsim.cli.progress import clean
    from kfsim.sim.report import write_text

    summary = write_text(out / "summary.json", json.dumps(clean(res.summary), indent=1))
    if rep.human:
        _print_summary(res.summary, task, workers, compressor,
                       mode if local_steps is None else f"local SGD, H={local_steps}, F={fragments}")
    rep.finish(out, [record, summary], summary=res.summary)
    if why is not None or res.summary.get("diverged"):
        raise fail(f"training diverged (--lr {lr:g}): {why or 'non-finite loss'}", code=3)


def _print_summary(summary: dict, task: str, workers: int, compressor: str, mode: str) -> None:
    table = Table(title=f"kfsim train: {task}, {workers} workers, {compressor} ({mode})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in summary.items():
        table.add_row(k, f"{v:.6g}" if isinstance(v, float) else str(v))
    Console(width=120).print(table)
