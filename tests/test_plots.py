"""Every figure kfsim draws is fit for a paper, checked on the Figure object and the files.

For each figure builder (``kfsim scale``, ``kfsim advise``, ``kfsim study``,
``kfsim validate``, the notebooks' save helper):

* it writes PNG (≥ 200 dpi) and SVG beside it, atomically (a failed write keeps the old files);
* an axis whose plotted data span more than 1.5 decades is logarithmic;
* every axis label names its unit in brackets (``time per iteration [s]``), counts excepted
  (``number of workers``, ``training step``);
* no two tick labels overlap, nor do tick labels, axis labels, titles and legends
  (boxes from ``fig.canvas.get_renderer()``, checked pairwise);
* the colours come from the colour-blind-safe palette, and series differ in marker too.

The checks here are written independently of :mod:`kfsim.sim.plotstyle`'s own
overlap repair, so they also catch a repair that misses.
"""
from __future__ import annotations

import json
import math
import re
import struct
import sys
from xml.etree import ElementTree
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from kfsim.sim import plotstyle, report

ROOT = Path(__file__).resolve().parent.parent
UNIT = re.compile(r"\[[^\]]+\]")
COUNTS = ("number of ", "training step")


# -- the checks ------------------------------------------------------------------------------

def _boxes(fig):
    fig.draw_without_rendering()
    return fig.canvas.get_renderer()


def drawn_tick_labels(ax, axis, renderer):
    """Tick labels (major and minor) drawn inside the axes' extent along ``axis``."""
    box = ax.get_window_extent(renderer)
    out = []
    for t in getattr(ax, f"get_{axis}ticklabels")(which="both"):
        if not (t.get_visible() and t.get_text().strip()):
            continue
        b = t.get_window_extent(renderer)
        mid = (b.x0 + b.x1) / 2 if axis == "x" else (b.y0 + b.y1) / 2
        lo, hi = (box.x0, box.x1) if axis == "x" else (box.y0, box.y1)
        if lo - 2 <= mid <= hi + 2:
            out.append(t)
    return out


def overlapping(items, renderer):
    """Pairs (text, text) among ``items`` (artists) whose drawn boxes intersect."""
    boxes = [(a, a.get_window_extent(renderer)) for a in items]
    bad = []
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1:]:
            if min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > 0.5 and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > 0.5:
                bad.append((_name(a), _name(b)))
    return bad


def _name(artist):
    return artist.get_text() if hasattr(artist, "get_text") else type(artist).__name__


def data_of(ax, axis):
    """The x or y values of the series plotted on ``ax`` (lines and scatter points)."""
    vals = []
    for line in ax.get_lines():
        xy = np.asarray(line.get_xydata(), dtype=float)
        if len(xy) > 1:
            vals += list(xy[:, 0 if axis == "x" else 1])
    for coll in ax.collections:
        offs = np.asarray(coll.get_offsets(), dtype=float)
        if offs.ndim == 2 and len(offs) > 1 and type(coll).__name__ == "PathCollection":
            vals += list(offs[:, 0 if axis == "x" else 1])
    return [v for v in vals if math.isfinite(v) and v > 0]


def check_figure(fig):
    """Every rule of the module docstring that can be read off a Figure."""
    r = _boxes(fig)
    problems = []
    chrome = []
    for ax in fig.axes:
        is_cbar = ax.get_label() == "<colorbar>"
        for axis in ("x", "y"):
            labels = drawn_tick_labels(ax, axis, r)
            chrome += labels
            if clash := overlapping(labels, r):
                problems.append(f"{ax.get_title() or 'axes'}: {axis} tick labels overlap: {clash}")
            label = getattr(ax, f"get_{axis}label")()
            if label:
                chrome.append(getattr(ax, f"{axis}axis").label)
                if not (UNIT.search(label) or label.startswith(COUNTS)):
                    problems.append(f"{axis} label {label!r} names no unit")
            elif labels and not is_cbar:
                problems.append(f"{ax.get_title() or 'axes'}: {axis} axis has ticks but no label")
            if not is_cbar and not ax.images:
                vals = data_of(ax, axis)
                if plotstyle.spans_decades(vals) and getattr(ax, f"get_{axis}scale")() != "log":
                    problems.append(f"{axis} data span {min(vals):.3g}..{max(vals):.3g} on a linear axis")
        if is_cbar and not ax.get_ylabel():
            problems.append("colour bar without a label")
        if ax.get_title():
            chrome.append(ax.title)
        if ax.get_legend():
            chrome.append(ax.get_legend())
    chrome += [t for t in fig.texts if t.get_text()] + list(fig.legends)   # the suptitle, figure legends
    if clash := overlapping(chrome, r):
        problems.append(f"texts overlap: {clash}")
    page = fig.bbox
    for item in chrome:
        b = item.get_window_extent(r)
        if b.x0 < page.x0 - 1 or b.y0 < page.y0 - 1 or b.x1 > page.x1 + 1 or b.y1 > page.y1 + 1:
            problems.append(f"{_name(item)!r} is cut off at the edge of the figure")
    assert not problems, "\n".join(problems)


def check_files(png: Path):
    """PNG at ≥ 200 dpi and an SVG beside it; no temp files left behind."""
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    phys = data.find(b"pHYs")
    assert phys > 0, "PNG without a resolution"
    ppm = struct.unpack(">I", data[phys + 4:phys + 8])[0]
    assert ppm / 39.37 >= 199, f"{png}: {ppm / 39.37:.0f} dpi"
    assert width >= 900, f"{png}: only {width} px wide"
    svg = png.with_suffix(".svg")
    text = svg.read_text()
    root = ElementTree.fromstring(text)                      # well-formed XML ...
    assert root.tag.endswith("svg") and root.get("viewBox"), f"{svg} is not an SVG"   # ... with a size
    assert not [p.name for p in png.parent.iterdir() if p.name.endswith(".tmp")]


def check_markers(fig):
    """Series on one axes (up to the palette's size) differ in colour and in marker."""
    for ax in fig.axes:
        lines = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_") and len(ln.get_xdata()) > 1
                 and ln.get_marker() not in (None, "None", "none", "")]
        assert len(lines) <= len(plotstyle.COLORS)
        for prop in (lambda ln: ln.get_color(), lambda ln: ln.get_marker()):
            assert len({prop(ln) for ln in lines}) == len(lines), f"two series look alike on {ax.get_title()!r}"
        for ln in lines:
            assert matplotlib.colors.to_hex(ln.get_color()).upper() in {c.upper() for c in plotstyle.COLORS}


# -- the figures -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def scale_rows():
    from kfsim import catalog
    from kfsim.sim.predict import single_worker_time, sweep

    cluster = catalog.seed_cluster()
    workers = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    t1 = single_worker_time("bert-large", cluster)
    rows = []
    for spec in ("none()", "fp16()", "quantize(bits=8)", "ef(topk(ratio=0.01))", "powersgd(rank=4)",
                 "efsignsgd()"):
        for w, t in zip(workers, sweep("bert-large", cluster, spec, workers)):
            rows.append({"compressor": spec, "workers": w, "total_s": float(t), "scaling_efficiency": t1 / float(t)})
    return rows


def test_scale_figure(scale_rows, tmp_path):
    fig = report.scale_figure(scale_rows, "bert-large on the seed cluster, 1 Gbit/s")
    check_figure(fig)
    check_markers(fig)
    a1, a2 = [ax for ax in fig.axes]
    assert a1.get_xscale() == a2.get_xscale() == "log" and a1.get_yscale() == a2.get_yscale() == "log"
    assert "[s]" in a1.get_ylabel() and "[%]" in a2.get_ylabel()
    assert [t.get_text() for t in a1.get_xticklabels()] == [str(w) for w in sorted({r["workers"] for r in scale_rows})]
    png = report.plot_scale(tmp_path / "scale.png", scale_rows, "title")
    check_files(png)


def test_scale_figure_few_workers_stays_linear(tmp_path):
    rows = [{"compressor": "none()", "workers": w, "total_s": 0.1 + 0.01 * w, "scaling_efficiency": 1 / (1 + 0.1 * w)}
            for w in (2, 4, 8)]
    fig = report.scale_figure(rows, "small")
    check_figure(fig)
    a1, a2 = fig.axes
    assert a1.get_yscale() == "linear" and a2.get_ylim() == (0, 105)


def test_heatmap_figure(tmp_path):
    from kfsim import catalog
    from kfsim.sim.predict import sweep

    cluster = catalog.seed_cluster()
    bws = [0.1, 0.5, 1, 5, 10, 25, 100, 400]
    ws = [2, 4, 8, 16, 64, 256, 1024]
    per = [np.asarray(sweep("bert-large", cluster, s, ws, bandwidths=np.array(bws) * 1e9 / 8))
           for s in ("none()", "ef(topk(ratio=0.01))")]
    speedup = per[0] / per[1]
    fig = report.heatmap_figure(speedup, bws, ws, "ef(topk(ratio=0.01)) vs none()")
    check_figure(fig)
    ax, cb = fig.axes
    norm = ax.images[0].norm
    assert np.allclose(ax.images[0].get_array(), np.log2(speedup))   # the colour scale is logarithmic
    assert norm.vmin == -norm.vmax and norm.vcenter == 0             # ... and diverges at speedup 1
    assert ax.images[0].get_cmap().name == "RdBu"                    # colour-blind safe (not red-green)
    assert {t.get_text() for t in cb.get_yticklabels()} >= {"1", "2", "1/2"}
    assert "[Gbit/s]" in ax.get_ylabel()
    check_files(report.plot_heatmap(tmp_path / "advise.png", speedup, bws, ws, "t"))


@pytest.mark.parametrize("shape", [(1, 1), (3, 2), (2, 12)])
def test_heatmap_figure_small_and_large_grids(shape):
    bws = [0.1 * 3 ** i for i in range(shape[0])]
    ws = [2 ** (i + 1) for i in range(shape[1])]
    speedup = np.geomspace(0.2, 9.0, shape[0] * shape[1]).reshape(shape)
    check_figure(report.heatmap_figure(speedup, bws, ws, "ef(topk(ratio=0.01)) vs none() — resnet-50, rtx3090"))


def _study_curves():
    rng = np.random.default_rng(0)
    curves = {}
    for b, slow in ((1.0, 1.0), (10.0, 0.12)):
        curves[b] = {}
        for spec, per_step in (("none()", 0.011), ("ef(topk(ratio=0.01))", 0.0004), ("qsgd(levels=16)", 0.006)):
            t = np.cumsum(np.full(12, per_step * 25 * slow))
            acc = 0.5 + 0.3 * (1 - np.exp(-np.arange(1, 13) / 3)) + rng.normal(0, 0.01, 12)
            curves[b][spec] = list(zip(t, acc))
    return curves


def test_study_figure(tmp_path):
    from kfsim.train import study

    cfg = study.StudyConfig(specs=("none()",), workers=4, target_accuracy=0.78, bandwidths=(1.0, 10.0))
    fig = study.figure(_study_curves(), cfg)
    check_figure(fig)
    check_markers(fig)
    assert all(ax.get_xscale() == "log" for ax in fig.axes)
    assert fig.legends and "target 78%" in [t.get_text() for t in fig.legends[0].get_texts()]
    check_files(study.plot(tmp_path / "accuracy_vs_time.png", _study_curves(), cfg))


def test_validate_figure_from_stored_cases(tmp_path):
    from kfsim.testbed import validate as val

    stored = json.loads((ROOT / "profiles/validate/validate.json").read_text())
    cases = [val.Case(**{k: v for k, v in c.items() if k in val.Case._fields}) for c in stored]
    fig = val.figure(cases)
    check_figure(fig)
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_xlim() == ax.get_ylim()
    check_files(val.plot(cases, tmp_path / "validate.png"))


def test_notebook_save_writes_png_and_svg(tmp_path, monkeypatch):
    monkeypatch.setenv("KFSIM_NB_OUT", str(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT / "notebooks"))
    import nbfigures
    import matplotlib.pyplot as plt

    out, save = nbfigures.figures("x")
    fig, ax = plt.subplots(figsize=(plotstyle.NARROW, 3))
    ax.plot([1, 10, 100, 1000], [1, 2, 3, 4], label="a", **plotstyle.series(0))
    plotstyle.log_if_spans(ax, "x", [1, 1000])
    ax.set_xlabel("size [MiB]")
    ax.set_ylabel("time [s]")
    check_figure(fig)
    check_files(save(fig, "f.png"))
    assert not plt.get_fignums()


# -- the machinery ---------------------------------------------------------------------------

def test_the_checks_catch_what_a_reviewer_would():
    """check_figure fails on a figure with every fault (so a passing check means something)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2.5, 2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot([1, 10, 1000, 1e5], [1, 2, 3, 4])                  # 5 decades on a linear axis
    ax.set_xticks([1, 2, 3, 4], ["first long", "second long", "third long", "fourth long"])
    ax.set_xlabel("time")                                       # no unit
    ax.set_ylabel("count of things [1]")
    ax.set_title("a title far too long to fit into this narrow figure at all")
    with pytest.raises(AssertionError) as err:
        check_figure(fig)
    msg = str(err.value)
    assert "linear axis" in msg and "names no unit" in msg and "tick labels overlap" in msg and "cut off" in msg


def test_declutter_separates_crowded_tick_labels():
    fig, ax = plotstyle.figure(width=3, height=2.5)
    names = [f"compressor-{i}" for i in range(12)]
    ax.bar(names, range(12))
    ax.set_xlabel("compressor [spec]")
    ax.set_ylabel("time [s]")
    r = _boxes(fig)
    assert overlapping(drawn_tick_labels(ax, "x", r), r)          # crowded before
    plotstyle.declutter(fig)
    check_figure(fig)


def test_declutter_thins_numbers():
    fig, ax = plotstyle.figure(width=2.2, height=2)
    xs = np.arange(0, 1e6 + 1, 5e4)
    ax.plot(xs, xs, **plotstyle.series(0))
    ax.set_xticks(xs)
    ax.set_xlabel("bytes [B]")
    ax.set_ylabel("bytes [B]")
    plotstyle.declutter(fig)
    check_figure(fig)
    assert ax.xaxis.get_majorticklabels()[0].get_rotation() == 0     # numbers thinned, not rotated


def test_log_if_spans():
    fig, ax = plotstyle.figure()
    assert not plotstyle.log_if_spans(ax, "x", [1, 10, 30]) and ax.get_xscale() == "linear"
    assert plotstyle.log_if_spans(ax, "y", [0.01, 1, 5]) and ax.get_yscale() == "log"
    assert not plotstyle.spans_decades([]) and not plotstyle.spans_decades([0, -1, float("nan")])
    assert plotstyle.log_if_spans(ax, "x", (v for v in (1, 1000)))     # a generator is read once
    ax.set_xlim(0.01, 1e6)
    fig.draw_without_rendering()
    texts = {t.get_text() for t in ax.get_xticklabels()}
    assert {"0.01", "1", "100", "10000"} <= texts and "$10^{6}$" in texts   # plain numbers where short


def test_write_figure_is_atomic(tmp_path, monkeypatch):
    png, svg = tmp_path / "f.png", tmp_path / "f.svg"
    png.write_text("old png\n")
    svg.write_text("old svg\n")
    fig, ax = plotstyle.figure()
    ax.plot([1, 2], [1, 2])
    real = fig.savefig

    def failing(target, format=None, **kw):
        if format == "svg":
            raise RuntimeError("disk full")
        return real(target, format=format, **kw)

    monkeypatch.setattr(fig, "savefig", failing)
    with pytest.raises(RuntimeError):
        report.write_figure(fig, png)
    assert png.read_text() == "old png\n" and svg.read_text() == "old svg\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png", "f.svg"]


def test_style_does_not_leak():
    before = dict(matplotlib.rcParams)
    report.scale_figure([{"compressor": "none()", "workers": w, "total_s": 0.1 * w, "scaling_efficiency": 0.5}
                         for w in (2, 4)], "t")
    after = dict(matplotlib.rcParams)
    assert {k for k in before if before[k] != after[k]} <= {"backend"}


def test_same_figure_same_svg(tmp_path):
    def once(name):
        fig, ax = plotstyle.figure()
        ax.plot([1, 2, 3], [3, 1, 2], **plotstyle.series(1))
        ax.set_xlabel("x [s]")
        ax.set_ylabel("y [s]")
        return report.write_figure(fig, tmp_path / name).with_suffix(".svg").read_text()

    assert once("a.png") == once("b.png")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
