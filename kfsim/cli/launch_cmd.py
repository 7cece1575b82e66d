"""``kfsim launch``: a real data-parallel MindSpore job (msrun) with a compressed reducer."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from kfsim.cli import app, check_out_dir, check_out_file, fail, local_options, options
from kfsim.cli.progress import Reporter, json_option, out_option, quiet_option


@app.command("launch")
def launch_cmd(
    compressor: str = typer.Option("none()", "--compressor", "-c",
                                   help="compressor spec, or 'native' for MindSpore's own all-reduce"),
    plan_file: Optional[Path] = typer.Option(None, "--plan", help="per-tensor plan file (`kfsim plan`) "
                                             "instead of --compressor"),
    imports: List[str] = options.import_option(),
    config: Optional[Path] = options.config_option(),
    workers: int = typer.Option(2, "--workers", "-n", help="worker processes (msrun), in all: over every "
                                "node with --nodes"),
    nodes: int = typer.Option(1, "--nodes", help="machines the job spans: run one `kfsim launch` on each, "
                              "same options but --node-rank (docs/launch.md)"),
    node_rank: int = typer.Option(0, "--node-rank", help="this machine's node, 0..nodes-1; node 0 runs the "
                                  "scheduler and writes the run record"),
    master_addr: Optional[str] = typer.Option(None, "--master-addr", metavar="HOST",
                                              help="node 0's address (needed with --nodes > 1)"),
    master_port: Optional[int] = typer.Option(None, "--master-port", metavar="PORT",
                                              help="the scheduler's port on node 0, the same on every node "
                                                   "(default 7118 with --nodes > 1)"),
    model: str = typer.Option("mlp", help="mlp or cnn on Fashion-MNIST; 'wide' = benchmark MLP"),
    steps: int = typer.Option(20, help="iterations"),
    batch: int = typer.Option(64, "--global-batch", help="global batch, split over the workers "
                                                       "(worker r takes samples r, r + workers, ...)"),
    lr: float = typer.Option(0.1, help="SGD learning rate"),
    seed: int = typer.Option(0),
    device: str = typer.Option("CPU", help="CPU (tested); GPU or Ascend (passed to MindSpore, untested here)"),
    rng: str = typer.Option("exact", help="exact: JAX threefry bits; fast: MindSpore's own RNG on GPU/Ascend "
                                          "(on CPU the exact kernels, faster there)"),
    collective: str = typer.Option("auto", help="auto (AllReduce/AllGather by law), allgather, allreduce"),
    bucket_mb: Optional[float] = typer.Option(None, "--bucket-mb", metavar="MiB",
                                              help="the reducer's bucket cap in MiB (2^20 B) of dense gradient, "
                                                   "as the simulator's (default 25): one collective per bucket "
                                                   "and round"),
    local_steps: Optional[int] = local_options.local_steps(),
    outer_lr: float = local_options.outer_lr(),
    outer_momentum: float = local_options.outer_momentum(),
    fragments: int = local_options.fragments(),
    overlap_steps: int = local_options.overlap_steps(),
    out: Path = out_option("launch", "run record record.jsonl, msrun logs in logs/"),
    record: Optional[Path] = typer.Option(None, help="run record path (JSON Lines, as the simulator's) "
                                          "instead of <out>/record.jsonl"),
    eval_every: int = typer.Option(0, help="test accuracy every N steps (and at the end)"),
    ckpt_dir: Optional[Path] = typer.Option(None, help="checkpoint directory (one file per rank)"),
    ckpt_every: int = typer.Option(0, help="checkpoint every N steps"),
    resume: int = typer.Option(0, help="resume from the checkpoint of this step in --ckpt-dir "
                                       "(checksums verified before any worker starts)"),
    overwrite: bool = typer.Option(False, "--overwrite", help="a fresh run may replace the checkpoints "
                                                             "already in --ckpt-dir"),
    allow_change: List[str] = typer.Option([], "--allow-change", metavar="KEY",
                                           help="on --resume, let this hyperparameter differ from the "
                                                "checkpoint's (lr, batch, seed, rng, collective; repeatable "
                                                "or comma-separated); the run record lists it"),
    fingerprint_every: int = typer.Option(10, help="compare the replicas' parameters every N steps and "
                                                   "stop on a difference (0: never)"),
    timeout: float = typer.Option("30min", parser=options.seconds, metavar=options.TIME,
                                  help="time before the whole job is killed (a bare number: seconds)"),
    stall: float = typer.Option("2min", parser=options.seconds, metavar=options.TIME,
                                help="time without progress of one rank before the job is killed"),
    worker_mem: Optional[float] = typer.Option(None, "--worker-mem", metavar="GiB",
                                               help="memory one worker needs, for the preflight check that "
                                                    "the workers fit the machine (default: an estimate "
                                                    "from the model)"),
    quiet: bool = quiet_option(),
    as_json: bool = json_option(),
) -> None:
    """Train on Fashion-MNIST with msrun; writes a run record comparable with `kfsim train`'s."""
    from kfsim import records
    from kfsim.launch import LaunchError, launch

    try:
        from kfsim.plans.file import resolve

        # the job's reducer holds the gradients as a sequence in sorted-name order: index paths
        compressor = resolve(compressor, plan_file, model, indexed=True)
        from kfsim.train.config import local_algo

        local = local_algo(local_steps, outer_lr, outer_momentum, fragments, overlap_steps)
        if resume and ckpt_dir is None:
            raise ValueError("--resume needs --ckpt-dir")
        for flag, v in (("--timeout", timeout), ("--stall", stall)):
            if not v > 0:
                raise ValueError(f"{flag} must be > 0 s, got {v:g}")
        if bucket_mb is not None and not 0 < bucket_mb < float("inf"):
            raise ValueError(f"--bucket-mb must be a positive number of MiB, got {bucket_mb:g}")
        if record is not None:
            check_out_file(record, "--record")
        if ckpt_dir is not None:
            check_out_dir(ckpt_dir, "--ckpt-dir")
        check_out_dir(out)
        with Reporter("launch", quiet=quiet, as_json=as_json) as rep:
            res = launch(compressor, workers=workers, model=model, steps=steps, batch=batch, lr=lr, seed=seed,
                         device=device, rng=rng, collective=collective,
                         record=out / "record.jsonl" if record is None else record, eval_every=eval_every,
                         ckpt_dir=ckpt_dir, ckpt_every=ckpt_every, resume_step=resume, timeout_s=timeout,
                         stall_s=stall, imports=[*imports], log_dir=out / "logs", overwrite=overwrite,
                         allow_changes=[k.strip() for v in allow_change for k in v.split(",") if k.strip()],
                         fingerprint_every=fingerprint_every, local=local,
                         worker_mem=None if worker_mem is None else int(worker_mem * 2**30),
                         bucket_bytes=None if bucket_mb is None else bucket_mb * 2**20,
                         nodes=nodes, node_rank=node_rank, master_addr=master_addr, master_port=master_port,
                         progress=rep.steps(f"launch {model}", total=steps, compressor=compressor), log=rep.log)
    except (ValueError, LaunchError) as exc:
        raise fail(exc) from None
    if res.record is None:  # a node without rank 0: node 0 has the run record
        if rep.human:
            typer.echo(f"node {node_rank} of {nodes}: its ranks finished in {res.wall_s:.1f} s wall; "
                       "the run record is on node 0")
        rep.finish(out, [res.log_dir], summary={"node_rank": node_rank, "nodes": nodes, "wall_s": res.wall_s,
                                                "record": None, "logs": str(res.log_dir)},
                   message=f"logs: {res.log_dir}")
        return
    rec = records.read(res.record)
    last = rec.steps[-1]
    times = sorted(s.time_s for s in rec.steps[1:]) or [last.time_s]
    summary = {"steps": len(rec.steps), "wall_s": res.wall_s, "median_step_ms": times[len(times) // 2] * 1e3,
               "bytes_per_step_per_worker": last.bytes_sent, "final_loss": last.loss,
               "final_accuracy": last.accuracy, "record": str(res.record), "logs": str(res.log_dir)}
    if rep.human:
        typer.echo(f"{len(rec.steps)} steps in {res.wall_s:.1f} s wall; median step "
                   f"{summary['median_step_ms']:.1f} ms; {last.bytes_sent} B/step/worker; final loss {last.loss:.4f}"
                   + (f"; accuracy {last.accuracy:.4f}" if last.accuracy is not None else ""))
    rep.finish(out, [res.record, res.log_dir], summary=summary,
               message=f"run record: {res.record}\nlogs: {res.log_dir}")
