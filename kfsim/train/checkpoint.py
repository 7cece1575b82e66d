"""Checkpoint and resume of a simulated run (synchronous or async replay), bit-identically.

A checkpoint is one ``.npz`` file holding every array of the run state —
parameters, optimizer (momentum) buffers, *every worker's* compressor state
(error-feedback residuals, PowerSGD's Q, ...), the server's compressor state
— with exact dtypes, each keyed by its path (:func:`array_names`):

    params/<name>                 opt/<name>
    worker<r>/<tensor path>/<field>   (e.g. worker0/w1/residual, worker2/w1/inner/q)
    workers/<tensor path>/<field>     (exchange="vmap": stacked on a worker axis)
    server/<tensor path>/<field>      version<v>/<name> (async: parameter versions)
    outer/<field>/<name>              worker<r>/<field>/<tensor path>  (local SGD, kfsim.train.local:
                                      outer/anchor/w1, worker0/accum/w1, worker0/comp/w1/residual)

(compressor state paths are :func:`compressors.state.named_leaves`), plus a
JSON document with the run configuration, the step, the simulated clock, the
bytes sent, the RNG (all randomness is counter-based: data order from
(seed, epoch), compressor keys from (seed, step, rank), so (seed, step) *is*
the generator state) and the history of record lines so far. Loading
rebuilds the state from a fresh ``init_state(config)`` by name, checking
every array's presence, shape and dtype, so a checkpoint never silently
loads into a different compressor layout and does not depend on the order
in which the state flattens; a mismatch is one ValueError line naming the
first path that does not fit. Every load error (not a checkpoint, corrupt
or truncated file, older format) is a one-line ValueError.
"""
from __future__ import annotations

import json
import os
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np

from compressors.state import load_named, named_leaves
from kfsim import records
from kfsim.train import local, loop
from kfsim.train.config import RunConfig

FORMAT = "kfsim-train-checkpoint/2"
OLD_FORMATS = ("kfsim-train-checkpoint/1",)
META = "meta"

# what reading a damaged .npz can raise (numpy, zipfile, zlib, json)
_READ_ERRORS = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error, struct.error,
                NotImplementedError)


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _sections(cfg: RunConfig, state) -> dict:
    """The run state's arrays as one dict of named sections (see the module doc)."""
    if isinstance(state, local.LocalState):  # local SGD: outer/<field>/<name>, worker<r>/<field>/<name>
        return {"outer": state.outer, **{f"worker{r}": w for r, w in enumerate(state.workers)}}
    sec = {"params": state.params, "opt": state.opt}
    if cfg.exchange == "vmap":
        sec["workers"] = state.states
    else:
        sec.update({f"worker{r}": s for r, s in enumerate(state.states)})
    if isinstance(state, loop.TrainState):
        sec["server"] = state.server_state
    else:
        sec.update({f"version{int(v)}": p for v, p in state.versions})
    return sec


def array_names(cfg: RunConfig, state) -> dict[str, np.ndarray]:
    """{path name: NumPy array} of every array of the run state."""
    return {name: np.asarray(a) for name, a in named_leaves(_sections(cfg, state))}


def _fresh(cfg: RunConfig, versions=()):
    if cfg.local is not None:
        return local.init_state(cfg)
    if cfg.mode == "sync":
        return loop.init_state(cfg)
    from kfsim.train import async_replay

    st = async_replay.initial(cfg)
    return st._replace(versions=tuple((int(v), st.params) for v in versions))


def save(path: str | Path, cfg: RunConfig, state, history=()) -> Path:
    """Write a checkpoint atomically (temp file renamed into place). ``state``
    is a loop.TrainState (sync) or an async_replay.AsyncState (async: it also
    holds the parameter versions later updates still read and each worker's
    progress through the simulated event order)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = array_names(cfg, state)
    synchronous = isinstance(state, (loop.TrainState, local.LocalState))
    step = int(state.step if synchronous else state.done)
    doc = {
        "format": FORMAT, "config": cfg.to_dict(), "step": step, "clock": float(state.clock),
        "bytes_sent": int(state.bytes_sent), "rng": {"kind": "counter", "seed": cfg.seed, "step": step},
        "arrays": sorted(arrays), "history": [records._step_dict(s) for s in history],
    }
    if not synchronous:
        doc.update(versions=[int(v) for v, _ in state.versions], version=int(state.version),
                   k_of=[int(k) for k in state.k_of])
    arrays[META] = np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)
    return path


def _read(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(meta document, {name: array}); one-line ValueError if unreadable or old."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the checkpoint ({_line(exc)})") from None
    if not magic:
        raise ValueError(f"{path}: empty file, not a checkpoint (truncated?)")
    if magic != b"PK\x03\x04":
        raise ValueError(f"{path}: not a kfsim checkpoint (not an .npz archive)")
    try:
        z = np.load(path, allow_pickle=False)
    except _READ_ERRORS as exc:
        raise ValueError(f"{path}: corrupt or truncated checkpoint ({_line(exc)})") from None
    try:
        with z:
            if META not in z.files:
                raise ValueError(f"{path}: not a kfsim checkpoint (no {META})")
            doc = json.loads(bytes(z[META]).decode())
            fmt = doc.get("format") if isinstance(doc, dict) else None
            if fmt in OLD_FORMATS:
                raise ValueError(
                    f"{path}: written by an older kfsim (checkpoint format {fmt!r}, arrays stored by "
                    f"position); this kfsim reads {FORMAT!r} only: restart the run from step 0, or "
                    f"finish it with the kfsim version that wrote it")
            if fmt != FORMAT:
                raise ValueError(f"{path}: unknown checkpoint format {fmt!r} (this kfsim reads {FORMAT!r})")
            arrays = {name: z[name] for name in z.files if name != META}
    except ValueError as exc:
        if str(exc).startswith(f"{path}: "):
            raise
        raise ValueError(f"{path}: corrupt or truncated checkpoint ({_line(exc)})") from None
    except _READ_ERRORS as exc:
        raise ValueError(f"{path}: corrupt or truncated checkpoint ({_line(exc)})") from None
    return doc, arrays


def load(path: str | Path) -> tuple[RunConfig, object, list]:
    """(config, state, history) from a checkpoint; ValueError (one line) if it
    cannot be read or does not fit a fresh run of its configuration."""
    import jax

    path = Path(path)
    doc, arrays = _read(path)
    try:
        cfg = RunConfig.from_dict(doc["config"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: checkpoint configuration is not valid for this kfsim ({_line(exc)})") from None
    fresh = _fresh(cfg, doc.get("versions", ()))
    try:
        tree = load_named(_sections(cfg, fresh), arrays)
    except ValueError as exc:
        raise ValueError(f"{path}: state layout differs from a fresh {cfg.task!r} run with "
                         f"{cfg.compressor!r}: {exc}") from None
    tree = jax.tree_util.tree_map(jax.numpy.asarray, tree)
    p, o = tree.get("params"), tree.get("opt")  # (local SGD: none; its state is outer + workers)
    s = tree["workers"] if cfg.exchange == "vmap" else tuple(tree[f"worker{r}"] for r in range(cfg.workers))
    try:
        if cfg.local is not None:
            state = local.LocalState(tree["outer"], s, int(doc["step"]), float(doc["clock"]),
                                     int(doc["bytes_sent"]))
        elif cfg.mode == "sync":
            state = loop.TrainState(p, o, s, tree["server"], int(doc["step"]), float(doc["clock"]),
                                    int(doc["bytes_sent"]))
        else:
            from kfsim.train import async_replay

            versions = tuple((int(v), tree[f"version{int(v)}"]) for v in doc["versions"])
            state = async_replay.AsyncState(p, o, s, versions, int(doc["version"]), tuple(doc["k_of"]),
                                            int(doc["step"]), float(doc["clock"]), int(doc["bytes_sent"]))
        history = [records.Step(d["step"], d["time_s"], d["bytes_sent"], d["loss"], d["accuracy"], d["extra"])
                   for d in doc["history"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: checkpoint metadata is incomplete ({_line(exc)})") from None
    return cfg, state, history


def run_with_checkpoints(cfg: RunConfig, path: str | Path, every: int, *, resume: bool = True,
                         record: str | Path | None = None, task=None, progress=None) -> loop.RunResult:
    """Run ``cfg`` saving a checkpoint every ``every`` steps; resume from
    ``path`` if it exists (and ``resume``)."""
    if cfg.mode != "sync":
        raise ValueError("checkpointing is implemented for synchronous runs")
    if every < 1:
        raise ValueError(f"checkpoint interval must be >= 1, got {every}")
    path = Path(path)
    state, history = None, []
    if resume and path.exists():
        saved_cfg, state, history = load(path)
        if saved_cfg != cfg:
            raise ValueError(f"{path}: checkpoint is of a different configuration")
    trainer = loop.make_trainer(cfg, task)
    result, wall = None, 0.0
    while state is None or state.step < cfg.steps:
        start = 0 if state is None else state.step
        result = trainer.run(state, until=min(cfg.steps, (start // every + 1) * every), history=history,
                             progress=progress)
        state, history = result.state, result.steps
        wall += result.summary["wall_s"]
        save(path, cfg, state, history)
    result = loop.RunResult(cfg, state, history, loop.summarize(cfg, history, wall))
    if record is not None:
        records.write(record, "simulated", loop.meta(cfg), history)
    return loop.mark_divergence(result)
