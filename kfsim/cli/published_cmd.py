"""``kfsim validate --published``: the simulator against published measurements (no testbed, no root)."""
from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kfsim.cli import check_out_dir, fail
from kfsim.cli.progress import Reporter, clean
from kfsim.sim.report import write_text

MEDIAN_GOAL = 0.20   # issue 13 item 7: median |error| <= 20 %, every compressed row on the right side of 1x


def report_published(out: Path, rep: Reporter) -> None:
    from kfsim.sim import published as pub
    try:
        check_out_dir(out)
        tables = pub.load()
        with rep:
            rep.items("validate").status(f"predicting {sum(len(t.rows) for t in tables)} published rows")
            results = pub.predict_all(tables)
        s = pub.summarise(results)
    except ValueError as exc:
        raise fail(exc) from None
    if rep.human:
        _print(tables, results, s)
    doc = {"source": str(pub.data_path()), "goal": {"median_abs_error": MEDIAN_GOAL, "right_side": "every compressed row"},
           "summary": s._asdict(),
           "tables": [t._asdict() | {"rows": [r._asdict() for r in t.rows]} for t in tables],
           "results": [r._asdict() | {"rel_error": r.rel_error, "right_side": r.right_side} for r in results]}
    path = write_text(Path(out) / "published.json", json.dumps(clean(doc), indent=1))
    rep.finish(out, [path], summary={"median_abs_error": s.median_abs_error, "worst_abs_error": s.worst_abs_error,
                                     "right_side": s.right_side, "compressed_rows": s.compressed_rows},
               message=f"wrote {path}")


def _print(tables, results, s) -> None:
    con = Console(width=150)
    t = Table(title="kfsim validate --published: predicted vs published (no fitted parameter; all tables held out)",
              title_justify="left")
    for c in ("table", "model", "p", "batch", "compressor", "metric", "published", "predicted", "error", "1x side"):
        t.add_column(c, justify="left" if c in ("table", "model", "compressor", "metric") else "right")
    for r in results:
        side = "" if r.right_side is None else ("ok" if r.right_side else "[red]wrong[/red]")
        t.add_row(r.table, r.model, str(r.workers), str(r.batch), r.compressor, r.metric, f"{r.published:.3g}",
                  f"{r.predicted:.3g}", f"{r.rel_error:+.1%}", side)
    con.print(t)
    for tab in tables:
        c = tab.citation
        con.print(f"[bold]{tab.id}[/bold]: {c['authors']}, {c['venue']}, {c['year']}; {c['locator']}")
    ok = s.median_abs_error <= MEDIAN_GOAL and s.right_side == s.compressed_rows
    con.print(f"median |error| {s.median_abs_error:.1%}   worst {s.worst_abs_error:.1%}   compressed rows on the "
              f"right side of 1x: {s.right_side}/{s.compressed_rows}   (goal: median <= {MEDIAN_GOAL:.0%}, all): "
              f"{'met' if ok else '[red]missed[/red]'}")
