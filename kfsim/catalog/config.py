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
    call_overhead_us = 400                 # per coded tensor and exchange (the codec's entry)

    [compute_s]                            # measured forward + backward, unit stated (kfsim.catalog.measured)
    "bert-large" = { seconds = 0.081, batch = 8 }   # one iteration at batch 8; or "81ms@8"
    "my-r101" = { per_sample_s = 0.004 }            # per sample; or "4ms/sample"

    [[models]]
    name = "my-mlp"
    tensor_shapes = [[784, 512], [512], [512, 10], [10]]
    flops_per_sample = 2.4e6
    batch = 64

    [[models]]                             # a catalog builder (kfsim.catalog.families): family + depth/width
    name = "my-r101"
    family = "resnet"                      # resnet | resnext | vgg | efficientnet | transformer | gpt | llama
    depth = 101
    efficiency = { conv = 0.3 }            # per layer kind (kfsim.catalog.kinds), replacing the defaults

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

import yaml
from pydantic import ValidationError

from kfsim import catalog
from kfsim.catalog.cluster import Cluster, Topology
from kfsim.catalog.overheads import OverheadsCfg  # noqa: F401  (re-exported: [cluster.overheads])
from kfsim.catalog.schema import (COMMAND_SECTIONS, LEGACY_CODEC, ClusterCfg, CodecCfg, Config,  # noqa: F401
                                  DeviceCfg, LinkCfg, MeasuredCfg, ModelCfg, ScaleCfg, TopologyCfg,
                                  legacy_message)
from kfsim.catalog.writer import cluster_dict, codec_dict, dump_profile, to_toml  # noqa: F401  (re-exported)


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
        warnings.warn(legacy_message(where, legacy), UserWarning, stacklevel=2)
    return cfg


def _is_union_tag(x) -> bool:
    return isinstance(x, str) and (x in ("str", "float", "DeviceCfg", "LinkCfg", "MeasuredCfg")
                                   or x.startswith("function-"))


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
                   c.interference, cfg.codec.build(), compute_entries(cfg.compute_s), c.servers,
                   c.gamma_s_per_byte, cfg.source, c.nics_per_node, c.overheads.build(), c.precision)


def compute_entries(compute_s: dict) -> tuple:
    """Cluster.compute_s from the validated table: (model, seconds, batch), or (model, seconds)
    for a bare number (at the model's catalog batch)."""
    return tuple(sorted((k, s) if b is None else (k, s, b) for k, (s, b) in compute_s.items()))


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
