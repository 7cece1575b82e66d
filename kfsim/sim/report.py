"""Writing sweep results: CSV, JSON (with the inputs that reproduce them), PNG plots.

Every file is written atomically (:func:`atomic_path`): a temp file in the same
folder renamed into place, so a failed write never leaves a half-written file
or destroys the one already there.
"""
from __future__ import annotations

import contextlib
import csv
import json
import os
import tempfile
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path next to ``path``; on success it replaces ``path`` (``os.replace``),
    on any error it is removed and ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: Path, text: str) -> Path:
    """Write a text file atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_csv(path: Path, rows: Sequence[dict]) -> Path:
    with atomic_path(path) as tmp, tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    return path


def write_json(path: Path, meta: dict, rows: Sequence[dict]) -> Path:
    return write_text(path, json.dumps({"meta": meta, "rows": list(rows)}, indent=1))


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_scale(path: Path, rows: Sequence[dict], title: str) -> Path:
    """Time per iteration and scaling efficiency versus workers, one line per compressor."""
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for spec in dict.fromkeys(r["compressor"] for r in rows):
        rs = [r for r in rows if r["compressor"] == spec]
        x = [r["workers"] for r in rs]
        a1.plot(x, [r["total_s"] for r in rs], marker="o", label=spec)
        a2.plot(x, [r["scaling_efficiency"] for r in rs], marker="o", label=spec)
    for a in (a1, a2):
        a.set_xscale("log", base=2)
        a.set_xlabel("workers")
        a.grid(True, alpha=0.3)
    a1.set_yscale("log")
    a1.set_ylabel("time per iteration (s)")
    a2.set_ylabel("scaling efficiency (T₁ / Tₚ)")
    a2.set_ylim(0, 1.05)
    a1.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
    finally:
        plt.close(fig)
    return path


def plot_heatmap(path: Path, speedup: np.ndarray, bandwidths_gbps: Sequence[float], workers: Sequence[int],
                 title: str) -> Path:
    """Speedup over uncompressed (bandwidth rows × worker columns), log colour scale centred on 1."""
    plt = _plt()
    from matplotlib.colors import TwoSlopeNorm
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * len(workers), 1.2 + 0.45 * len(bandwidths_gbps)))
    lg = np.log2(np.clip(speedup, 1e-6, None))
    lim = max(float(np.abs(lg).max()), 0.1)
    im = ax.imshow(lg, cmap="RdYlGn", norm=TwoSlopeNorm(0.0, -lim, lim), aspect="auto", origin="lower")
    for i in range(len(bandwidths_gbps)):
        for j in range(len(workers)):
            ax.text(j, i, f"{speedup[i, j]:.2g}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(workers)), [str(w) for w in workers])
    ax.set_yticks(range(len(bandwidths_gbps)), [f"{b:g}" for b in bandwidths_gbps])
    ax.set_xlabel("workers")
    ax.set_ylabel("inter-node bandwidth (Gbit/s)")
    cb = fig.colorbar(im, ax=ax)
    cb.set_label("log₂ speedup over uncompressed")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
    finally:
        plt.close(fig)
    return path
