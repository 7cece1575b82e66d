"""User configuration files (TOML or YAML), validated with pydantic.

One schema serves three uses: adding models/devices/links to the catalog,
describing a cluster, and the *cluster profile* that ``kfsim calibrate``
writes (the same keys, with measured values). Units are in the key names.
Every error names the offending field, e.g.
``cfg.toml: cluster.inter.bandwidth_gbps: Input should be greater than 0``.

Example (all sections optional)::

    name = "lab-3090"                      # profile name
    source = "kfsim calibrate 2026-11-30"  # where the numbers come from

    [cluster]
    device = "rtx3090"                     # catalog name, or a table like [[devices]]
    nodes = 4
    gpus_per_node = 4
    intra = "pcie4"                        # catalog name, or a table:
    inter = { bandwidth_gbps = 0.94, latency_us = 180, efficiency = 1.0 }
    collective = "mccl"                    # ring | tree | rhd | hierarchical | ps | mccl
    interference = 1.05
    topology = { kind = "leaf-spine", nodes_per_leaf = 8, oversubscription = 2 }

    [codec.topk]                           # measured codec throughput (GB/s of fp32 gradient)
    encode_gbs = 0.8
    decode_gbs = 3.0
    gather_decode_gbs = 1.5

    [compute_s]                            # measured compute seconds per iteration at the model's batch
    "bert-large" = 0.081

    [[models]]
    name = "my-mlp"
    tensor_shapes = [[784, 512], [512], [512, 10], [10]]
    flops_per_sample = 2.4e6
    batch = 64

    [[devices]]
    name = "my-cpu"
    peak_tflops = 0.2
    mem_bw_gbs = 20
    mfu = 0.5

    [[links]]
    name = "lab-ethernet"
    bandwidth_gbps = 1
    latency_us = 60

    [scale]                                # defaults of `kfsim scale` (each also a flag)
    model = "bert-large"
    workers = [2, 4, 8, 16]
    compressors = ["none", "fp16"]
    bucket_mb = 25
"""
from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path
from typing import Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kfsim import catalog
from kfsim.catalog.cluster import Cluster, Codec, Topology
from kfsim.catalog.devices import Accelerator
from kfsim.catalog.links import Link
from kfsim.catalog.models import ModelProfile


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DeviceCfg(_Strict):
    name: str
    peak_tflops: float = Field(gt=0)
    mem_bw_gbs: float = Field(gt=0)
    mfu: float = Field(0.4, gt=0, le=1)
    fp32_tflops: float | None = Field(None, gt=0)
    source: str = "user config"

    def build(self) -> Accelerator:
        return Accelerator(self.name, self.peak_tflops * 1e12, self.mem_bw_gbs * 1e9, self.mfu,
                           None if self.fp32_tflops is None else self.fp32_tflops * 1e12, self.source)


class LinkCfg(_Strict):
    name: str = "custom"
    bandwidth_gbps: float = Field(gt=0, description="Gbit/s per direction")
    latency_us: float = Field(0.0, ge=0)
    efficiency: float = Field(1.0, gt=0, le=1)
    source: str = "user config"

    def build(self) -> Link:
        return Link(self.name, self.bandwidth_gbps * 1e9 / 8, self.latency_us * 1e-6, self.efficiency, self.source)


class ModelCfg(_Strict):
    name: str
    tensor_shapes: list[list[int]] = Field(min_length=1)
    flops_per_sample: float = Field(ge=0)
    tensor_flops: list[float] | None = None
    batch: int = Field(32, ge=1)
    mfu: float | None = Field(None, gt=0, le=1)
    source: str = "user config"

    @field_validator("tensor_shapes")
    @classmethod
    def _positive(cls, v):
        for s in v:
            if any(d < 1 for d in s):
                raise ValueError(f"tensor dimensions must be >= 1, got {s}")
        return v

    def build(self) -> ModelProfile:
        if self.tensor_flops is not None and len(self.tensor_flops) != len(self.tensor_shapes):
            raise ValueError(f"models.{self.name}.tensor_flops: {len(self.tensor_flops)} entries for "
                             f"{len(self.tensor_shapes)} tensors")
        return ModelProfile(self.name, tuple(tuple(s) for s in self.tensor_shapes), self.flops_per_sample,
                            None if self.tensor_flops is None else tuple(self.tensor_flops), self.batch, self.mfu,
                            self.source)


class TopologyCfg(_Strict):
    kind: Literal["switch", "leaf-spine", "fat-tree"] = "switch"
    nodes_per_leaf: int = Field(16, ge=1)
    oversubscription: float = Field(1.0, ge=1)
    spines: int | None = Field(None, ge=1)


class ClusterCfg(_Strict):
    device: Union[str, DeviceCfg] = "rtx3090"
    nodes: int = Field(4, ge=1)
    gpus_per_node: int = Field(4, ge=1)
    intra: Union[str, LinkCfg] = "pcie4"
    inter: Union[str, LinkCfg] = "1gbe"
    collective: Literal["ring", "tree", "rhd", "hierarchical", "ps", "mccl"] = "ring"
    interference: float = Field(1.0, ge=1)
    servers: int | None = Field(None, ge=1)
    gamma_s_per_byte: float | None = Field(None, ge=0)
    topology: TopologyCfg = TopologyCfg()


class CodecCfg(_Strict):
    encode_gbs: float = Field(gt=0)
    decode_gbs: float = Field(gt=0)
    gather_decode_gbs: float | None = Field(None, gt=0)


class ScaleCfg(_Strict):
    model: str = "bert-large"
    workers: list[int] = Field(default_factory=lambda: [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], min_length=1)
    compressors: list[str] | None = None
    bucket_mb: float = Field(25.0, gt=0)
    batch_per_worker: int | None = Field(None, ge=1)
    overlap: bool = True
    network: Literal["analytical", "flow"] = "analytical"
    bandwidths_gbps: list[float] | None = None
    seed: int = 0

    @field_validator("workers")
    @classmethod
    def _workers(cls, v):
        for w in v:
            if w < 1:
                raise ValueError(f"every worker count must be >= 1, got {w}")
        return v

    @field_validator("bandwidths_gbps")
    @classmethod
    def _bw(cls, v):
        if v is not None:
            for b in v:
                if not b > 0:
                    raise ValueError(f"every bandwidth must be > 0, got {b}")
        return v


class Config(_Strict):
    name: str = "custom"
    source: str = "user config"
    cluster: ClusterCfg = ClusterCfg()
    codec: dict[str, CodecCfg] = Field(default_factory=dict)
    compute_s: dict[str, float] = Field(default_factory=dict)
    models: list[ModelCfg] = Field(default_factory=list)
    devices: list[DeviceCfg] = Field(default_factory=list)
    links: list[LinkCfg] = Field(default_factory=list)
    scale: ScaleCfg = ScaleCfg()

    @field_validator("compute_s")
    @classmethod
    def _compute(cls, v):
        for k, t in v.items():
            if not t > 0:
                raise ValueError(f"compute time of {k!r} must be > 0, got {t}")
        return v


def read_file(path: str | Path) -> dict:
    """Raw dict of a .toml / .yaml / .yml / .json file."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"config file {str(path)!r} does not exist")
    text = path.read_text()
    try:
        if path.suffix == ".toml":
            return tomllib.loads(text)
        if path.suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
            return data or {}
        if path.suffix == ".json":
            return json.loads(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot parse: {exc}") from None
    raise ValueError(f"{path}: config files must end in .toml, .yaml, .yml or .json")


def format_errors(exc: ValidationError, where: str, prefix: str = "") -> str:
    """One line per error, each naming its field (``where: prefix.field: message``)."""
    errs = [(".".join([prefix] * bool(prefix) + [str(x) for x in e["loc"] if not _is_union_tag(x)]), e["msg"])
            for e in exc.errors()]
    locs = [l for l, _ in errs]
    # a union field (name or table) reports every branch: keep the deepest
    return "\n".join(f"{where}: {l}: {m}" for l, m in errs
                     if not any(o != l and o.startswith(l + ".") for o in locs))


def validate(data: dict, where: str = "config") -> Config:
    """A validated :class:`Config`; errors name the field (``cluster.inter.bandwidth_gbps``)."""
    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        raise ValueError(format_errors(exc, where)) from None
    return cfg


def _is_union_tag(x) -> bool:
    return isinstance(x, str) and (x in ("str", "DeviceCfg", "LinkCfg") or x.startswith("function-"))


def register_entries(cfg: Config, where: str = "config") -> None:
    """Add the file's models, devices and links to the catalog."""
    for m in cfg.models:
        try:
            catalog.register_model(m.build())
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    for d in cfg.devices:
        catalog.register_device(d.build())
    for l in cfg.links:
        catalog.register_link(l.build())


def build_cluster(cfg: Config, where: str = "config") -> Cluster:
    c = cfg.cluster
    try:
        dev = c.device.build() if isinstance(c.device, DeviceCfg) else catalog.get_device(c.device)
    except ValueError as exc:
        raise ValueError(f"{where}: cluster.device: {exc}") from None
    links = []
    for field in ("intra", "inter"):
        v = getattr(c, field)
        try:
            links.append(v.build() if isinstance(v, LinkCfg) else catalog.get_link(v))
        except ValueError as exc:
            raise ValueError(f"{where}: cluster.{field}: {exc}") from None
    codecs = tuple(Codec(fam, k.encode_gbs * 1e9, k.decode_gbs * 1e9,
                         None if k.gather_decode_gbs is None else k.gather_decode_gbs * 1e9)
                   for fam, k in sorted(cfg.codec.items()))
    topo = Topology(c.topology.kind, c.topology.nodes_per_leaf, c.topology.oversubscription, c.topology.spines)
    return Cluster(cfg.name, dev, c.gpus_per_node, c.nodes, links[0], links[1], topo, c.collective,
                   c.interference, codecs, tuple(sorted(cfg.compute_s.items())), c.servers,
                   c.gamma_s_per_byte, cfg.source)


def load(path: str | Path) -> tuple[Config, Cluster]:
    """Read, validate, register the file's catalog entries, build its cluster."""
    where = str(path)
    cfg = validate(read_file(path), where)
    register_entries(cfg, where)
    return cfg, build_cluster(cfg, where)


def load_cluster(path: str | Path) -> Cluster:
    """A cluster (or calibrated cluster profile) from a TOML/YAML file."""
    return load(path)[1]


def check_scale(cfg: ScaleCfg, where: str = "config") -> None:
    """Semantic checks the schema cannot do: known model and compressors, bucket ≤ model."""
    try:
        model = catalog.get_model(cfg.model)
    except ValueError as exc:
        raise ValueError(f"{where}: scale.model: {exc}") from None
    size_mb = model.params * 4 / 2**20
    if cfg.bucket_mb > size_mb:
        raise ValueError(f"{where}: scale.bucket_mb: {cfg.bucket_mb:g} MB is larger than the model "
                         f"{model.name} ({size_mb:.1f} MB of fp32 gradients)")
    if cfg.compressors is not None:
        import compressors
        for i, spec in enumerate(cfg.compressors):
            try:
                compressors.parse(spec)
            except ValueError as exc:
                raise ValueError(f"{where}: scale.compressors[{i}]: {exc}") from None


def dump_profile(cluster: Cluster, path: str | Path) -> Path:
    """Write a cluster (e.g. a calibrated one) as a profile file loadable by :func:`load_cluster`."""
    data = cluster_dict(cluster)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix in (".yaml", ".yml"):
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    elif path.suffix == ".toml":
        path.write_text(_to_toml(data))
    else:
        raise ValueError(f"{path}: profiles are written as .toml or .yaml")
    return path


def cluster_dict(cluster: Cluster) -> dict:
    """The profile-file dict of a cluster (inverse of :func:`build_cluster`)."""
    d = cluster.device
    data = {
        "name": cluster.name, "source": cluster.source or "kfsim",
        "cluster": {
            "device": {"name": d.name, "peak_tflops": d.peak_flops / 1e12, "mem_bw_gbs": d.mem_bw / 1e9,
                       "mfu": d.mfu, "source": d.source or "kfsim",
                       **({} if d.fp32_flops is None else {"fp32_tflops": d.fp32_flops / 1e12})},
            "nodes": cluster.nodes, "gpus_per_node": cluster.gpus_per_node,
            "intra": _link_dict(cluster.intra), "inter": _link_dict(cluster.inter),
            "collective": cluster.collective, "interference": cluster.interference,
            "topology": {"kind": cluster.topology.kind, "nodes_per_leaf": cluster.topology.nodes_per_leaf,
                         "oversubscription": cluster.topology.oversubscription},
        },
        "codec": {c.family: {k: v for k, v in (("encode_gbs", c.encode / 1e9), ("decode_gbs", c.decode / 1e9),
                                               ("gather_decode_gbs", None if c.gather_decode is None
                                                else c.gather_decode / 1e9)) if v is not None}
                  for c in cluster.codecs},
        "compute_s": dict(cluster.compute_s),
    }
    if cluster.servers is not None:
        data["cluster"]["servers"] = cluster.servers
    if cluster.gamma is not None:
        data["cluster"]["gamma_s_per_byte"] = cluster.gamma
    if cluster.topology.spines is not None:
        data["cluster"]["topology"]["spines"] = cluster.topology.spines
    return data


def _link_dict(l: Link) -> dict:
    return {"name": l.name, "bandwidth_gbps": l.bandwidth * 8 / 1e9, "latency_us": l.latency * 1e6,
            "efficiency": l.efficiency, "source": l.source or "kfsim"}


def _to_toml(data: dict, prefix: str = "") -> str:
    """Minimal TOML writer for the profile's nested dicts of scalars."""
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    out = [f"{_key(k)} = {_val(v)}" for k, v in scalars.items()]
    for k, v in tables.items():
        name = f"{prefix}.{_key(k)}" if prefix else _key(k)
        body = _to_toml(v, name)
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
