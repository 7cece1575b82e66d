"""``kfsim compressors``: list the compressor registry."""
from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

import compressors
from kfsim.cli import app


@app.command("compressors")
def list_compressors() -> None:
    """List every compressor and combinator with its parameters and a one-line doc."""
    table = Table(title="kfsim compressors (spec strings)")
    for col in ("name", "parameters", "description"):
        table.add_column(col)
    for e in compressors.entries():
        params = ", ".join(compressors.registry._fmt_param(p) for p in e.params)
        table.add_row(e.name, params, e.doc)
    Console().print(table)
