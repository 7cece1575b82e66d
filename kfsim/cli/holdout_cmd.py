"""``kfsim validate --calibrate-on SUBSET``: fit α, e, γ on a subset of the stored testbed cells,
predict every other cell, print and write the in-sample / held-out table (no testbed run, no root)."""
from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kfsim.cli import check_out_dir, fail
from kfsim.cli.progress import Reporter, clean
from kfsim.sim.report import write_text

GOALS = {"held-out median": 0.10, "held-out worst": 0.25, "in-sample median": 0.05}   # issue 13 item 7


def report_holdout(subset_text: str, measurements: Path, cases_path: Path | None, local_costs: str, out: Path,
                   rep: Reporter, global_batch: int = 64, host_share: bool = True) -> None:
    from kfsim.testbed import holdout as ho
    from kfsim.testbed.calibrate import load_measurements
    try:
        subset = ho.parse_subset(subset_text)
        if local_costs not in ho.LOCAL_COSTS:
            raise ValueError(f"--local-costs: choose from {', '.join(ho.LOCAL_COSTS)}, got {local_costs!r}")
        if not measurements.is_file():
            raise ValueError(f"--measurements: {measurements} does not exist (run `kfsim calibrate`)")
        data = load_measurements(measurements)
        if not host_share:   # as if the measurements did not say how many cores their ranks shared
            data = {k: v for k, v in data.items() if k != "host"}
        cases = _load_cases(cases_path)
        cells = ho.calibration_cells(data, subset)
        if not cells:
            have = sorted({(c["rate_mbit"], c["p"]) for c in data["collectives"]})
            raise ValueError(f"--calibrate-on {subset}: no stored collective cell in it "
                             f"(stored (Mbit/s, p): {', '.join(f'({r:g}, {p})' for r, p in have)})")
        for p in sorted({int(c["p"]) for c in cases or () if ho.is_step_case(c)}):
            ho.local_cost_workers(data, subset, p, local_costs)   # before anything is written
        check_out_dir(out)
    except (ValueError, OSError) as exc:
        raise fail(exc) from None
    with rep:
        rep.items("validate").status(f"fitting α, e, γ on {subset} ({len(cells)} collective cells)")
        fit = ho.fit_physical(cells, cores=ho.host_cores(data))
        rows = ho.collective_rows(data, subset, fit)
        profiles = {}
        if cases:
            rates = sorted({float(c["rate_mbit"]) for c in cases})
            workers = sorted({int(c["p"]) for c in cases})
            profiles = ho.holdout_profiles(data, subset, fit, rates, workers, out / "holdout-profiles",
                                           local_costs=local_costs)
            rows += ho.step_rows(cases, subset, profiles, global_batch)
    groups = ho.summarise(rows)
    diag = ho.per_cell_fits(data)
    if rep.human:
        _print(subset, fit, rows, groups, diag, local_costs)
    doc = {"calibrate_on": str(subset), "measurements": str(measurements), "cases": str(cases_path or ""),
           "local_costs": local_costs, "host_cores": fit.cores, "goals": GOALS,
           "fit": {"alpha_us": fit.alpha * 1e6, "efficiency": fit.efficiency, "gamma_ns_per_byte": fit.gamma * 1e9,
                   "beta_ns_per_byte": {f"{r:g}": fit.beta(r) * 1e9 for r in sorted({x.rate_mbit for x in rows})},
                   "cells": fit.cells},
           "per_cell_fits": [{"rate_mbit": r, "p": p, "alpha_us": f.alpha * 1e6, "efficiency": f.efficiency,
                              "gamma_ns_per_byte": f.gamma * 1e9} for r, p, f in diag],
           "groups": [g._asdict() for g in groups],
           "rows": [r._asdict() | {"rel_error": r.rel_error, "group": r.group} for r in rows],
           "profiles": {f"{r:g}mbit-p{p}": str(v) for (r, p), v in profiles.items()}}
    path = write_text(out / "holdout.json", json.dumps(clean(doc), indent=1))
    rep.finish(out, [path], summary={g.group: {"median": g.median_abs_error, "worst": g.worst_abs_error}
                                     for g in groups}, message=f"wrote {path}")


def _load_cases(path: Path | None) -> list[dict]:
    if path is None or str(path) == "none":
        return []
    if not path.is_file():
        raise ValueError(f"--cases: {path} does not exist or is not a file")
    try:
        cases = json.loads(path.read_text())
        if not isinstance(cases, list) or any(not {"kind", "detail", "rate_mbit", "p", "measured_s"} <= set(c)
                                              for c in cases):
            raise ValueError("expected a list of cases with kind, detail, rate_mbit, p, measured_s")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"--cases: {path}: not a validate cases file ({exc})") from None
    return cases


def _print(subset, fit, rows, groups, diag, local_costs) -> None:
    con = Console(width=140)
    t = Table(title=f"kfsim validate --calibrate-on {subset}: fitted on the in-sample cells' collectives only",
              title_justify="left")
    for c in ("case", "detail", "Mbit/s", "p", "predicted s", "measured s", "error", "cell"):
        t.add_column(c, justify="left" if c in ("case", "detail", "cell") else "right")
    for r in rows:
        t.add_row("native step" if r.kind == "none" else r.kind, r.detail, f"{r.rate_mbit:g}", str(r.p),
                  f"{r.predicted_s:.4f}", f"{r.measured_s:.4f}", f"{r.rel_error:+.1%}",
                  "in-sample" if r.in_sample else "held-out")
    con.print(t)
    for g in groups:
        con.print(f"{g.group:>22}: {g.n:3d} cases   median |error| {g.median_abs_error:6.1%}   worst {g.worst_abs_error:6.1%}")
    held = next((g for g in groups if g.group == "all held-out"), None)
    ins = next((g for g in groups if g.group == "all in-sample"), None)
    verdict = [f"held-out median {held.median_abs_error:.1%} (goal <= 10 %), worst {held.worst_abs_error:.1%} "
               f"(goal <= 25 %)" if held else "no held-out cell",
               f"in-sample median {ins.median_abs_error:.1%} (goal <= 5 %)" if ins else "no in-sample cell"]
    con.print("; ".join(verdict))
    share = f" with a core per rank (x max(1, p/{fit.cores}) for p ranks on the host's {fit.cores} cores)" \
        if fit.cores else ""
    con.print(f"shared fit: α = {fit.alpha * 1e6:.1f} µs per message{share}, e = {fit.efficiency:.3f} "
              f"(β = 1/(e·rate): " + ", ".join(f"{r:g} Mbit/s {fit.beta(r) * 1e9:.1f} ns/B"
                                             for r in sorted({x.rate_mbit for x in rows})) +
              f"), γ = {fit.gamma * 1e9:.2f} ns/B reduced" + ("; tbf burst subtracted from the bytes sent" if fit.burst else "")
              + "; step compute/codec from the no-network jobs at "
              + ("the calibration p (slower by max(1, p/cores) / max(1, p_cal/cores) where the "
                 "measurements name the host's cores)" if local_costs == "calibration" else "each p"))
    con.print("diagnostic, the same model fitted to each (rate, p) cell alone: " + "; ".join(
        f"{r:g}/p{p}: α {f.alpha * 1e6:.0f} µs, e {f.efficiency:.2f}, γ {f.gamma * 1e9:.1f} ns/B" for r, p, f in diag))
