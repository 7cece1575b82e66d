"""Run records: one format for simulated runs and real (MindSpore) runs.

A run record is a JSON-Lines file. Line 1 is a header object
``{"kind": "header", "source": "simulated" | "mindspore", "meta": {...}}``
(meta: compressor spec, workers, model, batch, seed, ... free-form). Every
following line is one step::

    {"kind": "step", "step": int, "time_s": float, "bytes_sent": int,
     "loss": float, "accuracy": float | null, "extra": {...}}

``time_s`` is the wall time of that step (measured for real runs, simulated
for simulated runs); ``bytes_sent`` is what one worker put on the wire in
that step. Comparing two runs line by line is ``compare(a, b)``.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, NamedTuple


class Step(NamedTuple):
    step: int
    time_s: float
    bytes_sent: int
    loss: float
    accuracy: float | None = None
    extra: dict | None = None


class RunRecord(NamedTuple):
    source: str
    meta: dict
    steps: list[Step]

    @property
    def losses(self) -> list[float]:
        return [s.loss for s in self.steps]


PARTIAL_SUFFIX = ".partial"  # where a Writer streams until the run ends cleanly


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write(path: str | Path, source: str, meta: dict, steps: Iterable[Step]) -> Path:
    """Write a whole run record (atomically: a temp file in the same folder renamed into place;
    on any error the temp file is removed and an existing ``path`` is left untouched)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps({"kind": "header", "source": source, "meta": meta}) + "\n")
            for s in steps:
                f.write(json.dumps(_step_dict(s)) + "\n")
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


class Writer:
    """Append steps as they happen, to ``<path>.partial``; :meth:`close` renames it onto ``path``.

    A crashed run keeps what it wrote (in ``<path>.partial``) and never destroys an
    existing record at ``path``; ``close(ok=False)`` (or leaving a ``with`` block on an
    exception) keeps the partial file and leaves ``path`` as it was."""

    def __init__(self, path: str | Path, source: str, meta: dict):
        self.path = Path(path)
        self.partial = self.path.with_name(self.path.name + PARTIAL_SUFFIX)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = self.partial.open("w")
        self._f.write(json.dumps({"kind": "header", "source": source, "meta": meta}) + "\n")
        self._f.flush()

    def add(self, step: Step) -> None:
        self._f.write(json.dumps(_step_dict(step)) + "\n")
        self._f.flush()

    def close(self, ok: bool = True) -> None:
        if self._f.closed:
            return
        self._f.close()
        if ok:
            os.replace(self.partial, self.path)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        self.close(ok=exc_type is None)


def _step_dict(s: Step) -> dict[str, Any]:
    d = s._asdict()
    d["extra"] = d["extra"] or {}
    return {"kind": "step", **d}


def read(path: str | Path) -> RunRecord:
    """Read a run record; a malformed file raises ValueError naming the line."""
    path = Path(path)
    lines = path.read_text().splitlines()
    if not lines:
        raise ValueError(f"{path}: empty run record")
    try:
        header = json.loads(lines[0])
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:1: not JSON ({exc})") from None
    if header.get("kind") != "header":
        raise ValueError(f"{path}:1: first line must be the header")
    steps = []
    for no, line in enumerate(lines[1:], start=2):
        try:
            d = json.loads(line)
            steps.append(Step(int(d["step"]), float(d["time_s"]), int(d["bytes_sent"]), float(d["loss"]),
                              None if d.get("accuracy") is None else float(d["accuracy"]), d.get("extra") or {}))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{no}: bad step line ({exc})") from None
    return RunRecord(header.get("source", "?"), header.get("meta", {}), steps)


def compare(a: RunRecord, b: RunRecord) -> dict[str, float]:
    """Step-aligned differences of two runs: max |loss diff|, relative too."""
    n = min(len(a.steps), len(b.steps))
    if n == 0:
        raise ValueError("compare: a run record has no steps")
    diffs = [abs(a.steps[i].loss - b.steps[i].loss) for i in range(n)]
    rel = [d / max(abs(a.steps[i].loss), 1e-12) for i, d in enumerate(diffs)]
    return {"steps": n, "max_abs_loss_diff": max(diffs), "max_rel_loss_diff": max(rel),
            "mean_abs_loss_diff": math.fsum(diffs) / n}
