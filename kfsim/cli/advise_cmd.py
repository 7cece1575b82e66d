"""``kfsim advise``: where does a compressor pay off? Speedup over bandwidth × workers."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import numpy as np
import typer
from rich.table import Table

import compressors
from kfsim.cli import app, check_out_dir, fail, options
from kfsim.cli.scale_cmd import check_plan_exchange, csv_ints, resolve, wide_console
from kfsim.sim import report
from kfsim.sim.inputs import exchanged
from kfsim.sim.predict import predict_iteration
from kfsim.testbed.margin import describe, validated

DEFAULT_BANDWIDTHS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 25, 50, 100, 200, 400)
DEFAULT_WORKERS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def advise_grid(model, cluster, spec: str, bandwidths_gbps, workers, *, baseline: str = "none()", **kw):
    """(speedup, t_compressed, t_baseline, regime), each (len(bandwidths), len(workers)); regime:
    the dominant term of the compressed iteration (:func:`kfsim.testbed.margin.regime`)."""
    from kfsim.testbed.margin import regime
    tc = np.zeros((len(bandwidths_gbps), len(workers)))
    tb = np.zeros_like(tc)
    rg = np.empty(tc.shape, dtype=object)
    for i, bw in enumerate(bandwidths_gbps):
        if not bw > 0:
            raise ValueError(f"bandwidth must be > 0, got {bw}")
        cl = cluster._replace(inter=cluster.inter._replace(bandwidth=bw * 1e9 / 8))
        for j, w in enumerate(workers):
            b = predict_iteration(model, cl, spec, w, **kw)
            tc[i, j], rg[i, j] = b.total_s, regime(b)
            tb[i, j] = predict_iteration(model, cl, baseline, w, **kw).total_s
    return tb / tc, tc, tb, rg


@app.command("advise")
def advise_command(
    model: str = typer.Option("bert-large", help="catalog model"),
    compressor: str = typer.Option("ef(topk(ratio=0.01))", "--compressor", "-c", help="compressor spec"),
    plan_file: Optional[Path] = typer.Option(None, "--plan", help="per-tensor plan file (`kfsim plan`) instead of "
                                             "--compressor, on its model"),
    baseline: str = typer.Option("none()", help="what the compressor is compared with"),
    imports: List[str] = options.import_option(),
    latency_us: Optional[float] = typer.Option(None, "--latency", parser=options.microseconds, metavar=options.TIME,
                                               help="inter-node latency per message, e.g. 50us "
                                                    "(default: the cluster's link)"),
    bandwidths: Optional[List[float]] = typer.Option(None, "--bandwidth", "-b", parser=options.gbit_list,
                                                     callback=options.flatten, metavar=options.RATES,
                                                     help="inter-node bandwidths, e.g. 1Gbit/s,10Gbit/s "
                                                          "(repeatable; default 100Mbit/s ... 400Gbit/s)"),
    workers: Optional[str] = typer.Option(None, help="worker counts, comma-separated"),
    config: Optional[Path] = options.config_option("TOML/YAML config (its \\[advise] section: these options; "
                                                   "\\[scale]'s model, workers, ... too) or cluster profile"),
    device: Optional[str] = typer.Option(None, help="accelerator from the catalog"),
    gpus_per_node: Optional[int] = typer.Option(None, help="devices per node"),
    collective: Optional[str] = typer.Option(None, help="ring | tree | rhd | hierarchical | ps | mccl"),
    compute: Optional[str] = typer.Option(None, help="measured forward+backward time of --model, unit explicit: "
                                          "81ms@8 (one iteration at batch 8) or 10ms/sample"),
    bucket_mb: Optional[float] = typer.Option(None, help="DDP bucket cap in MiB (2^20 B)"),
    exchange: Optional[str] = typer.Option(None, help="buckets (DDP: gradient buckets as backward makes them "
                                           "ready) or flat (one buffer of all parameters after backward, "
                                           "as DeepSpeed's fp16 optimizer)"),
    batch: Optional[int] = typer.Option(None, "--batch-per-worker", help="batch per worker"),
    out: Path = typer.Option(Path("results/advise"), help="output folder (CSV, JSON, heat map as PNG and SVG)"),
    plot: bool = typer.Option(True, help="write the heat map (PNG and SVG)"),
) -> None:
    """Map over bandwidth × workers of the compressor's speedup over uncompressed training."""
    console = wide_console()
    try:
        if plan_file is not None:
            from kfsim.plans.file import for_simulator
            if compressor != "ef(topk(ratio=0.01))":
                raise ValueError("give either --compressor or --plan, not both")
            model, compressor, bucket_mb = for_simulator(plan_file, None if model == "bert-large" else model,
                                                         bucket_mb)
        bws = list(bandwidths or DEFAULT_BANDWIDTHS)
        ws = csv_ints(workers) or list(DEFAULT_WORKERS)
        scale, cluster = resolve(config, model=model, workers=ws, compressors=[compressor], bucket_mb=bucket_mb,
                                 exchange=exchange,
                                 batch_per_worker=batch, device=device,
                                 gpus_per_node=gpus_per_node, collective=collective, compute=compute)
        check_plan_exchange(plan_file, scale.exchange)
        label = compressors.parse(compressor).spec
        compressors.parse(baseline)
        if latency_us is not None:
            if not latency_us >= 0:
                raise ValueError(f"--latency must be >= 0, got {latency_us:g} us")
            cluster = cluster._replace(inter=cluster.inter._replace(latency=latency_us * 1e-6))
        check_out_dir(out)
        margins = validated()
        speed, tc, tb, rg = advise_grid(exchanged(scale.model, scale.exchange), cluster, compressor, bws, ws,
                                        baseline=baseline,
                                    bucket_mb=scale.bucket_mb,
                                    batch_per_worker=scale.batch_per_worker, overlap=scale.overlap)
    except ValueError as exc:
        raise fail(exc) from None
    mg = np.vectorize(lambda x, r: margins[r].margin(x))(speed, rg)
    t = Table(title=f"{compressor} on {scale.model} ({cluster.device.name}, {cluster.gpus_per_node}/node): "
                    f"speedup over {baseline} (green: pays beyond the validated error; red: slower "
                    f"beyond it; plain: within it)")
    t.add_column("Gbit/s \\ workers", justify="right")
    for w in ws:
        t.add_column(str(w), justify="right")
    for i, bw in enumerate(bws):
        cells = [f"[green]{x:.2g}[/green]" if m > 0 else
                 (f"[red]{x:.2g}[/red]" if x * (1 + margins[r].error) < 1 else f"{x:.2g}")
                 for x, m, r in zip(speed[i], mg[i], rg[i])]
        t.add_row(f"{bw:g}", *cells)
    console.print(t)
    rows = [{"bandwidth_gbps": bw, "workers": w, "compressor": label, "t_compressed_s": tc[i, j],
             "t_uncompressed_s": tb[i, j], "speedup": speed[i, j], "regime": rg[i, j],
             "validated_error": margins[rg[i, j]].error, "margin": mg[i, j], "pays": bool(mg[i, j] > 0)}
            for i, bw in enumerate(bws) for j, w in enumerate(ws)]
    pays = [r for r in rows if r["pays"]]
    if pays:
        best = max(pays, key=lambda r: r["margin"])
        top = max(r["bandwidth_gbps"] for r in pays)
        console.print(f"pays in {len(pays)}/{len(rows)} settings beyond the validated error; best "
                      f"{best['speedup']:.3g}× at {best['bandwidth_gbps']:g} Gbit/s, {best['workers']} workers "
                      f"(margin {best['margin']:+.0%} over {describe(margins[best['regime']])}); "
                      f"pays up to {top:g} Gbit/s")
    else:
        close = max(rows, key=lambda r: r["margin"])
        console.print(f"compression never pays beyond the validated error on this grid (closest: "
                      f"{close['speedup']:.3g}× at {close['bandwidth_gbps']:g} Gbit/s, {close['workers']} workers, "
                      f"margin {close['margin']:+.0%} over {describe(margins[close['regime']])})")
    main = max(set(rg.flat), key=list(rg.flat).count)
    console.print(f"main uncertainty: {main} ({sum(r == main for r in rg.flat)}/{rg.size} settings are "
                  f"{main}-bound); validated errors of predicted speedups: " +
                  ", ".join(f"{k} {describe(v)}" for k, v in margins.items()))
    from kfsim.catalog import config as cfgmod
    files = [report.write_csv(out / "advise.csv", rows),
             report.write_json(out / "advise.json", {"command": "kfsim advise", "model": scale.model,
                                                     "compressor": label, "baseline": baseline, "cluster": cfgmod.cluster_dict(cluster)},
                               rows)]
    if plot:
        files.append(report.plot_heatmap(out / "advise.png", speed, bws, ws,
                                         f"{compressor} vs {baseline} — {scale.model}, {cluster.device.name}"))
    console.print("wrote " + ", ".join(str(f) for f in files))
