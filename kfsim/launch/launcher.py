"""Start, watch and stop an ``msrun`` job (all validation happens before it starts).

    launch(spec, workers=2, model="mlp", steps=20, ...) -> LaunchResult

* bad input is a ValueError before any process starts: unknown spec, a
  compressor the MindSpore lowering cannot compile (traced here), a
  compressor incompatible with the chosen collective, a checkpoint whose
  metadata does not match the run; then :mod:`kfsim.launch.preflight` (data,
  output folders, interpreter, memory, resume step < steps);
* msrun (this interpreter's) runs in its own process group with a free master
  port and ``GLOG_v=3``, and dies with the launcher (:mod:`kfsim.launch.watchdog`);
  the whole group is killed on timeout or failure;
* liveness (:mod:`kfsim.launch.supervise`): a rank process that dies is named
  within ~2 s with its signal or exit code and its log's line; a rank whose
  ``hb.rank<r>`` heartbeat is older than ``stall_s`` (or msrun exiting non-zero)
  ends the job with a :class:`LaunchError` naming the rank and the kept log directory;
* the run record is rank 0's (``kfsim.records`` format, source "mindspore");
* multi-node (:mod:`kfsim.launch.nodes`): one launch per machine runs and watches that
  node's ranks; node 0 owns the scheduler and the run record; the launchers tell each
  other at once when a node's part fails (:mod:`kfsim.launch.nodelink`).
"""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple, Sequence

from kfsim.launch import integrity, nodelink, preflight, supervise, watchdog
from kfsim.launch import nodes as multinode
from kfsim.launch.preflight import interpreter_path

WORKER = Path(__file__).resolve().with_name("worker.py")
REPO = Path(__file__).resolve().parents[2]
DEVICES = ("CPU", "GPU", "Ascend")
META_KEYS = ("spec", "model", "workers", "nodes", "batch", "lr", "seed", "rng", "collective", "hidden", "local")
CHANGEABLE = ("lr", "batch", "seed", "rng", "collective")  # may change on resume when allowed (state layout is kept)


class LaunchError(RuntimeError):
    """The job failed or hung; the message names the rank and the log directory."""


class LaunchResult(NamedTuple):
    record: Path | None   # None on a node without rank 0 (multi-node)
    log_dir: Path
    wall_s: float


def free_port(workers: int) -> int:
    """A free TCP port for the msrun master, away from mccl's data ports 8118 + 256*rank."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not any(8118 + 256 * r - 16 <= port <= 8118 + 256 * r + 256 for r in range(workers + 1)):
            return port
    raise LaunchError("no free master port found")


def model_avals(model: str, hidden: int = 2900):
    import numpy as np
    if model == "wide":
        from kfsim.launch.ms_models import wide_mlp_params
        p = wide_mlp_params(hidden)
    else:
        from kfsim.train import models
        if model not in ("mlp", "cnn"):
            raise ValueError(f"model must be mlp, cnn or wide, got {model!r}")
        p = {k: np.zeros(s, np.float32) for k, s in models.get(model).shapes.items()}
    return [(p[k].shape, p[k].dtype) for k in sorted(p)]


def msrun_path() -> str:
    """MindSpore's ``msrun`` of *this* interpreter's environment (a venv need not be
    activated): beside ``sys.executable``, else one on PATH whose ``#!`` line is this
    interpreter — never another environment's; LaunchError when there is none."""
    own = Path(sys.executable).parent / "msrun"
    if own.is_file() and os.access(own, os.X_OK):
        return str(own)
    found = shutil.which("msrun")
    if found is not None and preflight.runs_this_interpreter(found):
        return found
    raise LaunchError(f"msrun not found beside {sys.executable}" +
                      (f" (the one on PATH, {found}, runs another interpreter)" if found else "") +
                      "; install MindSpore into this environment: pip install 'kfsim[mindspore]'")


def validate(spec: str, workers: int, model: str, steps: int, batch: int, device: str, rng: str,
             collective: str, hidden: int) -> None:
    """Everything that can be checked without MindSpore processes (raises ValueError)."""
    from backends.mindspore import reducer as R
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    if steps < 1 or batch < 1:
        raise ValueError("steps and batch must be >= 1")
    if batch % workers:
        raise ValueError(f"batch {batch} must be divisible by workers {workers} (equal shards [r::n])")
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    if rng not in R.RNG_MODES:
        raise ValueError(f"rng must be one of {', '.join(R.RNG_MODES)}, got {rng!r}")
    avals = model_avals(model, hidden)
    if spec == "native":
        if collective not in ("auto", "allreduce"):
            raise ValueError("the native baseline uses MindSpore's all-reduce (collective auto/allreduce)")
        return
    import compressors
    comp = compressors.parse(spec)  # the launcher's boundary: unknown spec -> ValueError naming it
    for t in sorted({0, steps - 1} | {s for s in range(min(steps, 64))}):
        c = comp.step(t)
        R.check_compatible(c, avals, collective)
    R.check_lowerable(comp.step(0), avals, workers)


def check_bucket(spec: str, bucket_bytes: float | None) -> float:
    """The bucket cap the workers use (bytes); ValueError for one that is not a positive finite
    number, or one given with the native baseline (MindSpore's reducer fuses on its own)."""
    from compressors.buckets import DEFAULT_BUCKET_BYTES
    if bucket_bytes is None:
        return float(DEFAULT_BUCKET_BYTES)
    try:
        cap = float(bucket_bytes)
    except (TypeError, ValueError):
        raise ValueError(f"bucket cap must be a number of bytes, got {bucket_bytes!r}") from None
    if not math.isfinite(cap) or cap < 1:
        raise ValueError(f"bucket cap must be at least 1 byte (and finite), got {bucket_bytes!r}")
    if spec == "native":
        raise ValueError("a bucket cap applies to kfsim compressors; the native baseline is MindSpore's "
                         "own DistributedGradReducer, which fuses its all-reduces itself")
    return cap


def check_checkpoint(ckpt_dir: Path, meta: dict, resume_step: int, ranks: Sequence[int],
                     allow_changes: Sequence[str] = ()) -> dict:
    """Refuse a resume whose run differs from the checkpoint's, except in ``allow_changes``
    (returned: {key: [checkpoint's, now]}, which the run record then states); ``ranks``: the
    ranks whose files this node's ``ckpt_dir`` must hold."""
    path = ckpt_dir / "meta.json"
    if not path.exists():
        raise ValueError(f"no checkpoint metadata {path}; cannot resume")
    try:
        saved = json.loads(path.read_text())
    except ValueError as exc:
        raise ValueError(f"checkpoint metadata {path} is corrupt ({exc})") from None
    unknown = sorted(set(allow_changes) - set(CHANGEABLE))
    if unknown:
        raise ValueError(f"cannot allow changing {', '.join(unknown)} on resume (changeable: {', '.join(CHANGEABLE)})")
    saved = {"nodes": 1, **saved}  # a checkpoint from before multi-node checkpoints: one node
    diff = {k: (saved.get(k), meta.get(k)) for k in META_KEYS if saved.get(k) != meta.get(k)}
    refused = {k: v for k, v in diff.items() if k not in allow_changes}
    if refused:
        raise ValueError("checkpoint does not match this run: " +
                         ", ".join(f"{k}: saved {a!r} vs now {b!r}" for k, (a, b) in refused.items()) +
                         (f" (allow with --allow-change {','.join(refused)})"
                          if set(refused) <= set(CHANGEABLE) else ""))
    missing = [r for r in ranks if not (ckpt_dir / f"rank{r}.step{resume_step}.ckpt").exists()]
    if missing:
        raise ValueError(f"checkpoint step {resume_step} missing for ranks {missing} in {ckpt_dir}")
    return {k: list(v) for k, v in diff.items()}


def launch(spec: str, *, workers: int = 2, model: str = "mlp", steps: int = 20, batch: int = 64,
           lr: float = 0.1, seed: int = 0, device: str = "CPU", rng: str = "exact", collective: str = "auto",
           record: str | Path | None = None, eval_every: int = 0, limit_test: int = 2000,
           ckpt_dir: str | Path | None = None, ckpt_every: int = 0, resume_step: int = 0,
           stop_after: int | None = None, hidden: int = 2900, timeout_s: float = 600, stall_s: float = 90,
           log_dir: str | Path | None = None, extra_args: list[str] | None = None,
           keep_logs: bool = False, imports: tuple[str, ...] | list[str] = (), progress=None,
           log=None, overwrite: bool = False, allow_changes: Sequence[str] = (),
           fingerprint_every: int = 10, worker_mem: int | None = None, nodes: int = 1, node_rank: int = 0,
           master_addr: str | None = None, master_port: int | None = None, local=None,
           bucket_bytes: float | None = None) -> LaunchResult:
    """Run a MindSpore data-parallel job with msrun; see the module docstring.

    ``imports``: what every worker imports first — e.g. a module that registers
    a compressor defined outside the library: a ``.py`` file, a package folder or
    a module name (its folder joins the workers' PYTHONPATH); see :mod:`kfsim.imports`.
    ``progress``: called with each step of rank 0's record (``kfsim.records.Step``,
    ``extra["wall_s"]`` = its measured wall time) while the job runs, read from
    the record the worker streams; ``log``: called with one-line status messages.
    Checkpoints (:mod:`kfsim.launch.integrity`): a fresh launch refuses a
    ``ckpt_dir`` holding a run unless ``overwrite``; a resume verifies every
    rank's file and the set, and refuses changed hyperparameters except those
    in ``allow_changes`` (the run record then lists them); every
    ``fingerprint_every`` steps (0: never) the replicas' parameters are
    compared and the job stops on the first difference.
    Preflight (:mod:`kfsim.launch.preflight`, before any process starts):
    ``resume_step < steps``, the output folders writable, the data present, this
    interpreter's msrun and MindSpore, ``workers`` x ``worker_mem`` bytes (default:
    an estimate from the model) free. While it runs (:mod:`kfsim.launch.supervise`)
    a dead rank ends the job within ~2 s naming the rank, the signal and its log's
    line; the job dies with this process (:mod:`kfsim.launch.watchdog`).
    Multi-node (:mod:`kfsim.launch.nodes`): ``workers`` is the total; this call runs node
    ``node_rank``'s ``workers / nodes`` ranks against the scheduler node 0 runs on
    ``master_addr:master_port`` and watches those ranks; only node 0 (rank 0) writes the run
    record (``LaunchResult.record`` is None elsewhere); each node checkpoints its own ranks into its
    own ``ckpt_dir`` (with its own set manifest) and verifies them on resume.
    ``bucket_bytes``: the reducer's bucket cap in dense gradient bytes (default the simulator's
    25 MiB): one collective per bucket and round. It groups payloads and changes no number, so a
    resume may change it; the run record's meta states it.
    ``local``: a :class:`compressors.outer.LocalSGD` runs local SGD / DiLoCo instead of
    per-step exchange (:mod:`kfsim.launch.local_worker`; its settings join the checkpoint
    metadata and the run record's meta).
    """
    from kfsim.imports import for_workers, import_user

    for target in imports:  # here too, so that the spec validates
        import_user(target)
    imports, import_paths = for_workers(imports)
    node = multinode.cluster(workers, nodes, node_rank, master_addr, master_port)
    multinode.check_network(node)  # cheap (at most a few seconds), before MindSpore is imported
    validate(spec, workers, model, steps, batch, device, rng, collective, hidden)
    bucket_bytes = check_bucket(spec, bucket_bytes)
    # the lowered graphs must hold no CPU-only host kernel on a GPU/Ascend (before any worker starts)
    preflight.check_device(spec, device, model_avals(model, hidden), rng=rng, workers=workers, steps=steps)
    from kfsim.launch.local_worker import launch_args  # local SGD / DiLoCo (``local``: a LocalSGD or None)
    local_args = launch_args(local, spec, len(model_avals(model, hidden)))
    msrun = msrun_path()
    outs = {"log folder": log_dir, "record folder": Path(record).parent if record else None, "ckpt_dir": ckpt_dir}
    preflight.check(workers=node.local, steps=steps, resume_step=resume_step, avals=model_avals(model, hidden),
                    out_dirs={k: Path(v) for k, v in outs.items() if v is not None}, worker_mem=worker_mem)
    meta = {"spec": spec, "model": model, "workers": workers, "batch": batch, "lr": lr, "seed": seed,
            "rng": rng, "collective": collective, "hidden": hidden if model == "wide" else None, "nodes": nodes,
            "local": None if local is None else dict(local._asdict())}
    if fingerprint_every < 0:
        raise ValueError(f"fingerprint_every must be >= 0, got {fingerprint_every}")
    changed = {}
    if resume_step:
        if ckpt_dir is None:
            raise ValueError("resume_step needs ckpt_dir")
        changed = check_checkpoint(Path(ckpt_dir), meta, resume_step, node.ranks, allow_changes)
        integrity.verify(ckpt_dir, resume_step, node.ranks, node.manifest_node)
    elif ckpt_dir is not None:
        integrity.prepare_dir(ckpt_dir, 0, overwrite)
    own_logs = log_dir is None
    log_dir = Path(tempfile.mkdtemp(prefix="kfsim-msrun-")) if own_logs else Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    log_dir = log_dir.resolve()
    record = Path(record).resolve() if record else log_dir / "record.jsonl"
    ckpt_dir = None if ckpt_dir is None else Path(ckpt_dir).resolve()
    if ckpt_dir is not None:
        Path(ckpt_dir).mkdir(parents=True, exist_ok=True)
        if not resume_step:
            (Path(ckpt_dir) / "meta.json").write_text(json.dumps(meta))
    args = ["--spec", spec, "--model", model, "--steps", str(steps), "--batch", str(batch), "--lr", str(lr),
            "--seed", str(seed), "--device", device, "--rng", rng, "--collective", collective,
            "--run-dir", str(log_dir), "--record", str(record), "--eval-every", str(eval_every),
            "--limit-test", str(limit_test), "--hidden", str(hidden), "--resume-step", str(resume_step),
            "--bucket-bytes", repr(bucket_bytes)]
    if ckpt_dir is not None:
        args += ["--ckpt-dir", str(ckpt_dir), "--ckpt-every", str(ckpt_every)]
    if stop_after is not None:
        args += ["--stop-after", str(stop_after)]
    if fingerprint_every:
        args += ["--fingerprint-every", str(fingerprint_every)]
    if changed:
        args += ["--changed", json.dumps(changed)]
    if node.multi:
        args += ["--nodes", str(nodes)]
    for m in imports:
        args += ["--import", m]
    args += local_args + list(extra_args or [])
    cmd = [*multinode.msrun_argv(msrun, node, log_dir, None if node.multi else free_port(workers)),
           str(WORKER), *args]
    env = dict(os.environ, GLOG_v="3", PATH=interpreter_path(), **watchdog.launcher_env(),
               PYTHONPATH=os.pathsep.join([str(REPO), *import_paths, os.environ.get("PYTHONPATH", "")]))
    for stale in [*log_dir.glob("hb.rank*"), *log_dir.glob("worker_*.log"), log_dir / "scheduler.log"]:
        stale.unlink(missing_ok=True)  # an earlier job's, in a reused log folder
    tail = RecordTail(record, progress)  # removes a stale <record>.partial of an earlier run
    fps = integrity.FingerprintWatch(log_dir, workers)  # removes an earlier job's fp.rank<r>
    link = nodelink.open_link(node, log)  # multi-node: the launchers tell each other when a part fails
    t0 = time.time()
    out = open(log_dir / "msrun.out", "w")
    try:
        proc = supervise.start(cmd, cwd=str(log_dir), env=env, stdout=out, stderr=subprocess.STDOUT)
    except BaseException:
        if link is not None:
            link.finish("its msrun did not start")
        raise
    previous = _raise_on_sigterm()
    if log is not None:
        log(f"msrun started: {workers} workers ({model}, {spec}), logs in {log_dir}" if not node.multi else
            f"msrun started: node {node_rank} of {nodes}, ranks {node.ranks.start}..{node.ranks.stop - 1} of "
            f"{workers} ({model}, {spec}), scheduler {master_addr}:{node.master_port}, logs in {log_dir}")
    err = None
    try:
        ranks = supervise.Ranks(proc, log_dir, node.ranks, str(WORKER))
        err = supervise.watch(proc, log_dir, node.ranks, t0, timeout_s, stall_s, ranks,
                              lambda: tail.poll() or fps.poll() or (link is not None and link.poll()),
                              early=not node.multi)
        err = err or fps.poll()
        if err is not None and log is not None:
            log(f"job failed: {err}")
        if err is None and proc.returncode and log is not None:  # every rank of this node said done
            log(f"warning: msrun exited with code {proc.returncode} after this node's ranks finished (their "
                f"records and checkpoints are complete): {supervise.after_done(log_dir, ranks.names) or '?'}")
    finally:
        if link is not None:  # before the teardown: the other nodes stop at once
            link.finish(err if err is not None or sys.exc_info()[0] is None else "its launcher was interrupted")
        supervise.kill_tree(proc, graceful=err is None, run_dir=str(log_dir))
        if ckpt_dir is not None:
            integrity.write_sets(ckpt_dir, node.ranks, node.manifest_node)
        out.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    wall = time.time() - t0
    if err is not None:
        cause = supervise.culprit(log_dir) if node.multi else ""  # node 0's scheduler names a remote rank
        if cause and cause not in err and not err.startswith("node "):
            err = f"{cause.rstrip('; ')}: the scheduler timed it out, so msrun ended this node's ranks: {err}"
        where = (f" (node {node_rank} of {nodes}, ranks {node.ranks.start}..{node.ranks.stop - 1}; scheduler "
                 f"{master_addr}:{node.master_port})") if node.multi else ""
        raise LaunchError(f"{err}{where}; logs kept in {log_dir}\n{supervise.tail(log_dir)}")
    if not node.has_rank0:
        return LaunchResult(None, log_dir, wall)  # rank 0, on node 0, writes the run record
    if not record.exists():
        raise LaunchError(f"job finished but wrote no run record {record}; logs kept in {log_dir}")
    tail.finish()
    if own_logs and not keep_logs and record.parent != log_dir:
        shutil.rmtree(log_dir, ignore_errors=True)
    return LaunchResult(record, log_dir, wall)


def _raise_on_sigterm():
    """Make SIGTERM raise in this (main) thread, so the msrun session is
    killed by the ``finally`` above; returns the previous handler."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        raise LaunchError(f"launcher stopped by signal {signum}")

    return signal.signal(signal.SIGTERM, handler)


class RecordTail:
    """Steps of a run record as its :class:`kfsim.records.Writer` streams them (``<path>.partial``),
    each handed once, in order, to ``progress`` (with ``extra["wall_s"]`` = the step's ``time_s``)."""

    def __init__(self, path: Path, progress=None):
        from kfsim import records

        self.path, self.progress = Path(path), progress
        self.partial = self.path.with_name(self.path.name + records.PARTIAL_SUFFIX)
        self.partial.unlink(missing_ok=True)
        self._pos, self._buf, self._next = 0, b"", None

    def _deliver(self, lines: list[bytes]) -> None:
        for line in lines:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if d.get("kind") != "step" or (self._next is not None and d["step"] < self._next):
                continue
            from kfsim import records

            self._next = int(d["step"]) + 1
            extra = {**(d.get("extra") or {}), "wall_s": float(d["time_s"])}
            self.progress(records.Step(int(d["step"]), float(d["time_s"]), int(d["bytes_sent"]),
                                       float(d["loss"]), d.get("accuracy"), extra))

    def poll(self) -> None:
        if self.progress is None:
            return
        try:
            with open(self.partial, "rb") as f:
                f.seek(self._pos)
                data = f.read()
        except OSError:
            return
        self._pos += len(data)
        *lines, self._buf = (self._buf + data).split(b"\n")
        self._deliver(lines)

    def finish(self) -> None:
        """Hand over the steps not yet seen, from the finished record."""
        if self.progress is not None:
            self._deliver(self.path.read_bytes().splitlines())
