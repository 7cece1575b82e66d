"""How every kfsim figure looks: sizes, fonts, colours, axes, tick labels.

The figures are meant to go into a paper as they are. The rules:

* a figure is 7.2 in wide (a two-column page) or 4.8 in (one panel), with
  9 pt text, 8 pt ticks and legends, and constrained layout;
* the series cycle through the Okabe-Ito colours (Okabe & Ito 2008, safe
  for colour-blind readers), each with its own marker and line style, so
  they stay apart in greyscale too (:func:`series`);
* an axis whose values span more than 1.5 decades is logarithmic, with plain
  numbers on the ticks (:func:`log_if_spans`);
* every axis label carries its unit in brackets: ``time per iteration [s]``;
* tick labels do not overlap (:func:`declutter` drops minor labels, rotates
  text labels, thins numbers, and checks again).

Builders of figures are decorated with :func:`styled` (the style holds for
that call only; matplotlib's global settings are left as they were) and make
their figure with :func:`figure`: a plain ``matplotlib.figure.Figure`` on the
Agg canvas, outside pyplot, so no backend is selected and nothing needs
closing. Notebooks call :func:`use` once instead. The figures are written,
PNG and SVG, by :func:`kfsim.sim.report.write_figure`.
"""
from __future__ import annotations

import contextlib
import functools
import math
import re
from typing import Iterable, Iterator, Sequence

# Okabe-Ito, without the yellow (too faint on white) and with black last.
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 2)))
REFERENCE = "0.45"           # colour of reference lines (targets, y = x, speedup 1)
DPI = 200
WIDE, NARROW = 7.2, 4.8      # inches
LOG_DECADES = 1.5            # an axis spanning more decades than this is logarithmic

RC = {
    "figure.constrained_layout.use": True,
    "figure.dpi": 100,
    "savefig.dpi": DPI,
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "figure.titlesize": 10,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "legend.title_fontsize": 8,
    "legend.frameon": True,
    "legend.framealpha": 0.9,
    "legend.edgecolor": "0.8",
    "lines.linewidth": 1.4,
    "lines.markersize": 5,
    "axes.grid": True,
    "axes.grid.which": "major",
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "image.cmap": "cividis",
    "svg.hashsalt": "kfsim",     # the same figure gives the same SVG
}


def series(i: int) -> dict:
    """Colour, marker and line style of the i-th series (``ax.plot(x, y, **series(i))``)."""
    return {"color": COLORS[i % len(COLORS)], "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINESTYLES[i % len(LINESTYLES)]}


def _cycle():
    from cycler import cycler

    return cycler(color=list(COLORS)) + cycler(marker=list(MARKERS)) + cycler(linestyle=list(LINESTYLES))


@contextlib.contextmanager
def style() -> Iterator[None]:
    """The house style for the duration of a ``with`` block."""
    import matplotlib

    with matplotlib.rc_context({**RC, "axes.prop_cycle": _cycle()}):
        yield


def styled(fn):
    """Run ``fn`` (a figure builder) under :func:`style`."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with style():
            return fn(*args, **kwargs)
    return wrapper


def use() -> None:
    """Make the house style matplotlib's default (notebooks: once, before the first figure)."""
    import matplotlib

    matplotlib.rcParams.update({**RC, "axes.prop_cycle": _cycle()})


def figure(nrows: int = 1, ncols: int = 1, width: float = WIDE, height: float = 3.2, **subplot_kw):
    """``(fig, axes)`` like ``plt.subplots`` (``squeeze`` as there), on the Agg canvas, outside pyplot."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, **subplot_kw)


def _decades(values: Iterable[float]) -> float:
    """How many powers of ten the positive, finite values span (0 for none)."""
    vs = [float(v) for v in values if v is not None and math.isfinite(v) and v > 0]
    return math.log10(max(vs) / min(vs)) if vs else 0.0


def spans_decades(values: Iterable[float], decades: float = LOG_DECADES) -> bool:
    """True when the positive values span more than ``decades`` powers of ten."""
    return _decades(values) > decades


def log_if_spans(ax, which: str, values: Iterable[float], base: float = 10, decades: float = LOG_DECADES) -> bool:
    """Make ``ax``'s ``which`` ("x" or "y") axis logarithmic, with plain-number tick labels,
    when ``values`` span more than ``decades`` decades; returns whether it did."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    span = _decades(values)
    if not span > decades:
        return False
    getattr(ax, f"set_{which}scale")("log", base=base)
    axis = getattr(ax, f"{which}axis")
    axis.set_major_formatter(FuncFormatter(_plain))
    few = base == 10 and span < 3        # few decades: label the 2s and 5s as well
    axis.set_minor_formatter(FuncFormatter(_two_five) if few else NullFormatter())
    return True


def _two_five(v: float, _pos=None) -> str:
    lead = round(v / 10 ** math.floor(math.log10(v) + 1e-9), 6)
    return _plain(v) if lead in (2, 5) else ""


def _plain(v: float, _pos=None) -> str:
    """A tick value in plain notation where that is short: 0.01, 1, 250, 1000, 1e+06."""
    if v == 0:
        return "0"
    if 1e-3 <= abs(v) < 1e5:
        text = f"{v:.0f}" if abs(v) >= 1 and float(v).is_integer() else f"{v:.4g}"
        return text.replace("-", "\u2212")
    e = math.floor(math.log10(abs(v)) + 1e-9)
    m = v / 10**e
    return (f"$10^{{{e}}}$" if abs(m - 1) < 1e-9 else f"${m:.3g}\\times10^{{{e}}}$")


def integer_ticks(axis, values: Sequence[int]) -> None:
    """Major ticks exactly at ``values`` (e.g. the worker counts), labelled as plain integers."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    axis.set_major_locator(FixedLocator(sorted(set(values))))
    axis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:.0f}"))
    axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())


def legend_below(fig, ncols: int | None = None, **kwargs):
    """One legend for the whole figure, under the panels (each label once, from every axes)."""
    entries = {}
    for ax in fig.axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, h)
    labels = list(entries)
    ncols = ncols or min(len(labels), 3 if max(map(len, labels), default=0) > 18 else 4)
    return fig.legend(list(entries.values()), labels, loc="outside lower center", ncols=max(1, ncols), **kwargs)


# -- tick labels that do not collide ---------------------------------------------------------

def _renderer(fig):
    fig.draw_without_rendering()
    return fig.canvas.get_renderer()


def _ticks_in_view(axis, minor: bool = False) -> list[tuple]:
    """``(tick, location)`` of the ticks within ``axis``'s view (the drawn ones), texts up to date."""
    (axis.get_minorticklabels if minor else axis.get_majorticklabels)()   # updates texts and positions
    locs = axis.get_minorticklocs() if minor else axis.get_majorticklocs()
    ticks = (axis.get_minor_ticks if minor else axis.get_major_ticks)(len(locs))
    lo, hi = sorted(axis.get_view_interval())
    tol = 1e-9 * max(abs(lo), abs(hi), 1e-300)
    return [(tick, loc) for tick, loc in zip(ticks, locs) if lo - tol <= loc <= hi + tol]


def tick_labels(axis, minor: bool = False) -> list:
    """The visible, non-empty tick labels of ``axis`` at ticks within its view."""
    return [t for tick, _ in _ticks_in_view(axis, minor) for t in (tick.label1, tick.label2)
            if t.get_visible() and t.get_text().strip()]


MIN_GAP_IN = 0.05            # tick labels closer than this (inches) count as overlapping


def clashes(texts: Sequence, renderer, gap_in: float = MIN_GAP_IN) -> list[tuple]:
    """Pairs of ``texts`` whose drawn boxes overlap or come closer than ``gap_in`` inches."""
    pad = gap_in * renderer.dpi / 2
    boxes = [(t, t.get_window_extent(renderer).padded(pad)) for t in texts]
    return [(ta, tb) for i, (ta, a) in enumerate(boxes) for tb, b in boxes[i + 1:]
            if min(a.x1, b.x1) > max(a.x0, b.x0) and min(a.y1, b.y1) > max(a.y0, b.y0)]


def declutter(fig) -> None:
    """Remove overlaps among the tick labels of each axis: drop the minor labels, then rotate
    text labels (x axis), then keep every k-th major tick until no labels overlap."""
    from matplotlib.ticker import NullFormatter

    r = _renderer(fig)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if tick_labels(axis, minor=True) and clashes(tick_labels(axis) + tick_labels(axis, minor=True), r):
                axis.set_minor_formatter(NullFormatter())
                r = _renderer(fig)
            labels = tick_labels(axis)
            if not clashes(labels, r):
                continue
            if axis.axis_name == "x" and not all(_is_number(t.get_text()) for t in labels):
                ax.tick_params(axis="x", labelrotation=30)
                for t in axis.get_majorticklabels():
                    t.set_horizontalalignment("right")
                    t.set_rotation_mode("anchor")
                r = _renderer(fig)
                labels = tick_labels(axis)
            kept = [(loc, t.label1.get_text() or t.label2.get_text()) for t, loc in _ticks_in_view(axis)]
            k = 2
            while clashes(labels, r) and k < len(kept):
                axis.set_ticks([loc for loc, _ in kept[::k]], [text for _, text in kept[::k]])
                r = _renderer(fig)
                labels = tick_labels(axis)
                k += 1


def _is_number(text: str) -> bool:
    """A tick label that shows a number (plain, or mathtext such as ``$10^{3}$``)."""
    return bool(re.fullmatch(r"[-+\u2212\d.eE${}^ ]+", text.replace("\\mathdefault", "").replace("\\times", "")))
