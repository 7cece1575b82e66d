"""Where the notebooks put their figures and files (a helper module, not a notebook).

``OUT, save = figures("02_simulate")``: the folder ``$KFSIM_NB_OUT/<name>``
(the test suite sets ``KFSIM_NB_OUT``), else ``../results/notebooks/<name>``
relative to ``notebooks/``; ``save(fig, "x.png")`` writes a figure there,
closes it and returns its path. Importing this module selects matplotlib's
Agg backend (figures are files; Jupyter shows them inline as well).
"""
from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def figures(name: str):
    out = Path(os.environ.get("KFSIM_NB_OUT", "../results/notebooks")) / name
    out.mkdir(parents=True, exist_ok=True)

    def save(fig, filename: str) -> Path:
        path = out / filename
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        print("wrote", path)
        return path

    return out, save
