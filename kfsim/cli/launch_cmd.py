"""``kfsim launch``: a real data-parallel MindSpore job (msrun) with a compressed reducer."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kfsim.cli import app, check_out_dir, check_out_file, fail


@app.command("launch")
def launch_cmd(
    compressor: str = typer.Option("none()", "--compressor", "-c",
                                   help="compressor spec, or 'native' for MindSpore's own all-reduce"),
    workers: int = typer.Option(2, "--workers", "-n", help="worker processes (msrun)"),
    model: str = typer.Option("mlp", help="mlp or cnn on Fashion-MNIST; 'wide' = benchmark MLP"),
    steps: int = typer.Option(20, help="iterations"),
    batch: int = typer.Option(64, help="global batch; worker r takes samples [r::workers]"),
    lr: float = typer.Option(0.1, help="SGD learning rate"),
    seed: int = typer.Option(0),
    device: str = typer.Option("CPU", help="CPU (tested); GPU or Ascend (passed to MindSpore, untested here)"),
    rng: str = typer.Option("exact", help="exact: JAX threefry bits; fast: MindSpore's own RNG"),
    collective: str = typer.Option("auto", help="auto (AllReduce/AllGather by law), allgather, allreduce"),
    record: Optional[Path] = typer.Option(None, help="run record path (JSON Lines, as the simulator's)"),
    eval_every: int = typer.Option(0, help="test accuracy every N steps (and at the end)"),
    ckpt_dir: Optional[Path] = typer.Option(None, help="checkpoint directory (one file per rank)"),
    ckpt_every: int = typer.Option(0, help="checkpoint every N steps"),
    resume: int = typer.Option(0, help="resume from the checkpoint of this step in --ckpt-dir"),
    timeout: float = typer.Option(1800, help="seconds before the whole job is killed"),
    stall: float = typer.Option(120, help="seconds without progress of one rank before the job is killed"),
    imports: list[str] = typer.Option([], "--import", help="module every worker imports first (e.g. one "
                                      "registering your own compressor); repeatable"),
) -> None:
    """Train on Fashion-MNIST with msrun; writes a run record comparable with `kfsim train`'s."""
    from kfsim import records
    import importlib

    from kfsim.launch import LaunchError, launch

    for module in imports:  # so the spec validates here too
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any failure of the user's module is bad input
            raise fail(f"--import {module}: cannot import ({type(exc).__name__}: {exc})") from None

    try:
        if resume and ckpt_dir is None:
            raise ValueError("--resume needs --ckpt-dir")
        for flag, v in (("--timeout", timeout), ("--stall", stall)):
            if not v > 0:
                raise ValueError(f"{flag} must be > 0 s, got {v:g}")
        if record is not None:
            check_out_file(record, "--record")
        if ckpt_dir is not None:
            check_out_dir(ckpt_dir, "--ckpt-dir")
        res = launch(compressor, workers=workers, model=model, steps=steps, batch=batch, lr=lr, seed=seed,
                     device=device, rng=rng, collective=collective, record=record, eval_every=eval_every,
                     ckpt_dir=ckpt_dir, ckpt_every=ckpt_every, resume_step=resume, timeout_s=timeout,
                     stall_s=stall, imports=[*imports])
    except (ValueError, LaunchError) as exc:
        raise fail(exc) from None
    rec = records.read(res.record)
    last = rec.steps[-1]
    times = sorted(s.time_s for s in rec.steps[1:]) or [last.time_s]
    typer.echo(f"{len(rec.steps)} steps in {res.wall_s:.1f} s wall; median step {times[len(times) // 2] * 1e3:.1f} ms; "
               f"{last.bytes_sent} B/step/worker; final loss {last.loss:.4f}"
               + (f"; accuracy {last.accuracy:.4f}" if last.accuracy is not None else ""))
    typer.echo(f"run record: {res.record}")
