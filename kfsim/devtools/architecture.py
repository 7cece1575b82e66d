"""Draw the layers of kfsim from its import graph: ``python -m kfsim.devtools.architecture``.

Writes ``docs/img/architecture.png`` and ``.svg`` (boxes: packages and their
subpackages, bottom layer first; arrows: "imports") and
``docs/img/architecture.txt``, the edge list the picture was drawn from (a
test regenerates it and fails when the picture is stale).
"""
from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from kfsim.devtools.layout import PACKAGES, ROOT, graph, group, group_edges, modules

LAYER_TITLES = {"compressors": "compressors/  (pure definitions, the ops namespace, the exchange runner)",
                "backends": "backends/  (bindings of the ops namespace; the MindSpore lowering)",
                "kfsim": "kfsim/  (simulator, training, CLI, launch, testbed)"}


def edge_list(root: Path = ROOT) -> str:
    g = graph(root)
    boxes: dict[str, int] = defaultdict(int)
    for m in modules(root):
        boxes[group(m)] += 1
    lines = [f"box {b} {n}" for b, n in sorted(boxes.items())]
    lines += [f"edge {a} -> {b}" for a, b in group_edges(g)]
    return "\n".join(lines) + "\n"


def draw(out_dir: Path, root: Path = ROOT) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    text = edge_list(root)
    boxes = {ln.split()[1]: int(ln.split()[2]) for ln in text.splitlines() if ln.startswith("box ")}
    edges = [tuple(ln[5:].split(" -> ")) for ln in text.splitlines() if ln.startswith("edge ")]
    rows = {top: sorted(b for b in boxes if b.split(".")[0] == top) for top in PACKAGES}
    width, row_h, gap = 12.0, 1.0, 0.9
    pos = {}
    fig, ax = plt.subplots(figsize=(width, 1.2 + len(PACKAGES) * (row_h + gap)))
    for level, top in enumerate(PACKAGES):
        y = level * (row_h + gap)
        ax.add_patch(FancyBboxPatch((-0.2, y - 0.25), width + 0.4, row_h + 0.5, boxstyle="round,pad=0.02",
                                    fc=("#eef3fb", "#f3f8ee", "#fbf3ee")[level], ec="#999999", lw=0.8))
        ax.text(-0.1, y + row_h + 0.12, LAYER_TITLES[top], fontsize=9, va="bottom", color="#333333")
        names = rows[top]
        w = width / max(1, len(names))
        for i, b in enumerate(names):
            x = i * w
            ax.add_patch(FancyBboxPatch((x + 0.08, y + 0.05), w - 0.16, row_h - 0.25, boxstyle="round,pad=0.02",
                                        fc="white", ec="#444444", lw=1.0))
            label = b if b == top else b.split(".", 1)[1] + "/"
            ax.text(x + w / 2, y + row_h / 2 - 0.05, f"{label}\n{boxes[b]} modules", ha="center", va="center",
                    fontsize=8)
            pos[b] = (x + w / 2, y, y + row_h - 0.2)
    for a, b in edges:
        xa, ya0, ya1 = pos[a]
        xb, yb0, yb1 = pos[b]
        if ya0 == yb0:
            continue  # within a layer: not drawn (listed in the .txt)
        start, end = ((xa, ya0), (xb, yb1)) if ya0 > yb0 else ((xa, ya1), (xb, yb0))
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=8, lw=0.6,
                                     color="#cc3333" if ya0 < yb0 else "#777777", alpha=0.7))
    ax.set_xlim(-0.4, width + 0.4)
    ax.set_ylim(-0.5, len(PACKAGES) * (row_h + gap) + 0.1)
    ax.axis("off")
    ax.set_title("kfsim layers: each arrow is an import (generated from the source by kfsim.devtools.architecture)",
                 fontsize=9)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "architecture.png", out_dir / "architecture.svg"]
    fig.tight_layout()
    for p in paths:
        fig.savefig(p, dpi=130)
    plt.close(fig)
    txt = out_dir / "architecture.txt"
    txt.write_text(text)
    return paths + [txt]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = ap.parse_args(argv)
    for p in draw(args.out):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
