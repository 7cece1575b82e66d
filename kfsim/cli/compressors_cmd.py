"""``kfsim compressors``: the compressor registry as a table (terminal or Markdown)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

import compressors
from compressors.registry import fmt_param
from kfsim.cli import app, options

SHAPE = (1024, 1024)  # the tensor the ratio column is computed for (fp32)


def rows() -> list[dict]:
    """One row per registered compressor/combinator with its static facts."""
    out = []
    for e in compressors.entries():
        row = {"name": e.name, "params": ", ".join(fmt_param(p) for p in e.params),
               "param_list": [fmt_param(p) for p in e.params],
               "doc": e.doc, "paper": e.paper, "combinator": e.combinator}
        if not e.combinator:
            c = e.factory()
            plan = c.plan(SHAPE)
            row.update(spec=c.spec, ratio=c.ratio(SHAPE), law=" + ".join(r.law.value + ("/p" if r.shard else "") for r in plan),
                       contract="unbiased" if c.unbiased else ("δ-contraction" if c.contractive else "biased"))
        out.append(row)
    return out


def markdown() -> str:
    """The README's compressor table (Markdown), generated from the registry."""
    lines = [f"| compressor | default spec | ratio on a {SHAPE[0]}×{SHAPE[1]} fp32 tensor | aggregation (per round) "
             "| contract | paper |", "|---|---|---|---|---|---|"]
    for r in rows():
        if not r["combinator"]:
            lines.append(f"| `{r['name']}` | `{r['spec']}` | {r['ratio']:.1f}× | {r['law']} | {r['contract']} | {r['paper']} |")
    lines += ["", "| combinator | parameters | what it does | paper |", "|---|---|---|---|"]
    for r in rows():
        if r["combinator"]:
            lines.append(f"| `{r['name']}` | `{r['params']}` | {r['doc']} | {r['paper']} |")
    return "\n".join(lines)


WIDE = 120  # from this console width on, the description has a column of its own


def table(width: int) -> Table:
    """The terminal table: parameters one per line, never cut; below WIDE columns each
    description goes under its compressor's name instead of into a column of its own."""
    wide = width >= WIDE
    t = Table(title=f"kfsim compressors (ratio on a {SHAPE[0]}×{SHAPE[1]} fp32 tensor)", box=box.SIMPLE_HEAD,
              pad_edge=False)
    entries = rows()
    longest = max((len(r["name"]) for r in entries), default=12)
    t.add_column("name" if wide else "name / description", no_wrap=wide, ratio=None if wide else 1,
                 min_width=max(12, longest))     # a name is never cut
    t.add_column("parameters", no_wrap=True)
    t.add_column("ratio", justify="right", no_wrap=True)
    t.add_column("law", no_wrap=True)
    t.add_column("contract", no_wrap=True)
    if wide:
        t.add_column("description", ratio=1)
    for r in entries:
        params = "\n".join(r["param_list"]) or "-"
        cells = [r["name"], params, "" if r["combinator"] else f"{r['ratio']:.1f}×",
                 r.get("law", "as inner").replace(" + ", " +\n"), r.get("contract", "as inner")]
        if wide:
            cells.append(r["doc"])
        else:
            cells[0] = Text.assemble((r["name"], "bold"), "\n", (r["doc"], "dim"))
        t.add_row(*cells, end_section=True)
    return t


@app.command("compressors")
def list_compressors(
    as_markdown: bool = typer.Option(False, "--markdown/--no-markdown", help="print the README's Markdown table "
                                                                           "instead"),
    imports: List[str] = options.import_option(),
    config: Optional[Path] = options.config_option(),
) -> None:
    """List every compressor and combinator: parameters and their defaults, ratio, aggregation law, contract."""
    if as_markdown:
        print(markdown())
        return
    console = Console()
    console.print(table(console.width))
