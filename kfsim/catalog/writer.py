"""Writing clusters as profile files (TOML or YAML) that :mod:`kfsim.catalog.config` reads back.

``cluster_dict`` is the inverse of ``config.build_cluster``; ``to_toml`` a
minimal TOML writer for its nested dicts of scalars.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import yaml

from kfsim.catalog.cluster import CODEC_CLASSES, Cluster, Codec
from kfsim.catalog.devices import MIB, Accelerator
from kfsim.catalog.links import Link
from kfsim.catalog.overheads import overheads_dict


def dump_profile(cluster: Cluster, path: str | Path) -> Path:
    """Write a cluster (e.g. a calibrated one) as a profile file loadable by :func:`load_cluster`."""
    data = cluster_dict(cluster)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix in (".yaml", ".yml"):
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    elif path.suffix == ".toml":
        path.write_text(to_toml(data))
    else:
        raise ValueError(f"{path}: profiles are written as .toml or .yaml")
    return path


def cluster_dict(cluster: Cluster) -> dict:
    """The profile-file dict of a cluster (inverse of :func:`build_cluster`)."""
    d = cluster.device
    data = {
        "name": cluster.name, "source": cluster.source or "kfsim",
        "cluster": {
            "device": _device_dict(d),
            "nodes": cluster.nodes, "gpus_per_node": cluster.gpus_per_node,
            "nics_per_node": cluster.nics_per_node,
            "intra": _link_dict(cluster.intra), "inter": _link_dict(cluster.inter),
            "collective": cluster.collective, "interference": cluster.interference,
            "overheads": overheads_dict(cluster.overheads), "precision": cluster.precision,
            "topology": {"kind": cluster.topology.kind, "nodes_per_leaf": cluster.topology.nodes_per_leaf,
                         "oversubscription": cluster.topology.oversubscription},
        },
        "codec": codec_dict(cluster.codec),
        "compute_s": compute_dict(cluster.compute_s),
    }
    if cluster.servers is not None:
        data["cluster"]["servers"] = cluster.servers
    if cluster.gamma is not None:
        data["cluster"]["gamma_s_per_byte"] = cluster.gamma
    if cluster.topology.spines is not None:
        data["cluster"]["topology"]["spines"] = cluster.topology.spines
    return data


def compute_dict(entries) -> dict:
    """The ``[compute_s]`` table: ``{seconds, batch}`` (``{per_sample_s}`` at batch 1) per model; an
    entry without a batch stays a bare number (seconds at the model's catalog batch)."""
    out = {}
    for name, t, *batch in entries:
        if not batch:
            out[name] = t
        elif batch[0] == 1:
            out[name] = {"per_sample_s": t}
        else:
            out[name] = {"seconds": t, "batch": batch[0]}
    return out


def _device_dict(d: Accelerator) -> dict:
    out = {"name": d.name, "peak_tflops": d.peak_flops / 1e12, "mem_bw_gbs": d.mem_bw / 1e9,
           "mfu": d.mfu, "source": d.source or "kfsim"}
    for key, v, scale in (("fp32_tflops", d.fp32_flops, 1e12), ("stream_bw_gbs", d.stream_bw, 1e9),
                          ("fp16_tflops", d.fp16_flops, 1e12), ("bf16_tflops", d.bf16_flops, 1e12),
                          ("tf32_tflops", d.tf32_flops, 1e12)):
        if v is not None:
            out[key] = v / scale
    out["launch_us"] = d.launch_s * 1e6
    if d.codec_factors:
        out["codec_factors"] = {c.replace("/", "_"): f for c, f in d.codec_factors}
    if d.codec_source:
        out["codec_source"] = d.codec_source
    out["cache_mib"] = d.cache_bytes / MIB
    out["line_bytes"] = d.line_bytes
    out["cache_speedup"] = d.cache_speedup
    return out


def codec_dict(c: Codec) -> dict:
    """The ``[codec]`` table of a profile (only the constants that are set)."""
    out = {f"{cls}_gbs": c.rate(cls) / 1e9 for cls in CODEC_CLASSES if c.rate(cls) is not None}
    if c.op_overhead is not None:
        out["op_overhead_us"] = c.op_overhead * 1e6
    if c.call_overhead is not None:
        out["call_overhead_us"] = c.call_overhead * 1e6
    if c.cache_speedup is not None:
        out["cache_speedup"] = c.cache_speedup
    if c.segment_overhead is not None:
        out["segment_overhead_ns"] = c.segment_overhead * 1e9
    if c.source and out:
        out["source"] = c.source
    return out


def _link_dict(l: Link) -> dict:
    return {"name": l.name, "bandwidth_gbps": l.bandwidth * 8 / 1e9, "latency_us": l.latency * 1e6,
            "efficiency": l.efficiency, "source": l.source or "kfsim"}


def to_toml(data: dict, prefix: str = "") -> str:
    """Minimal TOML writer for the profile's nested dicts of scalars."""
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    out = [f"{_key(k)} = {_val(v)}" for k, v in scalars.items()]
    for k, v in tables.items():
        name = f"{prefix}.{_key(k)}" if prefix else _key(k)
        body = to_toml(v, name)
        out.append(f"\n[{name}]\n{body}" if body.strip() else f"\n[{name}]")
    return "\n".join(out) + "\n"


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)


def _val(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"cannot write {v} to TOML")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_val(x) for x in v) + "]"
    raise ValueError(f"cannot write {v!r} to TOML")
