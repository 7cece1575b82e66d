"""Writing sweep results: CSV, JSON (with the inputs that reproduce them), figures.

Every file is written atomically (:func:`atomic_path`): a temp file in the same
folder renamed into place, so a failed write never leaves a half-written file
or destroys the one already there. A figure is written twice
(:func:`write_figure`): PNG at 200 dpi for screens, SVG beside it for papers.
The figures of ``kfsim scale`` and ``kfsim advise`` are built here
(:func:`scale_figure`, :func:`heatmap_figure`); how they look is
:mod:`kfsim.sim.plotstyle`.
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

from kfsim.sim import plotstyle


def check_writable(path: str | Path, what: str) -> Path:
    """Create the folder ``path`` if needed and write a probe file into it; ValueError
    naming ``what`` (a flag, a folder's role) when it is a file or cannot be written."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{what} {path}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".kfsim-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(f"{what} {path}: cannot write there ({exc.strerror or exc})") from None
    return path


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


def write_figure(fig, path: str | Path) -> Path:
    """Write ``fig`` as PNG at ``path`` (:data:`plotstyle.DPI`) and as SVG beside it (same name,
    ``.svg``), after :func:`plotstyle.declutter`. Both are rendered to temp files first and then
    renamed, so a failure leaves both old files as they were. Returns the PNG's path."""
    path = Path(path)
    plotstyle.declutter(fig)
    targets = [(path, "png"), (path.with_suffix(".svg"), "svg")]
    import matplotlib

    with contextlib.ExitStack() as stack, matplotlib.rc_context({"svg.hashsalt": "kfsim"}):
        for target, fmt in targets:
            tmp = stack.enter_context(atomic_path(target))
            fig.savefig(tmp, format=fmt, dpi=plotstyle.DPI, metadata={"Date": None} if fmt == "svg" else None)
    return path


@plotstyle.styled
def scale_figure(rows: Sequence[dict], title: str):
    """Time per iteration and scaling efficiency versus workers, one series per compressor."""
    fig, (a1, a2) = plotstyle.figure(1, 2, height=3.4)
    workers = sorted({r["workers"] for r in rows})
    for i, spec in enumerate(dict.fromkeys(r["compressor"] for r in rows)):
        rs = sorted((r for r in rows if r["compressor"] == spec), key=lambda r: r["workers"])
        x = [r["workers"] for r in rs]
        a1.plot(x, [r["total_s"] for r in rs], label=spec, **plotstyle.series(i))
        a2.plot(x, [100 * r["scaling_efficiency"] for r in rs], **plotstyle.series(i))
    for a in (a1, a2):
        if plotstyle.log_if_spans(a, "x", workers, base=2):
            plotstyle.integer_ticks(a.xaxis, workers)
        a.set_xlabel("number of workers")
    plotstyle.log_if_spans(a1, "y", [r["total_s"] for r in rows])
    a1.set_ylabel("time per iteration [s]")
    if not plotstyle.log_if_spans(a2, "y", [r["scaling_efficiency"] for r in rows]):
        a2.set_ylim(0, 105)
    a2.set_ylabel(r"scaling efficiency $T_1/T_p$ [%]")
    plotstyle.legend_below(fig)
    fig.suptitle(title)
    plotstyle.declutter(fig)
    return fig


def plot_scale(path: Path, rows: Sequence[dict], title: str) -> Path:
    """:func:`scale_figure`, written to ``path`` (PNG) and its ``.svg``."""
    return write_figure(scale_figure(rows, title), path)


@plotstyle.styled
def heatmap_figure(speedup: np.ndarray, bandwidths_gbps: Sequence[float], workers: Sequence[int], title: str):
    """Speedup over uncompressed, bandwidth rows × worker columns, each cell labelled; the colour
    scale is logarithmic (log₂ of the speedup) and diverges at 1 (blue: faster, red: slower)."""
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.ticker import FixedLocator, FuncFormatter

    speedup = np.asarray(speedup, dtype=float)
    fig, ax = plotstyle.figure(width=float(np.clip(2.6 + 0.5 * len(workers), plotstyle.NARROW, plotstyle.WIDE)),
                               height=float(np.clip(1.4 + 0.27 * len(bandwidths_gbps), 3.0, 6.0)))
    lg = np.log2(np.clip(speedup, 1e-6, None))
    lim = max(float(np.ceil(np.abs(lg).max())), 1.0)
    norm = TwoSlopeNorm(0.0, -lim, lim)
    im = ax.imshow(lg, cmap="RdBu", norm=norm, aspect="auto", origin="lower")
    for (i, j), s in np.ndenumerate(speedup):
        dark = abs(norm(lg[i, j]) - 0.5) > 0.32
        ax.text(j, i, f"{s:.2g}", ha="center", va="center", fontsize=7, color="white" if dark else "black")
    ax.set_xticks(range(len(workers)), [str(w) for w in workers])
    ax.set_yticks(range(len(bandwidths_gbps)), [f"{b:g}" for b in bandwidths_gbps])
    ax.grid(False)
    ax.spines[:].set_visible(True)
    ax.tick_params(length=0)
    ax.set_xlabel("number of workers")
    ax.set_ylabel("inter-node bandwidth [Gbit/s]")
    cb = fig.colorbar(im, ax=ax, shrink=0.9)
    step = max(1, int(lim) // 4)
    cb.ax.yaxis.set_major_locator(FixedLocator(np.arange(-int(lim), int(lim) + 1, step)))
    cb.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{2.0 ** v:g}" if v >= 0 else f"1/{2.0 ** -v:g}"))
    cb.set_label("speedup over uncompressed [×]")
    ax.set_title(title)
    plotstyle.declutter(fig)
    return fig


def plot_heatmap(path: Path, speedup: np.ndarray, bandwidths_gbps: Sequence[float], workers: Sequence[int],
                 title: str) -> Path:
    """:func:`heatmap_figure`, written to ``path`` (PNG) and its ``.svg``."""
    return write_figure(heatmap_figure(speedup, bandwidths_gbps, workers, title), path)
