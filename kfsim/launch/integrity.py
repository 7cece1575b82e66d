"""Checkpoints that cannot lie, and replicas that are checked to agree.

* **Per file**: a worker seals each checkpoint it writes with a SHA-256
  sidecar ``<file>.sha256`` (written atomically after the file is complete);
  a file without its sidecar is an interrupted save.
* **Per set**: after a job the launcher writes ``step<t>.set.json`` for every
  step whose files all ranks sealed: the per-file digests and one digest
  over the set. A multi-node job's checkpoint directories are one per
  machine: each node's launcher writes ``step<t>.node<R>.set.json`` over its
  own ranks' files and verifies those on resume. Resuming verifies every rank's file and the set before any
  worker starts, and names the file that fails.
* **Fresh launches** refuse a checkpoint directory that already holds a
  run's checkpoints unless told to overwrite it (then only kfsim's own files
  there are removed).
* **Replica fingerprints**: every N steps each rank appends a cheap
  fingerprint of its parameters (BLAKE2b-64 of their bytes) to
  ``<run_dir>/fp.rank<r>``; the launcher compares the ranks' fingerprints
  while the job runs and stops it on the first step where they differ
  (data-parallel replicas must stay bit-identical).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Iterable, Sequence

CKPT = re.compile(r"^rank(\d+)\.step(\d+)\.ckpt$")
OWN = ("rank*.step*.ckpt", "rank*.step*.ckpt.sha256", "step*.set.json", "meta.json")


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def seal(path: str | Path) -> str:
    """Write ``<path>.sha256`` for a complete checkpoint file; returns the digest."""
    path = Path(path)
    digest = sha256_file(path)
    _write_atomic(path.with_name(path.name + ".sha256"), digest + "\n")
    return digest


def ckpt_name(rank: int, step: int) -> str:
    return f"rank{rank}.step{step}.ckpt"


def _set_digest(files: dict) -> str:
    return hashlib.sha256("".join(f"{k}={files[k]}\n" for k in sorted(files)).encode()).hexdigest()


def _ranks(workers) -> list[int]:
    """``workers``: a rank count (all ranks), or the rank ids one node holds."""
    return list(range(workers)) if isinstance(workers, int) else [int(r) for r in workers]


def set_name(step: int, node: int | None = None) -> str:
    """The set manifest's file name: one per step, or one per step and node (multi-node: each
    machine's checkpoint directory holds its own ranks' files)."""
    return f"step{step}.set.json" if node is None else f"step{step}.node{node}.set.json"


def write_sets(ckpt_dir: str | Path, workers, node: int | None = None) -> list[int]:
    """The set manifest for every step all ranks of ``workers`` (a count, or one node's rank
    ids with ``node``) sealed; returns those steps."""
    d, ranks = Path(ckpt_dir), _ranks(workers)
    steps: dict[int, dict] = {}
    for f in d.glob("rank*.step*.ckpt"):
        m = CKPT.match(f.name)
        side = f.with_name(f.name + ".sha256")
        if m and side.exists():
            steps.setdefault(int(m.group(2)), {})[f.name] = side.read_text().strip()
    done = []
    for step, files in sorted(steps.items()):
        if all(ckpt_name(r, step) in files for r in ranks):
            files = {ckpt_name(r, step): files[ckpt_name(r, step)] for r in ranks}
            who = {"workers": len(ranks)} if node is None else {"node": node, "ranks": ranks}
            body = {"step": step, **who, "files": files, "set_sha256": _set_digest(files)}
            _write_atomic(d / set_name(step, node), json.dumps(body, indent=1))
            done.append(step)
    return done


def verify(ckpt_dir: str | Path, step: int, workers, node: int | None = None) -> None:
    """ValueError naming the first problem with the step-``step`` checkpoint of ``workers``
    (a rank count, or one node's rank ids with ``node``)."""
    d = Path(ckpt_dir)
    digests = {}
    for r in _ranks(workers):
        f = d / ckpt_name(r, step)
        side = f.with_name(f.name + ".sha256")
        if not f.exists():
            raise ValueError(f"checkpoint {f} is missing (rank {r}, step {step})")
        if not side.exists():
            raise ValueError(f"checkpoint {f} has no checksum {side.name}: its save was interrupted")
        want = side.read_text().strip()
        got = sha256_file(f)
        if got != want:
            raise ValueError(f"checkpoint {f} is corrupt: SHA-256 {got[:12]}… ≠ recorded {want[:12]}…")
        digests[f.name] = got
    manifest = d / set_name(step, node)
    if manifest.exists():
        try:
            saved = json.loads(manifest.read_text())
            files, total = dict(saved["files"]), saved["set_sha256"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"checkpoint set {manifest} is unreadable ({exc})") from None
        if files != digests or total != _set_digest(files):
            raise ValueError(f"checkpoint set {manifest} does not match the files of step {step} "
                             f"(a rank's file was replaced, or the set has another worker count)")


def prepare_dir(ckpt_dir: str | Path, resume_step: int, overwrite: bool) -> None:
    """A fresh launch (resume_step 0) into a directory holding checkpoints refuses unless ``overwrite``
    (then kfsim's own files there are removed, nothing else)."""
    d = Path(ckpt_dir)
    if resume_step or not d.exists():
        return
    if not d.is_dir():
        raise ValueError(f"checkpoint directory {d} is a file")
    found = sorted({f.name for pat in OWN for f in d.glob(pat)})
    if not found:
        return
    if not overwrite:
        raise ValueError(f"checkpoint directory {d} already holds a run ({len(found)} files, e.g. {found[0]}): "
                         "resume it (--resume-step), choose another --ckpt-dir, or pass --overwrite")
    for name in found:
        (d / name).unlink(missing_ok=True)


# -- replica fingerprints --------------------------------------------------------------------

def fingerprint(arrays: Iterable) -> str:
    """BLAKE2b-64 over the arrays' bytes, in order (replicas must agree bit for bit)."""
    import numpy as np

    h = hashlib.blake2b(digest_size=8)
    for a in arrays:
        h.update(np.ascontiguousarray(a).view(np.uint8).tobytes() if np.asarray(a).size else b"")
    return h.hexdigest()


def append_fingerprint(run_dir: str | Path, rank: int, step: int, digest: str) -> None:
    with open(Path(run_dir) / f"fp.rank{rank}", "a") as f:
        f.write(f"{step} {digest}\n")


class FingerprintWatch:
    """Compares the ranks' ``fp.rank<r>`` files as they grow; :meth:`poll`
    returns an error line on the first step where two ranks differ."""

    def __init__(self, run_dir: str | Path, workers: int):
        self.files = [Path(run_dir) / f"fp.rank{r}" for r in range(workers)]
        for f in self.files:
            f.unlink(missing_ok=True)
        self.seen: list[dict[int, str]] = [{} for _ in self.files]
        self.checked: set[int] = set()

    def _read(self) -> None:
        for r, f in enumerate(self.files):
            try:
                text = f.read_text()
            except OSError:
                continue
            for line in text.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0].isdigit():
                    self.seen[r][int(parts[0])] = parts[1]

    def poll(self) -> str | None:
        self._read()
        common = set.intersection(*(set(s) for s in self.seen)) - self.checked if self.seen else set()
        for step in sorted(common):
            vals = [s[step] for s in self.seen]
            if len(set(vals)) > 1:
                ranks = ", ".join(f"rank {r}: {v}" for r, v in enumerate(vals))
                return f"replicas diverged at step {step} (parameter fingerprints {ranks})"
            self.checked.add(step)
        return None

    def compared(self) -> Sequence[int]:
        return sorted(self.checked)
