"""``kfsim advise``: where does a compressor pay off? Speedup over bandwidth × workers."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.table import Table

import compressors
from kfsim.cli import app, check_out_dir, fail
from kfsim.cli.scale_cmd import csv_floats, csv_ints, resolve, wide_console
from kfsim.sim import report
from kfsim.sim.predict import predict_iteration

DEFAULT_BANDWIDTHS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 25, 50, 100, 200, 400)
DEFAULT_WORKERS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def advise_grid(model, cluster, spec: str, bandwidths_gbps, workers, *, baseline: str = "none()", **kw):
    """(speedup, t_compressed, t_baseline), each (len(bandwidths), len(workers))."""
    tc = np.zeros((len(bandwidths_gbps), len(workers)))
    tb = np.zeros_like(tc)
    for i, bw in enumerate(bandwidths_gbps):
        if not bw > 0:
            raise ValueError(f"bandwidth must be > 0, got {bw}")
        cl = cluster._replace(inter=cluster.inter._replace(bandwidth=bw * 1e9 / 8))
        for j, w in enumerate(workers):
            tc[i, j] = predict_iteration(model, cl, spec, w, **kw).total_s
            tb[i, j] = predict_iteration(model, cl, baseline, w, **kw).total_s
    return tb / tc, tc, tb


@app.command("advise")
def advise_command(
    model: str = typer.Option("bert-large", help="catalog model"),
    compressor: str = typer.Option("ef(topk(ratio=0.01))", "--compressor", "-c", help="compressor spec"),
    baseline: str = typer.Option("none()", help="what the compressor is compared with"),
    latency_us: Optional[float] = typer.Option(None, help="inter-node latency per message in µs "
                                                          "(default: the cluster's link, e.g. 50 µs TCP)"),
    bandwidths: Optional[str] = typer.Option(None, help="inter-node Gbit/s, comma-separated"),
    workers: Optional[str] = typer.Option(None, help="worker counts, comma-separated"),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML/YAML config or cluster profile"),
    device: Optional[str] = typer.Option(None, help="accelerator from the catalog"),
    gpus_per_node: Optional[int] = typer.Option(None, help="devices per node"),
    collective: Optional[str] = typer.Option(None, help="ring | tree | rhd | hierarchical | ps | mccl"),
    bucket_mb: Optional[float] = typer.Option(None, help="DDP bucket cap in MiB (2^20 B)"),
    batch: Optional[int] = typer.Option(None, help="batch per worker"),
    out: Path = typer.Option(Path("results/advise"), help="output folder (CSV, JSON, PNG heat map)"),
    plot: bool = typer.Option(True, help="write the PNG heat map"),
) -> None:
    """Map over bandwidth × workers of the compressor's speedup over uncompressed training."""
    console = wide_console()
    try:
        bws = csv_floats(bandwidths, "--bandwidths") or list(DEFAULT_BANDWIDTHS)
        ws = csv_ints(workers) or list(DEFAULT_WORKERS)
        scale, cluster = resolve(config, model=model, workers=ws, compressors=[compressor], bucket_mb=bucket_mb,
                                 batch_per_worker=batch, bandwidths_gbps=bws, device=device,
                                 gpus_per_node=gpus_per_node, collective=collective)
        label = compressors.parse(compressor).spec
        compressors.parse(baseline)
        if latency_us is not None:
            if not latency_us >= 0:
                raise ValueError(f"--latency-us must be >= 0, got {latency_us}")
            cluster = cluster._replace(inter=cluster.inter._replace(latency=latency_us * 1e-6))
        check_out_dir(out)
        speed, tc, tb = advise_grid(scale.model, cluster, compressor, bws, ws, baseline=baseline,
                                    bucket_mb=scale.bucket_mb,
                                    batch_per_worker=scale.batch_per_worker, overlap=scale.overlap)
    except ValueError as exc:
        raise fail(exc) from None
    t = Table(title=f"{compressor} on {scale.model} ({cluster.device.name}, {cluster.gpus_per_node}/node): "
                    f"speedup over {baseline} (green: compression pays)")
    t.add_column("Gbit/s \\ workers", justify="right")
    for w in ws:
        t.add_column(str(w), justify="right")
    for i, bw in enumerate(bws):
        cells = [f"[green]{x:.2g}[/green]" if x > 1.05 else (f"[red]{x:.2g}[/red]" if x < 0.95 else f"{x:.2g}")
                 for x in speed[i]]
        t.add_row(f"{bw:g}", *cells)
    console.print(t)
    rows = [{"bandwidth_gbps": bw, "workers": w, "compressor": label, "t_compressed_s": tc[i, j],
             "t_uncompressed_s": tb[i, j], "speedup": speed[i, j]}
            for i, bw in enumerate(bws) for j, w in enumerate(ws)]
    pays = [r for r in rows if r["speedup"] > 1.0]
    if pays:
        best = max(rows, key=lambda r: r["speedup"])
        top = max(r["bandwidth_gbps"] for r in pays)
        console.print(f"pays in {len(pays)}/{len(rows)} settings; best {best['speedup']:.3g}× at "
                      f"{best['bandwidth_gbps']:g} Gbit/s, {best['workers']} workers; pays up to {top:g} Gbit/s")
    else:
        console.print("compression never pays on this grid")
    from kfsim.catalog import config as cfgmod
    files = [report.write_csv(out / "advise.csv", rows),
             report.write_json(out / "advise.json", {"command": "kfsim advise", "model": scale.model,
                                                     "compressor": label, "baseline": baseline, "cluster": cfgmod.cluster_dict(cluster)},
                               rows)]
    if plot:
        files.append(report.plot_heatmap(out / "advise.png", speed, bws, ws,
                                         f"{compressor} vs {baseline} — {scale.model}, {cluster.device.name}"))
    console.print("wrote " + ", ".join(str(f) for f in files))
