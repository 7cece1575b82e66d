"""``kfsim testbed`` / ``kfsim calibrate`` / ``kfsim validate``: the emulated cluster (root only)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from kfsim.cli import app, check_out_dir, check_out_file, fail, options
from kfsim.cli.progress import Reporter, json_option, out_option, quiet_option
from kfsim.sim.report import write_text


def _need_root() -> None:
    from kfsim.testbed.netns import available
    ok, why = available()
    if not ok:
        typer.echo(f"error: {why}", err=True)
        raise typer.Exit(2)


def _specs(specs, allow_native: bool = False) -> list[str]:
    """The non-empty ``--compressor`` specs, each parsed now (after ``--import``), before any root check."""
    import compressors
    out = [x.strip() for x in specs if x.strip()]
    for x in out:
        if allow_native and x == "native":
            continue
        try:
            compressors.parse(x)
        except ValueError as exc:
            raise typer.BadParameter(f"--compressor: {exc}") from None
    return out


def _ints(text: str, what: str, lo: int = 1) -> list[int]:
    try:
        v = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"{what}: comma-separated integers expected, got {text!r}") from None
    if not v or any(x < lo for x in v):
        raise typer.BadParameter(f"{what}: every value must be >= {lo}, got {text!r}")
    return v


@app.command("testbed")
def testbed(workers: int = typer.Option(2, help="namespaces = MindSpore workers"),
            rate: float = typer.Option("200Mbit/s", "--bandwidth", parser=options.mbit, metavar=options.RATE,
                                       help="link rate per direction, e.g. 200Mbit/s"),
            latency: float = typer.Option("0ms", parser=options.milliseconds, metavar=options.TIME,
                                          help="one-way latency added, e.g. 2ms"),
            loss: float = typer.Option(0.0, help="packet loss, %"),
            layers: str = typer.Option("784,1024,1024,10", help="MLP layer sizes"),
            batch: int = typer.Option(64, "--batch-per-worker", help="batch per worker"),
            steps: int = typer.Option(3, help="timed steps"),
            out: Path = out_option("testbed", "testbed.json, worker logs in logs/"),
            logs: Optional[Path] = typer.Option(None, help="log directory (default <out>/logs)"),
            timeout: float = typer.Option("280s", parser=options.seconds, metavar=options.TIME,
                                          help="job timeout (a bare number: seconds)"),
            config: Optional[Path] = options.config_option(),
            quiet: bool = quiet_option(), as_json: bool = json_option()) -> None:
    """Run native data-parallel MindSpore steps, one worker per network namespace, on shaped links."""
    from kfsim.testbed.netns import MAX_WORKERS
    if not 2 <= workers <= MAX_WORKERS:
        raise fail(f"--workers must be in 2..{MAX_WORKERS}, got {workers}")
    for flag, v in (("--batch-per-worker", batch), ("--steps", steps)):
        if v < 1:
            raise fail(f"{flag} must be >= 1, got {v}")
    if not timeout > 0:
        raise fail(f"--timeout must be > 0 s, got {timeout:g}")
    from kfsim.testbed.netns import Shape, Testbed
    from kfsim.testbed.training import parse_layers, run_native
    try:
        shape = Shape(rate, latency, loss)
        ls = parse_layers(layers)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    try:
        check_out_dir(out)
    except ValueError as exc:
        raise fail(exc) from None
    logs = (out / "logs" if logs is None else logs).resolve()  # absolute: the workers run in their own folders
    _need_root()
    with Reporter("testbed", quiet=quiet, as_json=as_json) as rep:
        rep.items("testbed").status(f"{workers} workers, {steps} steps on {rate:g} Mbit/s links (logs: {logs})")
        with Testbed(workers, shape) as tb:
            run = run_native(tb, workers, ls, batch, steps=steps, log_root=logs, timeout_s=timeout)
    if rep.human:
        typer.echo(f"workers {workers}  link {rate:g} Mbit/s  latency {latency:g} ms  loss {loss:g} %  "
                   f"model {len(ls) - 1}-layer MLP ({sum(a * b + b for a, b in zip(ls[:-1], ls[1:])):,} params)")
        typer.echo(f"time per step        {run.step_s * 1e3:10.1f} ms")
        typer.echo(f"  compute part       {run.compute_s * 1e3:10.1f} ms")
        typer.echo(f"  communication part {run.comm_s * 1e3:10.1f} ms")
        typer.echo(f"bytes sent / worker / step {run.tx_per_step:,.0f}")
        typer.echo(f"loss (last step, mean over workers) {run.loss:.4f}")
    import json
    summary = {"workers": workers, "rate_mbit": rate, "latency_ms": latency, "loss_percent": loss, "layers": ls,
               "step_s": run.step_s, "compute_s": run.compute_s, "comm_s": run.comm_s,
               "tx_per_step": run.tx_per_step, "loss": run.loss, "logs": str(logs)}
    path = write_text(out / "testbed.json", json.dumps(summary, indent=1))
    rep.finish(out, [path, logs], summary=summary)


@app.command("calibrate")
def calibrate(name: str = typer.Option("testbed", help="profile name"),
              rates: List[float] = typer.Option(["50Mbit/s", "200Mbit/s", "1Gbit/s"], "--bandwidth", "-b",
                                                parser=options.mbit_list, callback=options.flatten,
                                                metavar=options.RATES,
                                                help="link rates to measure collectives at ('' for none)"),
              workers: str = typer.Option("2,4", help="worker counts"),
              sizes: str = typer.Option("16384,262144,1048576,4194304", help="collective sizes, bytes per rank"),
              layers: str = typer.Option("784,1024,1024,10", help="MLP(s) whose compute to measure; ';' separates, '' none"),
              batch: int = typer.Option(64, "--batch-per-worker", help="batch per worker"),
              repeats: int = typer.Option(3, help="timed calls per size"),
              specs: List[str] = typer.Option([], "--compressor", "-c",
                                              help="compressor whose codec cost to measure (repeatable, e.g. "
                                                   "-c 'ef(topk(ratio=0.01))' -c 'quantize(bits=8)')"),
              imports: List[str] = options.import_option(),
              hidden: int = typer.Option(1400, help="hidden width of kfsim.launch's wide MLP (codec/compute runs)"),
              global_batch: int = typer.Option(64, help="global batch of the wide-MLP runs"),
              out: Path = out_option("calibrate", "profiles, <name>-measurements.json, logs in logs/"),
              logs: Optional[Path] = typer.Option(None, help="log directory (default <out>/logs)"),
              config: Optional[Path] = options.config_option(),
              quiet: bool = quiet_option(), as_json: bool = json_option()) -> None:
    """Micro-benchmark the testbed, fit α, β, γ of the mccl echo ring and compute, write cluster profiles."""
    from kfsim.testbed import calibrate as cal
    from kfsim.testbed.training import parse_layers
    rs = list(rates)
    ws, ss = _ints(workers, "--workers", 2), _ints(sizes, "--sizes", 4)
    sp = _specs(specs)
    try:
        lls = [parse_layers(x) for x in layers.split(";") if x.strip()]
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    try:
        check_out_dir(out)
    except ValueError as exc:
        raise fail(exc) from None
    logs = (out / "logs" if logs is None else logs).resolve()  # absolute: the workers run in their own folders
    _need_root()
    with Reporter("calibrate", quiet=quiet, as_json=as_json) as rep:
        cells = rep.items("calibrate")
        coll, comp, models, steps = cal.measure(rs, ws, ss, lls, batch, repeats, logs, log=cells.advance,
                                                specs=sp, hidden=hidden, global_batch=global_batch,
                                                imports=imports)
    echo = typer.echo if rep.human else (lambda *a, **k: None)
    mpath = cal.measurements_path(name, out)
    data = cal.merge(cal.load_measurements(mpath), coll, comp, models, steps)
    import json
    write_text(mpath, json.dumps(data, indent=1))
    if rep.human:
        _print_onwire(coll)
    fitted = cal.fits(data)
    echo(f"\n{'rate':>7} {'p':>4} {'α µs':>9} {'β ns/B':>9} {'γ ns/B':>8} {'eff':>6} {'med|err|':>9} {'max|err|':>9}")
    for r in cal.fit_table(fitted):
        echo(f"{r[0]:7g} {r[1]!s:>4} {r[2]:9.0f} {r[3]:9.2f} {r[4]:8.2f} {r[5]:6.3f} {r[6]:9.1%} {r[7]:9.1%}")
    for c in data["compute"]:
        echo(f"compute {c['model']} p={c['p']} batch {c['batch']}: {c['seconds'] * 1e3:.1f} ms/step")
    for c in data["steps"]:
        echo(f"independent step {c['spec']:>24} {c['model']} p={c['p']} (batch {c['global_batch'] // c['p']}"
             f" per worker): {c['seconds'] * 1e3:.1f} ms")
    if not data["collectives"]:
        rep.finish(out, [mpath], summary={"measurements": str(mpath), "profiles": []},
                   message=f"measurements: {mpath} (no collective cells yet: no profile written)")
        return
    paths = cal.write_profiles(name, data, out)
    files = [path for _, path in sorted(paths.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0))]
    rep.finish(out, [mpath, *files], summary={"measurements": str(mpath), "profiles": [str(f) for f in files]},
               message="\n".join([f"\nmeasurements: {mpath}", *(f"profile: {f}" for f in files)]))


def _print_onwire(coll) -> None:
    from kfsim.testbed.fit import echo_factor
    typer.echo(f"\n{'op':>9} {'rate':>6} {'p':>3} {'bytes':>9} {'time s':>8} {'sent/rank':>11} {'÷textbook':>9}")
    for m in coll:
        typer.echo(f"{m.op:>9} {m.rate_mbit:6g} {m.p:3d} {m.nbytes:9d} {m.seconds:8.4f} {m.tx_per_rank:11.0f} "
                   f"{echo_factor(m.tx_per_rank, m.op, m.p, m.nbytes):9.2f}")


@app.command("validate")
def validate(name: str = typer.Option("testbed", help="profile name (from kfsim calibrate)"),
             profiles: Path = typer.Option(Path("profiles"), help="profile directory"),
             rates: List[float] = typer.Option(["50Mbit/s", "200Mbit/s", "1Gbit/s"], "--bandwidth", "-b",
                                               parser=options.mbit_list, callback=options.flatten,
                                               metavar=options.RATES, help="link rates, e.g. 50Mbit/s,1Gbit/s"),
             workers: str = typer.Option("2,4", help="worker counts"),
             what: str = typer.Option("collectives,native", help="collectives, native (own MLP), compressed "
                                      "(kfsim.launch's worker, --compressor)"),
             specs: List[str] = typer.Option(["native", "ef(topk(ratio=0.01))", "quantize(bits=8)",
                                              "powersgd(rank=4)"], "--compressor", "-c",
                                             help="'compressed' cases: a spec (repeatable), 'native' = "
                                                  "MindSpore's all-reduce (the speedup baseline)"),
             imports: List[str] = options.import_option(),
             hidden: int = typer.Option(1400, help="hidden width of the wide MLP"),
             global_batch: int = typer.Option(64, help="global batch of the wide-MLP runs"),
             sizes: str = typer.Option("524288,2097152", help="held-out collective sizes, bytes"),
             layers: str = typer.Option("784,1024,1024,10", help="MLP for the training cases"),
             batch: int = typer.Option(64, "--batch-per-worker", help="batch per worker"),
             steps: int = typer.Option(3, help="timed training steps"),
             out: Path = out_option("validate", "validate.png, validate.json (the cases), logs in logs/"),
             png: Optional[Path] = typer.Option(None, help="plot of predicted vs measured (default "
                                                "<out>/validate.png; the cases go next to it as .json)"),
             logs: Optional[Path] = typer.Option(None, help="log directory (default <out>/logs)"),
             merge: str = typer.Option("", help="no measuring: report the cases of earlier runs "
                                       "(comma-separated .json files written next to their PNG)"),
             repredict: bool = typer.Option(False, help="with --merge: recompute the predictions from the "
                                            "current profiles"),
             published: bool = typer.Option(False, "--published", help="no testbed: predict the published "
                                            "measurements of kfsim/data/published.toml, write <out>/published.json"),
             holdout: bool = typer.Option(False, "--holdout", help="no testbed: fit α, e, γ on the "
                                          "--calibrate-on cells of the stored measurements, predict the others"),
             calibrate_on: str = typer.Option("", "--calibrate-on", metavar="p=P,..,rates=R,..",
                                              help="calibration subset, e.g. 'p=2,rates=50,1000' (implies "
                                                   "--holdout; default with --holdout: p=2,rates=50,1000)"),
             cases_file: Optional[Path] = typer.Option(None, "--cases", help="--holdout: measured steps "
                                                       "(default <profiles>/validate/validate.json; 'none': collectives only)"),
             local_costs: str = typer.Option("calibration", help="--holdout: step compute/codec from the "
                                             "no-network jobs at the calibration p, or 'each-p'"),
             host_share: bool = typer.Option(True, "--host-share/--no-host-share", help="--holdout: where the "
                                             "measurements name the host's cores, p ranks on them pay "
                                             "max(1, p/cores) for each message and (from the calibration p) "
                                             "for compute and codec"),
             config: Optional[Path] = options.config_option(),
             quiet: bool = quiet_option(), as_json: bool = json_option()) -> None:
    """Predict held-out collectives and training steps with the simulator, measure them, compare."""
    if published:
        from kfsim.cli.published_cmd import report_published
        report_published(out, Reporter("validate", quiet=quiet, as_json=as_json))
        return
    if holdout or calibrate_on:
        from kfsim.cli.holdout_cmd import report_holdout
        from kfsim.testbed.holdout import DEFAULT_SUBSET
        report_holdout(calibrate_on or DEFAULT_SUBSET, profiles / f"{name}-measurements.json",
                       profiles / "validate" / "validate.json" if cases_file is None else cases_file,
                       local_costs, out, Reporter("validate", quiet=quiet, as_json=as_json), global_batch,
                       host_share)
        return
    from kfsim.testbed import validate as val
    png = out / "validate.png" if png is None else png
    logs = (out / "logs" if logs is None else logs).resolve()  # absolute: the workers run in their own folders
    rep = Reporter("validate", quiet=quiet, as_json=as_json)
    if merge.strip():
        import json
        cases = []
        for f in merge.split(","):
            path = Path(f.strip())
            if not path.is_file():
                raise fail(f"--merge: {path} does not exist or is not a file")
            try:
                cases += [val.Case(**{k: v for k, v in c.items() if k in val.Case._fields})
                          for c in json.loads(path.read_text())]
            except (ValueError, TypeError, AttributeError) as exc:
                raise fail(f"--merge: {path}: not a validate cases file ({exc})") from None
        if repredict:
            cases = val.repredict(cases, profiles, name, hidden, global_batch)
        try:
            check_out_file(png, "--png")
        except ValueError as exc:
            raise fail(exc) from None
        _report(cases, png, rep)
        return
    from kfsim.testbed.training import parse_layers
    rs, ws = list(rates), _ints(workers, "--workers", 2)
    if not rs:
        raise typer.BadParameter("--bandwidth: at least one link rate")
    kinds = {k.strip() for k in what.split(",") if k.strip()}
    if not kinds or kinds - {"collectives", "native", "compressed"}:
        raise typer.BadParameter(f"--what: choose from collectives, native, compressed; got {what!r}")
    sp = _specs(specs, allow_native=True) if "compressed" in kinds else []
    try:
        check_out_file(png, "--png")
    except ValueError as exc:
        raise fail(exc) from None
    _need_root()
    try:
        for r in rs:
            for p in ws:
                val.profile_for(profiles, name, r, p)
        ls = parse_layers(layers)
    except ValueError as exc:
        raise fail(exc) from None
    cases = []
    with rep:
        log = rep.items("validate").advance
        if "collectives" in kinds:
            cases += val.validate_collectives(profiles, name, rs, ws, _ints(sizes, "--sizes", 4), log_root=logs,
                                              log=log)
        if "native" in kinds:
            cases += val.validate_native(profiles, name, rs, ws, ls, batch, steps, log_root=logs, log=log)
        if "compressed" in kinds:
            cases += val.validate_compressed(profiles, name, rs, ws, sp, hidden, global_batch, steps + 2,
                                             log_root=logs, log=log, imports=imports)
    _report(cases, png, rep)


def _report(cases, png: Path, rep: Reporter) -> None:
    from kfsim.testbed import validate as val
    if not cases:
        raise fail("no cases")
    echo = typer.echo if rep.human else (lambda *a, **k: None)
    echo(f"\n{'kind':>22} {'case':>14} {'Mbit/s':>7} {'p':>3} {'predicted s':>12} {'measured s':>11} {'rel err':>8}")
    for c in cases:
        echo(f"{c.kind:>22} {c.detail:>14} {c.rate_mbit:7g} {c.p:3d} {c.predicted_s:12.4f} "
             f"{c.measured_s:11.4f} {c.rel_error:+8.1%}")
    med, worst = val.summary(cases)
    echo(f"\nmedian |error| {med:.1%}   worst {worst:.1%}   (goal: median <= 5 %, worst <= 15 %)")
    for rate, p, kind, s in val.speedups(cases):
        echo(f"speedup of {kind} over native all-reduce at {rate:g} Mbit/s, p={p}: {s:.2f}x")
    plot = val.plot(cases, png)
    cpath = png.with_suffix(".json")
    import json
    write_text(cpath, json.dumps([c._asdict() | {"rel_error": c.rel_error} for c in cases], indent=1))
    rep.finish(png.parent, [plot, cpath], message=f"plot: {plot}\ncases: {cpath}",
               summary={"median_abs_error": med, "worst_abs_error": worst, "cases": [c._asdict() for c in cases]})
