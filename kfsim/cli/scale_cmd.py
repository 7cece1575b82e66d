"""``kfsim scale``: iteration time × workers × compressors (the README's first command).

With no arguments it runs the seed's scenario: BERT-large on 4 nodes × 4
RTX 3090 over 1 Gbit/s Ethernet, workers 2…1024, compressors none, fp16,
int8, top-k 1 % + EF, PowerSGD rank 4, sign + EF.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import List, Optional

import numpy as np
import typer
from rich.console import Console
from rich.table import Table
from tqdm import tqdm

import compressors
from kfsim.cli import app, check_out_dir, fail, options
from kfsim.catalog import config as cfgmod
from kfsim.catalog import get_device, get_link, seed_cluster
from kfsim.sim import report
from kfsim.sim.inputs import exchanged
from kfsim.sim.predict import predict_iteration, single_worker_time

MIB = 2.0**20  # one unit for bytes in every CLI header and column: MiB

# Slot → candidate specs, first one registered wins (names changed while the library grew).
DEFAULT_SLOTS = (
    ("none()",),
    ("fp16()",),
    ("quantize(bits=8)", "int8()"),
    ("ef(topk(ratio=0.01))",),
    ("powersgd(rank=4)",),
    ("efsignsgd()", "ef(scaledsign())", "ef(efsign())", "ef(signsgd())"),
)


def wide_console() -> Console:
    """A console at least 120 columns wide (tables stay readable when piped)."""
    return Console(width=max(Console().width, 120))


def default_compressors() -> list[str]:
    out = []
    for slot in DEFAULT_SLOTS:
        for spec in slot:
            try:
                compressors.parse(spec)
                out.append(spec)
                break
            except ValueError:
                continue
    return out


def resolve(config: Optional[Path], **flags):
    """The config file's cluster (or the seed cluster) with every given flag applied on top.
    Returns (ScaleCfg, Cluster). The file's [scale] settings arrive as flags (kfsim.cli.options)."""
    if config is not None:
        cluster, where = cfgmod.load_cluster(config), str(config)
    else:
        cluster, where = seed_cluster(), "flags"
    sc = cfgmod.ScaleCfg().model_dump()
    for key in ("model", "workers", "compressors", "bucket_mb", "batch_per_worker", "network", "exchange", "seed"):
        if flags.get(key) is not None:
            sc[key] = flags[key]
    if flags.get("no_overlap"):
        sc["overlap"] = False
    try:
        scale = cfgmod.ScaleCfg.model_validate(sc)
    except Exception as exc:  # pydantic ValidationError: name the field
        raise ValueError(cfgmod.format_errors(exc, where, "scale")) from None
    cfgmod.check_scale(scale, where)
    if flags.get("device"):
        cluster = cluster._replace(device=get_device(flags["device"]))
    if flags.get("intra"):
        cluster = cluster._replace(intra=get_link(flags["intra"]))
    if flags.get("inter"):
        cluster = cluster._replace(inter=get_link(flags["inter"]))
    if flags.get("inter_gbps") is not None:
        if not flags["inter_gbps"] > 0:
            raise ValueError(f"--bandwidth must be > 0, got {flags['inter_gbps']:g} Gbit/s")
        cluster = cluster._replace(inter=cluster.inter._replace(bandwidth=flags["inter_gbps"] * 1e9 / 8))
    if flags.get("gpus_per_node") is not None:
        if flags["gpus_per_node"] < 1:
            raise ValueError(f"--gpus-per-node must be >= 1, got {flags['gpus_per_node']}")
        cluster = cluster._replace(gpus_per_node=flags["gpus_per_node"])
    if flags.get("nics_per_node") is not None:
        if flags["nics_per_node"] < 1:
            raise ValueError(f"--nics-per-node must be >= 1, got {flags['nics_per_node']}")
        cluster = cluster._replace(nics_per_node=flags["nics_per_node"])
    if flags.get("collective"):
        from kfsim.sim.algorithms import check_name
        cluster = cluster._replace(collective=check_name(flags["collective"]))
    if flags.get("interference") is not None:
        if flags["interference"] < 1:
            raise ValueError(f"--interference must be >= 1, got {flags['interference']}")
        cluster = cluster._replace(interference=flags["interference"])
    if flags.get("compute"):
        cluster = with_measured_compute(cluster, scale.model, flags["compute"])
    return scale, cluster


def check_plan_exchange(plan_file, exchange: str) -> None:
    """A per-tensor plan names the model's tensors, which a flat exchange does not have."""
    if plan_file is not None and exchange == "flat":
        raise ValueError("--exchange flat sends one buffer of all parameters: a per-tensor plan (--plan) "
                         "needs the model's tensors (use --exchange buckets)")


def measured_note(cluster, model: str) -> str:
    """``, compute measured: 2 ms per sample`` when the model's compute is measured, else ``""``."""
    from kfsim.catalog import get_model
    from kfsim.catalog.measured import describe

    name = get_model(model).name
    for entry_name, t, *batch in cluster.compute_s:
        if entry_name == name:
            return f", compute measured: {describe(t, batch[0] if batch else None)}"
    return ""


def with_measured_compute(cluster, model: str, text: str):
    """The cluster with ``--compute`` (``81ms@8`` or ``10ms/sample``) as the model's measured compute."""
    from kfsim.catalog import get_model
    from kfsim.catalog.measured import parse_compute

    try:
        seconds, batch = parse_compute(text)
    except ValueError as exc:
        raise ValueError(f"--compute: {exc}") from None
    name = get_model(model).name
    rest = tuple(e for e in cluster.compute_s if e[0] != name)
    return cluster._replace(compute_s=rest + ((name, seconds, batch),))


def straggler_idle(p: int, compute_s: float, jitter: float, seed: int, draws: int = 64) -> float:
    """E[max_i T_i] − E[T] for p log-normal compute times of mean compute_s and
    coefficient of variation ``jitter`` (synchronous workers wait for the slowest)."""
    if jitter <= 0 or p < 2:
        return 0.0
    sigma = np.sqrt(np.log1p(jitter**2))
    rng = np.random.default_rng(seed)
    x = rng.lognormal(np.log(compute_s) - sigma**2 / 2, sigma, size=(draws, p))
    return float(x.max(axis=1).mean() - compute_s)


def run_scale(scale, cluster, *, jitter: float = 0.0, progress: bool = True) -> list[dict]:
    """All rows of the sweep (one per compressor × workers)."""
    specs = scale.compressors or default_compressors()
    model = exchanged(scale.model, scale.exchange)
    t1 = single_worker_time(model, cluster, scale.batch_per_worker)
    combos = [(s, w) for s in specs for w in scale.workers]
    rows, base = [], {}
    for spec, w in tqdm(combos, desc="kfsim scale", disable=not progress, leave=False):
        b = predict_iteration(model, cluster, spec, w, batch_per_worker=scale.batch_per_worker,
                              bucket_mb=scale.bucket_mb, overlap=scale.overlap, network=scale.network)
        idle = straggler_idle(w, b.compute_s, jitter, scale.seed + w)
        total = b.total_s + idle
        rows.append({"compressor": spec, "spec": compressors.parse(spec).spec, "workers": w, "total_s": total, "compute_s": b.compute_s,
                     "exposed_comm_s": b.exposed_comm_s, "codec_s": b.codec_s,
                     "overhead_s": b.overhead_s, "idle_s": b.idle_s + idle,
                     "comm_s": b.comm_s, "payload_MiB_per_worker": b.bytes_per_worker / MIB,
                     "wire_MiB_per_worker": b.wire_bytes_per_worker / MIB, "buckets": b.buckets,
                     "rounds": b.rounds})
        if spec == specs[0]:
            base[w] = total
    ref = {}
    for r in rows:  # speedup over uncompressed ("none" if swept, else the first spec)
        ref.setdefault(r["workers"], None)
    none_spec = next((s for s in specs if s.startswith("none")), specs[0])
    for r in rows:
        if r["compressor"] == none_spec:
            ref[r["workers"]] = r["total_s"]
    for r in rows:
        r["speedup_vs_none"] = ref[r["workers"]] / r["total_s"]
        r["scaling_efficiency"] = t1 / r["total_s"]
        r["samples_per_s"] = r["workers"] * (scale.batch_per_worker or model.batch) / r["total_s"]
    return rows


def print_tables(console: Console, rows: list[dict], scale, cluster, title: str) -> None:
    specs = list(dict.fromkeys(r["compressor"] for r in rows))
    workers = list(dict.fromkeys(r["workers"] for r in rows))
    t = Table(title=title + " — seconds per iteration (speedup over none)", show_lines=False)
    t.add_column("workers", justify="right")
    for s in specs:
        t.add_column(s, justify="right")
    by = {(r["compressor"], r["workers"]): r for r in rows}
    for w in workers:
        t.add_row(str(w), *[f"{by[s, w]['total_s']:.3g} ({by[s, w]['speedup_vs_none']:.2g}×)" for s in specs])
    console.print(t)
    w0 = cluster.workers if cluster.workers in workers else workers[len(workers) // 2]
    b = Table(title=f"breakdown at {w0} workers (seconds; bytes per worker per iteration in MiB = 2^20 B: "
                    f"payload = the compressor's, wire = what the {cluster.collective} collective sends)")
    for c in ("compressor", "total", "compute", "exposed comm", "codec", "idle", "payload MiB", "wire MiB",
              "speedup", "scaling eff."):
        b.add_column(c, justify="right" if c != "compressor" else "left")
    for s in specs:
        r = by[s, w0]
        b.add_row(s, f"{r['total_s']:.4g}", f"{r['compute_s']:.4g}", f"{r['exposed_comm_s']:.4g}",
                  f"{r['codec_s']:.3g}", f"{r['idle_s']:.3g}", f"{r['payload_MiB_per_worker']:.4g}",
                  f"{r['wire_MiB_per_worker']:.4g}",
                  f"{r['speedup_vs_none']:.3g}×", f"{r['scaling_efficiency']:.1%}")
    console.print(b)


def csv_ints(text: Optional[str]) -> Optional[list[int]]:
    if text is None:
        return None
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise ValueError(f"--workers: expected comma-separated integers, got {text!r}") from None


@app.command("scale")
def scale_command(
    model: Optional[str] = typer.Option(None, help="catalog model (bert-large, resnet-50, gpt2-xl, ...)"),
    workers: Optional[str] = typer.Option(None, help="comma-separated worker counts, e.g. 2,4,8,16"),
    compressor: Optional[List[str]] = typer.Option(None, "--compressor", "-c",
                                                   help="compressor spec (repeat the flag for several)"),
    plan_file: Optional[Path] = typer.Option(None, "--plan", help="per-tensor plan file (`kfsim plan`): sweep it "
                                             "on its model beside the --compressor specs (default none())"),
    imports: List[str] = options.import_option(),
    config: Optional[Path] = options.config_option("TOML/YAML config (its \\[scale] section: these options) or "
                                                   "calibrated cluster profile; flags given here win"),
    device: Optional[str] = typer.Option(None, help="accelerator from the catalog (rtx3090, a100, h100, ...)"),
    intra: Optional[str] = typer.Option(None, help="intra-node link from the catalog (pcie4, nvlink4, ...)"),
    inter: Optional[str] = typer.Option(None, help="inter-node link from the catalog (1gbe, 100gbe, ib-ndr, ...)"),
    inter_gbps: Optional[float] = typer.Option(None, "--bandwidth", parser=options.gbit, metavar=options.RATE,
                                               help="inter-node bandwidth, e.g. 10Gbit/s (overrides --inter's)"),
    gpus_per_node: Optional[int] = typer.Option(None, help="devices per node"),
    nics_per_node: Optional[int] = typer.Option(None, help="inter-node NICs per node (1: shared; = devices: rail)"),
    collective: Optional[str] = typer.Option(None, help="ring | tree | rhd | hierarchical | ps | mccl"),
    bucket_mb: Optional[float] = typer.Option(None, help="DDP bucket cap in MiB (2^20 B, default 25)"),
    exchange: Optional[str] = typer.Option(None, help="buckets (DDP: gradient buckets as backward makes them "
                                           "ready) or flat (one buffer of all parameters after backward, "
                                           "as DeepSpeed's fp16 optimizer)"),
    batch: Optional[int] = typer.Option(None, "--batch-per-worker",
                                        help="batch per worker (default: the model's catalog batch)"),
    network: Optional[str] = typer.Option(None, help="analytical (closed forms) or flow (max-min flows)"),
    overlap: bool = typer.Option(True, "--overlap/--no-overlap", help="communicate during backward (or after)"),
    interference: Optional[float] = typer.Option(None, help="backward slowdown while communicating (>= 1)"),
    compute: Optional[str] = typer.Option(None, help="measured forward+backward time of --model, unit explicit: "
                                          "81ms@8 (one iteration at batch 8) or 10ms/sample; scaled to the batch"),
    jitter: float = typer.Option(0.0, help="compute-time coefficient of variation (stragglers; seeded)"),
    seed: Optional[int] = typer.Option(None, help="random seed (stragglers)"),
    out: Path = typer.Option(Path("results/scale"), help="output folder for CSV, JSON and the plot (PNG, SVG)"),
    plot: bool = typer.Option(True, help="write the plot (PNG and SVG)"),
    quiet: bool = typer.Option(False, help="no tables or progress bar: only errors and the output path"),
) -> None:
    """Sweep workers × compressors: time per iteration, breakdown, speedup, scaling efficiency."""
    console = wide_console()
    try:
        if plan_file is not None:
            from kfsim.plans.file import for_simulator
            model, spec, bucket_mb = for_simulator(plan_file, model, bucket_mb)
            compressor = [*(compressor or ["none()"]), spec]
        scale, cluster = resolve(config, model=model, workers=csv_ints(workers), exchange=exchange,
                                 compressors=list(compressor) if compressor else None, bucket_mb=bucket_mb,
                                 batch_per_worker=batch, network=network, seed=seed, no_overlap=not overlap,
                                 device=device, intra=intra, inter=inter, inter_gbps=inter_gbps, gpus_per_node=gpus_per_node,
                                 nics_per_node=nics_per_node,
                                 collective=collective, interference=interference, compute=compute)
        if jitter < 0:
            raise ValueError(f"--jitter must be >= 0, got {jitter}")
        check_plan_exchange(plan_file, scale.exchange)
        check_out_dir(out)
        t0 = time.perf_counter()
        rows = run_scale(scale, cluster, jitter=jitter, progress=not quiet)
    except ValueError as exc:
        raise fail(exc) from None
    elapsed = time.perf_counter() - t0
    title = (f"{scale.model} on {cluster.device.name}, {cluster.gpus_per_node}/node, "
             f"{cluster.nics_per_node} NIC{'s' * (cluster.nics_per_node > 1)}/node, "
             f"{cluster.inter.name} {cluster.inter.bandwidth * 8 / 1e9:g} Gbit/s, {cluster.collective}"
             + measured_note(cluster, scale.model)
             + (", exchanged as one flat buffer after backward" if scale.exchange == "flat" else ""))
    if not quiet:
        print_tables(console, rows, scale, cluster, title)
    meta = {"command": "kfsim scale", "scale": scale.model_dump(), "cluster": cfgmod.cluster_dict(cluster),
            "jitter": jitter, "elapsed_s": elapsed}
    files = [report.write_csv(out / "scale.csv", rows), report.write_json(out / "scale.json", meta, rows)]
    if plot:
        files.append(report.plot_scale(out / "scale.png", rows, title))
    if not quiet:
        console.print(f"{len(rows)} configurations in {elapsed:.2f} s → " + ", ".join(str(f) for f in files))
    else:
        typer.echo(str(out))  # --quiet: nothing but errors and the output path
