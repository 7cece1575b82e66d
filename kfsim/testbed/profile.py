"""Named cluster profiles from testbed calibration, in the simulator's own file format.

A profile is a TOML/YAML file validated by :mod:`kfsim.catalog.config`
(``kfsim.sim.predict.predict_iteration(model, "path.toml", …)`` loads it).
One profile describes the testbed at one shaped link rate: one worker per
node (``gpus_per_node = 1``), ``collective = "mccl"``, the inter-node link with
the nominal rate and the fitted per-message latency α and efficiency
e = 1/(rate·β), the fitted reduction cost γ, the host CPU as the device (with the catalog
CPU's codec class factors), the fitted codec-kernel constants (``[codec]``:
per-op-class throughput and per-op overhead, no compressor named) and
measured compute time per model (models
given as ``[[models]]`` entries so the file is self-contained).

Names: ``<name>-<rate>mbit`` (e.g. ``testbed-200mbit``); :func:`profile_path`
gives ``<dir>/<name>-<rate>mbit.toml``.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

from kfsim.catalog import config as cfgmod
from kfsim.catalog.cluster import Cluster
from kfsim.sim.report import write_text
from kfsim.testbed.fit import CollectiveFit

DEFAULT_DIR = Path("profiles")


def profile_name(name: str, rate_mbit: float) -> str:
    if not name or any(c in name for c in "/\\ "):
        raise ValueError(f"profile name must be non-empty without '/', '\\' or spaces, got {name!r}")
    if not rate_mbit > 0:
        raise ValueError(f"rate_mbit must be > 0, got {rate_mbit}")
    return f"{name}-{rate_mbit:g}mbit"


def profile_path(name: str, rate_mbit: float, directory: str | Path = DEFAULT_DIR) -> Path:
    return Path(directory) / f"{profile_name(name, rate_mbit)}.toml"


def testbed_device(name: str = "testbed-cpu", mem_bw_gbs: float = 5.0, cpu_tflops: float = 0.05) -> dict:
    """The ``[cluster.device]`` table of a testbed profile: the host CPU, with the catalog CPU's
    codec class factors (``kfsim.catalog.devices``, device ``cpu``), its dispatch overhead and
    its cache (what ``kfsim calibrate``'s fit priced scattered accesses against)."""
    from kfsim import catalog
    cpu = catalog.get_device("cpu")
    return {"name": name, "peak_tflops": cpu_tflops, "mem_bw_gbs": mem_bw_gbs, "mfu": 1.0,
            "stream_bw_gbs": mem_bw_gbs, "launch_us": cpu.launch_s * 1e6,
            "codec_factors": {c.replace("/", "_"): f for c, f in cpu.codec_factors},
            "cache_mib": cpu.cache_bytes / 2**20, "line_bytes": cpu.line_bytes}


def profile_dict(name: str, rate_mbit: float, fit: CollectiveFit, workers: int, *,
                 cpu_tflops: float = 0.05, mem_bw_gbs: float = 5.0,
                 codec: Mapping[str, float | str] | None = None,
                 compute_s: Mapping[str, float] | None = None,
                 models: Sequence[Mapping] = (), source: str = "kfsim calibrate") -> dict:
    """The profile-file dict (schema of :class:`kfsim.catalog.config.Config`).

    codec: the ``[codec]`` table (``elementwise_gbs`` ... ``pack_gbs``, ``op_overhead_us``, ``source``;
    :func:`kfsim.testbed.calibrate.step_costs` fits it);
    compute_s: model name → seconds per iteration (forward + backward) at the model's batch."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    rate_bps = rate_mbit * 1e6 / 8
    eff = fit.efficiency_at(rate_bps)
    if not (math.isfinite(eff) and eff > 0):
        raise ValueError(f"fitted β = {fit.beta} gives no usable link efficiency")
    bw_gbps = rate_mbit / 1000.0
    if eff > 1:     # faster than the shaped rate per byte sent: keep the rate, report e = 1
        bw_gbps, eff = bw_gbps * eff, 1.0
    pname = profile_name(name, rate_mbit)
    link = {"name": f"veth-tbf-{rate_mbit:g}mbit", "bandwidth_gbps": bw_gbps,
            "latency_us": fit.alpha * 1e6, "efficiency": eff,
            "source": f"{source}: tc tbf {rate_mbit:g} Mbit/s, fitted mccl α, β"}
    data = {
        "name": pname,
        "source": source,
        "cluster": {
            "device": {**testbed_device(f"{name}-cpu", mem_bw_gbs, cpu_tflops), "source": source},
            "nodes": int(workers), "gpus_per_node": 1,
            "intra": link, "inter": link,
            "collective": "mccl",
            "gamma_s_per_byte": fit.gamma,
            # the fitted α already holds each call's fixed cost, and the testbed's CPU workers
            # run compute and exchange one after the other: no separate overheads or λ
            "interference": 1.0,
            "overheads": {"collective_us": 0.0, "tensor_us": 0.0, "step_us": 0.0},
        },
        "codec": dict(codec or {}),
        "compute_s": dict(compute_s or {}),
        "models": [dict(m) for m in models],
    }
    cfgmod.validate(data, pname)   # fail here, not when the simulator reads it
    return data


def write_profile(data: dict, path: str | Path) -> Path:
    """Write a profile dict as TOML (or YAML for .yaml/.yml) and check it loads back."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    models = data.get("models", [])
    body = {k: v for k, v in data.items() if k != "models"}
    if path.suffix in (".yaml", ".yml"):
        import yaml
        write_text(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    elif path.suffix == ".toml":
        text = cfgmod.to_toml(body)
        for m in models:
            text += "\n[[models]]\n" + cfgmod.to_toml(m)
        write_text(path, text)
    else:
        raise ValueError(f"{path}: profiles are written as .toml or .yaml")
    read_profile(path)
    return path


def read_profile(path: str | Path) -> Cluster:
    """The :class:`Cluster` of a profile file (validated; its models registered in the catalog)."""
    return cfgmod.load_cluster(path)
