"""``kfsim compressors``: the compressor registry as a table (terminal or Markdown)."""
from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

import compressors
from compressors.registry import fmt_param
from kfsim.cli import app

SHAPE = (1024, 1024)  # the tensor the ratio column is computed for (fp32)


def rows() -> list[dict]:
    """One row per registered compressor/combinator with its static facts."""
    out = []
    for e in compressors.entries():
        row = {"name": e.name, "params": ", ".join(fmt_param(p) for p in e.params),
               "doc": e.doc, "paper": e.paper, "combinator": e.combinator}
        if not e.combinator:
            c = e.factory()
            plan = c.plan(SHAPE)
            row.update(spec=c.spec, ratio=c.ratio(SHAPE), law=" + ".join(r.law.value for r in plan),
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


@app.command("compressors")
def list_compressors(
    as_markdown: bool = typer.Option(False, "--markdown", help="print the README's Markdown table instead"),
) -> None:
    """List every compressor and combinator: parameters, ratio, aggregation law, contract, paper."""
    if as_markdown:
        print(markdown())
        return
    table = Table(title=f"kfsim compressors (ratio on a {SHAPE[0]}×{SHAPE[1]} fp32 tensor)")
    for col in ("name", "parameters", "ratio", "law", "contract", "description"):
        table.add_column(col)
    for r in rows():
        table.add_row(r["name"], r["params"], "" if r["combinator"] else f"{r['ratio']:.1f}×",
                      r.get("law", "wraps a compressor"), r.get("contract", ""), r["doc"])
    Console().print(table)
