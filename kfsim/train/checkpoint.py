"""Checkpoint and resume of a simulated run (synchronous or async replay), bit-identically.

A checkpoint is one ``.npz`` file holding every array of the run state —
parameters, optimizer (momentum) buffers, *every worker's* compressor state
(error-feedback residuals, PowerSGD's Q, ...), the server's compressor state
— stored leaf by leaf with exact dtypes, plus a JSON document with the run
configuration, the step, the simulated clock, the bytes sent, the RNG
(all randomness is counter-based: data order from (seed, epoch), compressor
keys from (seed, step, rank), so (seed, step) *is* the generator state) and
the history of record lines so far. Loading rebuilds the state's structure
from a fresh ``init_state(config)`` and checks every leaf's shape and dtype,
so a checkpoint never silently loads into a different compressor layout.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from kfsim import records
from kfsim.train import loop
from kfsim.train.config import RunConfig

FORMAT = "kfsim-train-checkpoint/1"


def _flat(state):
    import jax

    if isinstance(state, loop.TrainState):
        return jax.tree_util.tree_flatten((state.params, state.opt, state.states, state.server_state))
    return jax.tree_util.tree_flatten((state.params, state.opt, state.states, [p for _, p in state.versions]))


def _fresh(cfg: RunConfig, n_versions: int = 0):
    if cfg.mode == "sync":
        return loop.init_state(cfg)
    from kfsim.train import async_replay

    st = async_replay.initial(cfg)
    return st._replace(versions=tuple((i, st.params) for i in range(n_versions)))


def save(path: str | Path, cfg: RunConfig, state, history=()) -> Path:
    """Write a checkpoint atomically (temp file renamed into place). ``state``
    is a loop.TrainState (sync) or an async_replay.AsyncState (async: it also
    holds the parameter versions later updates still read and each worker's
    progress through the simulated event order)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    leaves, treedef = _flat(state)
    arrays = {f"leaf{i:05d}": np.asarray(x) for i, x in enumerate(leaves)}
    step = int(state.step if isinstance(state, loop.TrainState) else state.done)
    doc = {
        "format": FORMAT, "config": cfg.to_dict(), "step": step, "clock": float(state.clock),
        "bytes_sent": int(state.bytes_sent), "rng": {"kind": "counter", "seed": cfg.seed, "step": step},
        "leaves": len(leaves), "treedef": str(treedef),
        "history": [records._step_dict(s) for s in history],
    }
    if not isinstance(state, loop.TrainState):
        doc.update(versions=[int(v) for v, _ in state.versions], version=int(state.version),
                   k_of=[int(k) for k in state.k_of])
    arrays["meta"] = np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)
    return path


def load(path: str | Path) -> tuple[RunConfig, object, list]:
    """(config, state, history) from a checkpoint; ValueError if it does not fit."""
    import jax

    path = Path(path)
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a checkpoint ({exc})") from None
    with z:
        if "meta" not in z.files:
            raise ValueError(f"{path}: not a kfsim checkpoint (no meta)")
        doc = json.loads(bytes(z["meta"]).decode())
        if doc.get("format") != FORMAT:
            raise ValueError(f"{path}: unknown checkpoint format {doc.get('format')!r}")
        arrays = [z[f"leaf{i:05d}"] for i in range(doc["leaves"])]
    cfg = RunConfig.from_dict(doc["config"])
    fresh = _fresh(cfg, len(doc.get("versions", ())))
    leaves, treedef = _flat(fresh)
    if len(leaves) != len(arrays) or str(treedef) != doc["treedef"]:
        raise ValueError(f"{path}: state layout differs from a fresh {cfg.compressor!r} run "
                         f"({len(arrays)} leaves saved, {len(leaves)} expected)")
    ops_leaves = []
    for i, (ref, a) in enumerate(zip(leaves, arrays)):
        if tuple(ref.shape) != a.shape or np.dtype(ref.dtype) != a.dtype:
            raise ValueError(f"{path}: leaf {i} is {a.dtype}{list(a.shape)}, expected "
                             f"{np.dtype(ref.dtype)}{list(ref.shape)}")
        ops_leaves.append(jax.numpy.asarray(a))
    p, o, s, ss = jax.tree_util.tree_unflatten(treedef, ops_leaves)
    if cfg.mode == "sync":
        state = loop.TrainState(p, o, tuple(s), ss, int(doc["step"]), float(doc["clock"]), int(doc["bytes_sent"]))
    else:
        from kfsim.train import async_replay

        state = async_replay.AsyncState(p, o, tuple(s), tuple(zip(doc["versions"], ss)), int(doc["version"]),
                                        tuple(doc["k_of"]), int(doc["step"]), float(doc["clock"]),
                                        int(doc["bytes_sent"]))
    history = [records.Step(d["step"], d["time_s"], d["bytes_sent"], d["loss"], d["accuracy"], d["extra"])
               for d in doc["history"]]
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
    trainer = loop.Trainer(cfg, task)
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
    return result
