"""Where the notebooks put their figures and files (a helper module, not a notebook).

``OUT, save = figures("02_simulate")``: the folder ``$KFSIM_NB_OUT/<name>``
(the test suite sets ``KFSIM_NB_OUT``), else ``../results/notebooks/<name>``
relative to ``notebooks/``; ``save(fig, "x.png")`` writes a figure there as
PNG and, beside it, SVG (:func:`kfsim.sim.report.write_figure`), closes it and
returns the PNG's path. Importing this module selects matplotlib's Agg
backend (figures are files; Jupyter shows them inline as well) and kfsim's
figure style (:mod:`kfsim.sim.plotstyle`).
"""
from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from kfsim.sim import plotstyle  # noqa: E402
from kfsim.sim.report import write_figure  # noqa: E402

plotstyle.use()


def figures(name: str):
    out = Path(os.environ.get("KFSIM_NB_OUT", "../results/notebooks")) / name
    out.mkdir(parents=True, exist_ok=True)

    def save(fig, filename: str) -> Path:
        path = write_figure(fig, out / filename)
        plt.close(fig)
        print("wrote", path, "and", path.with_suffix(".svg").name)
        return path

    return out, save
