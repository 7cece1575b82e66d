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
    nics_per_node = 1                      # inter-node NICs per node (1 shared; = gpus_per_node: one per device)
    intra = "pcie4"                        # catalog name, or a table:
    inter = { bandwidth_gbps = 0.94, latency_us = 180, efficiency = 1.0 }
    collective = "mccl"                    # ring | tree | rhd | hierarchical | ps | mccl
    interference = 1.05
    topology = { kind = "leaf-spine", nodes_per_leaf = 8, oversubscription = 2 }

    [codec]                                # measured codec-kernel constants (override the device's)
    elementwise_gbs = 800                  # GB/s (read + written) per op class
    select_gbs = 60
    gather_scatter_gbs = 200
    op_overhead_us = 6                     # per-op launch/dispatch overhead

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
    stream_bw_gbs = 15                     # achievable bandwidth of codec kernels (default 0.85 × mem_bw)
    launch_us = 2                          # per-op dispatch overhead (default 5 µs, a GPU launch)
    codec_factors = { select = 4.0 }       # time multiplier per op class (defaults in kfsim.catalog.devices)

    [[links]]
    name = "lab-ethernet"
    bandwidth_gbps = 1
    latency_us = 60

    [scale]                                # defaults of `kfsim scale --config FILE`: its flags,
    model = "bert-large"                   # by long name (--bucket-mb -> bucket_mb)
    workers = [2, 4, 8, 16]
    compressor = ["none", "fp16"]
    bucket_mb = 25

    [train]                                # one section per command: [advise], [train], [study],
    global_batch = 256                     # [launch], [testbed], [calibrate], [validate], [compressors]
    bandwidth = "10Gbit/s"
"""
from __future__ import annotations

import json
import tomllib
import warnings
from pathlib import Path
from typing import Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from kfsim import catalog
from kfsim.catalog.cluster import CODEC_CLASSES, Cluster, Codec, Topology
from kfsim.catalog.devices import DEFAULT_FACTORS, GPU_LAUNCH_S, Accelerator
from kfsim.catalog.links import Link
from kfsim.catalog.models import ModelProfile
from kfsim.catalog.overheads import DEFAULT_INTERFERENCE, OverheadsCfg
from kfsim.catalog.writer import cluster_dict, codec_dict, dump_profile, to_toml  # noqa: F401  (re-exported)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DeviceCfg(_Strict):
    name: str
    peak_tflops: float = Field(gt=0)
    mem_bw_gbs: float = Field(gt=0)
    mfu: float = Field(0.4, gt=0, le=1)
    fp32_tflops: float | None = Field(None, gt=0)
    source: str = "user config"
    stream_bw_gbs: float | None = Field(None, gt=0, description="achievable GB/s of codec kernels")
    fp16_tflops: float | None = Field(None, gt=0)
    bf16_tflops: float | None = Field(None, gt=0)
    tf32_tflops: float | None = Field(None, gt=0)
    launch_us: float = Field(GPU_LAUNCH_S * 1e6, ge=0, description="per-op launch/dispatch overhead, µs")
    codec_factors: dict[str, float] = Field(default_factory=dict)
    codec_source: str = ""

    @field_validator("codec_factors")
    @classmethod
    def _factors(cls, v):
        for k, f in v.items():
            if k.replace("_", "/") not in DEFAULT_FACTORS:
                raise ValueError(f"unknown op class {k!r} (known: {', '.join(CODEC_CLASSES)})")
            if not f > 0:
                raise ValueError(f"factor of {k!r} must be > 0, got {f}")
        return v

    def build(self) -> Accelerator:
        t = lambda x: None if x is None else x * 1e12  # noqa: E731
        return Accelerator(self.name, self.peak_tflops * 1e12, self.mem_bw_gbs * 1e9, self.mfu,
                           t(self.fp32_tflops), self.source,
                           None if self.stream_bw_gbs is None else self.stream_bw_gbs * 1e9,
                           t(self.fp16_tflops), t(self.bf16_tflops), self.launch_us / 1e6,
                           tuple(sorted((k.replace("_", "/"), float(f)) for k, f in self.codec_factors.items())),
                           self.codec_source, t(self.tf32_tflops))


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
    nics_per_node: int = Field(1, ge=1, description="inter-node NICs per node, each of the inter link's bandwidth")
    intra: Union[str, LinkCfg] = "pcie4"
    inter: Union[str, LinkCfg] = "1gbe"
    collective: Literal["ring", "tree", "rhd", "hierarchical", "ps", "mccl"] = "ring"
    interference: float = Field(DEFAULT_INTERFERENCE, ge=1)
    overheads: OverheadsCfg = OverheadsCfg()
    precision: Literal["mixed", "fp32", "tf32", "fp16", "bf16"] = "mixed"
    servers: int | None = Field(None, ge=1)
    gamma_s_per_byte: float | None = Field(None, ge=0)
    topology: TopologyCfg = TopologyCfg()

    @field_validator("nics_per_node")
    @classmethod
    def _nics(cls, v, info: ValidationInfo):
        g = info.data.get("gpus_per_node")
        if g is not None and v > g:
            raise ValueError(f"{v} NICs per node for {g} devices per node: at most one NIC per device")
        return v


class CodecCfg(_Strict):
    """Per-op-class codec constants (GB/s read + written; per-op overhead in µs)."""

    elementwise_gbs: float | None = Field(None, gt=0)
    reduction_gbs: float | None = Field(None, gt=0)
    matmul_gbs: float | None = Field(None, gt=0)
    select_gbs: float | None = Field(None, gt=0)
    gather_scatter_gbs: float | None = Field(None, gt=0)
    rng_gbs: float | None = Field(None, gt=0)
    pack_gbs: float | None = Field(None, gt=0)
    op_overhead_us: float | None = Field(None, ge=0)
    source: str = ""

    def build(self) -> Codec:
        g = lambda x: None if x is None else x * 1e9  # noqa: E731
        return Codec(*[g(getattr(self, f"{c}_gbs")) for c in CODEC_CLASSES],
                     None if self.op_overhead_us is None else self.op_overhead_us / 1e6, self.source)


LEGACY_CODEC = ("{where}: {tables} — per-compressor codec throughputs are no longer used and were "
                "ignored: the simulator derives every compressor's encode/decode cost from its own op program "
                "on the device profile. A [codec] table may give per-op-class constants instead "
                "(elementwise_gbs, select_gbs, ..., op_overhead_us); `kfsim calibrate` writes them.")


# sections of per-command settings (`kfsim <command> --config FILE`), checked by kfsim.cli.options
COMMAND_SECTIONS = ("scale", "advise", "train", "study", "launch", "testbed", "calibrate", "validate", "compressors")


class ScaleCfg(_Strict):
    """The sweep settings of `kfsim scale` / `kfsim advise` once resolved (flags and file merged)."""
    model: str = "bert-large"
    workers: list[int] = Field(default_factory=lambda: [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], min_length=1)
    compressors: list[str] | None = None
    bucket_mb: float = Field(25.0, gt=0)
    batch_per_worker: int | None = Field(None, ge=1)
    overlap: bool = True
    network: Literal["analytical", "flow"] = "analytical"
    seed: int = 0

    @field_validator("workers")
    @classmethod
    def _workers(cls, v):
        for w in v:
            if w < 1:
                raise ValueError(f"every worker count must be >= 1, got {w}")
        return v


class Config(_Strict):
    name: str = "custom"
    source: str = "user config"
    cluster: ClusterCfg = ClusterCfg()
    codec: CodecCfg = CodecCfg()
    compute_s: dict[str, float] = Field(default_factory=dict)
    models: list[ModelCfg] = Field(default_factory=list)
    devices: list[DeviceCfg] = Field(default_factory=list)
    links: list[LinkCfg] = Field(default_factory=list)
    # per-command settings: flag name (no dashes) -> value
    scale: dict[str, Any] = Field(default_factory=dict)
    advise: dict[str, Any] = Field(default_factory=dict)
    train: dict[str, Any] = Field(default_factory=dict)
    study: dict[str, Any] = Field(default_factory=dict)
    launch: dict[str, Any] = Field(default_factory=dict)
    testbed: dict[str, Any] = Field(default_factory=dict)
    calibrate: dict[str, Any] = Field(default_factory=dict)
    validate_: dict[str, Any] = Field(default_factory=dict, alias="validate")  # BaseModel has .validate
    compressors: dict[str, Any] = Field(default_factory=dict)

    @field_validator("codec", mode="before")
    @classmethod
    def _legacy_codec(cls, v, info: ValidationInfo):
        """The old per-family tables ([codec.topk] encode_gbs = ...): dropped with a warning."""
        if isinstance(v, dict):
            legacy = sorted(k for k, x in v.items() if isinstance(x, dict))
            if legacy:
                found = (info.context or {}).get("legacy_codec")
                if found is not None:
                    found.extend(legacy)     # validate() warns, naming the file
                else:
                    warnings.warn(_legacy_message("config", legacy), UserWarning, stacklevel=2)
                v = {k: x for k, x in v.items() if not isinstance(x, dict)}
        return v

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
    if not path.is_file():
        raise ValueError(f"config file {str(path)!r} is not a regular file (a directory?)")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"config file {str(path)!r}: cannot read: {exc}") from None
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
    legacy: list = []
    try:
        cfg = Config.model_validate(data, context={"legacy_codec": legacy})
    except ValidationError as exc:
        raise ValueError(format_errors(exc, where)) from None
    if legacy:
        warnings.warn(_legacy_message(where, legacy), UserWarning, stacklevel=2)
    return cfg


def _legacy_message(where: str, families) -> str:
    return LEGACY_CODEC.format(where=where, tables=", ".join(f"[codec.{k}]" for k in families))


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
    topo = Topology(c.topology.kind, c.topology.nodes_per_leaf, c.topology.oversubscription, c.topology.spines)
    return Cluster(cfg.name, dev, c.gpus_per_node, c.nodes, links[0], links[1], topo, c.collective,
                   c.interference, cfg.codec.build(), tuple(sorted(cfg.compute_s.items())), c.servers,
                   c.gamma_s_per_byte, cfg.source, c.nics_per_node, c.overheads.build(), c.precision)


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
