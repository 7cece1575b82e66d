"""Compressed (and native) training steps of :mod:`kfsim.launch`'s worker on the testbed.

Reuses the launcher's own worker script unchanged (``kfsim/launch/worker.py``:
the ``wide`` MLP 784 → H → H → 10 on Fashion-MNIST, global batch B split as
``[r::n]``, the compressed reducer of :mod:`backends.mindspore.reducer`, or
``native`` for MindSpore's ``DistributedGradReducer``), but starts it with
one msrun per namespace (:func:`kfsim.testbed.run.run_job`) instead of the
launcher's single-host msrun. The worker times each step in-process
(the training step plus one all-reduce of the scalar loss) and writes rank
0's run record; the first ``skip`` steps (graph compilation) are dropped.

Its catalog model (``wide-H``) lists the parameters in sorted-name order
(b1, b2, b3, w1, w2, w3), the order the reducer visits them.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import NamedTuple

from kfsim.imports import for_workers
from kfsim.launch.host import share
from kfsim.testbed.netns import Testbed
from kfsim.testbed.run import run_job, tail_logs


def worker_script() -> str:
    """``workers/launch_worker.py``: runs ``kfsim.launch.worker.main`` (see its docstring)."""
    from kfsim.testbed.run import python_script
    return python_script("launch_worker.py")


def wide_name(hidden: int) -> str:
    return f"wide-{int(hidden)}"


def wide_model_entry(hidden: int, batch: int) -> dict:
    """``[[models]]`` entry: shapes in sorted-name order, flops 6·Σ in·out, batch = per-worker batch."""
    h = int(hidden)
    shapes = [[h], [h], [10], [784, h], [h, h], [h, 10]]
    flops = 6.0 * (784 * h + h * h + h * 10)
    return {"name": wide_name(h), "tensor_shapes": shapes, "flops_per_sample": flops, "batch": int(batch),
            "source": "kfsim.launch wide MLP 784-H-H-10"}


class StepRun(NamedTuple):
    spec: str
    p: int
    rate_mbit: float
    hidden: int
    batch: int              # global batch
    step_s: float           # median over kept steps (rank 0's record)
    steps_s: list
    tx_per_step: float      # bytes on the wire per worker per step (job total / steps, mean over ranks)
    loss: float


def run_steps(tb: Testbed, p: int, spec: str, hidden: int = 1400, batch: int = 64, steps: int = 6,
              skip: int = 2, log_root: str | Path | None = None, timeout_s: float = 280.0,
              independent: bool = False, imports=(), model: str = "wide", op_threads: int | None = None) -> StepRun:
    """A p-worker job of the launcher's worker; ``independent``: p one-worker jobs at once, each
    with the per-worker batch B/p (compute + codec under the same CPU contention, no network),
    kept in step after their first, compiling step (:mod:`kfsim.launch.rendezvous`).
    ``imports``: what each worker imports first (``--import`` targets, :mod:`kfsim.imports`).
    ``model``: the worker's ``--model`` (``wide``: the benchmark MLP of width ``hidden``; or a
    kfsim.train model such as ``mlp``, the Fashion-MNIST MLP, whose ``hidden`` is ignored).
    ``op_threads``: each worker's MindSpore CPU kernel threads (default: this host's cores split
    between the p workers, :func:`kfsim.launch.host.share`; 0: MindSpore's own default)."""
    if steps <= skip:
        raise ValueError(f"steps ({steps}) must exceed skipped compile steps ({skip})")
    if batch % p:
        raise ValueError(f"batch {batch} must be divisible by workers {p}")
    root = Path(log_root or tempfile.mkdtemp(prefix="kfsim-steps-")).resolve()  # the workers run elsewhere
    safe = "".join(c if c.isalnum() else "_" for c in spec)
    rate = tb.shape.rate_mbit if tb.shape else 0.0
    size = f"h{hidden}" if model == "wide" else model
    cell = root / f"{safe}_p{p}_{rate:g}mbit_{size}{'_indep' if independent else ''}"
    cell.mkdir(parents=True, exist_ok=True)
    run_dir = cell / ("node{node}" if independent else "run")
    for i in range(p):
        Path(str(run_dir).replace("{node}", str(i))).mkdir(parents=True, exist_ok=True)
    record = run_dir / "record.jsonl"
    args = ["--spec", spec, "--model", model, *(["--hidden", str(hidden)] if model == "wide" else []),
            "--steps", str(steps),
            "--batch", str(batch // p if independent else batch), "--run-dir", str(run_dir),
            "--record", str(record), "--limit-test", "200"]
    # all p workers share this host's cores (an independent job's msrun sees only itself)
    args += ["--op-threads", str(share(p) if op_threads is None else int(op_threads))]
    if independent and p > 1:   # in step after compiling, as a p-rank job's collectives keep its ranks
        meet = cell / "rendezvous"
        shutil.rmtree(meet, ignore_errors=True)
        args += ["--rendezvous", f"{meet}:{p}"]
    targets, paths = for_workers(imports)
    for t in targets:
        args += ["--import", t]
    env = {"PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])} if paths else None
    res = run_job(tb, worker_script(), args, log_dir=cell / "logs", workers=p, timeout_s=timeout_s,
                  independent=independent, env=env)
    records = [Path(str(record).replace("{node}", str(i))) for i in range(p)] if independent else [record]
    if not res.ok or not all(r.exists() for r in records):
        raise RuntimeError(f"training run {spec!r} failed (p={p}, {rate:g} Mbit/s, rc={res.returncodes}, "
                           f"timed_out={res.timed_out})\n{tail_logs(res)}")
    per_rec = []
    for rec in records:
        lines = [json.loads(l) for l in rec.read_text().splitlines() if l.strip()]
        st = [l for l in lines if l.get("kind") == "step"]
        if len(st) <= skip:
            raise RuntimeError(f"{rec}: no steps after the first {skip}")
        per_rec.append(st)
    # independent jobs: the slowest job's median (a p-rank job would wait for it)
    meds = [statistics.median(s["time_s"] for s in st[skip:]) for st in per_rec]
    worst = per_rec[meds.index(max(meds))]
    kept = [s["time_s"] for s in worst[skip:]]
    tx = statistics.fmean(res.tx_bytes) / len(worst)
    return StepRun(spec, p, rate, hidden, batch, max(meds), kept, tx, worst[-1]["loss"])
