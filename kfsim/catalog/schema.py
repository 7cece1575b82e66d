"""The schema of configuration files: one pydantic model per section (``[cluster]``,
``[[models]]``, ``[[devices]]``, ``[[links]]``, ``[codec]``, ``[compute_s]``, ``[scale]`` ...).

Reading, validating and turning a file into catalog entries and a cluster is
:mod:`kfsim.catalog.config` (whose docstring shows every key). Units are in
the key names; every field checks its own range, so an error names it.
"""
from __future__ import annotations

import math
import warnings
from typing import Annotated, Any, Literal, Union

from pydantic import (BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationInfo, field_validator,
                      model_validator)

from kfsim.catalog.cluster import CODEC_CLASSES, Codec
from kfsim.catalog.devices import DEFAULT_FACTORS, GPU_LAUNCH_S, MIB, Accelerator
from kfsim.catalog import families, kinds, measured
from kfsim.catalog.links import Link
from kfsim.catalog.models import ModelProfile
from kfsim.catalog.overheads import DEFAULT_INTERFERENCE, OverheadsCfg


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
    cache_mib: float = Field(0.0, ge=0, description="last-level cache of scattered gathers/scatters, MiB")
    line_bytes: float = Field(64.0, gt=0, description="bytes a missed scattered access moves")
    cache_speedup: float = Field(1.0, ge=1, description="streaming rate from the cache over stream_bw_gbs")

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
                           self.codec_source, t(self.tf32_tflops), self.cache_mib * MIB, self.line_bytes,
                           self.cache_speedup)


class LinkCfg(_Strict):
    name: str = "custom"
    bandwidth_gbps: float = Field(gt=0, description="Gbit/s per direction")
    latency_us: float = Field(0.0, ge=0)
    efficiency: float = Field(1.0, gt=0, le=1)
    source: str = "user config"

    def build(self) -> Link:
        return Link(self.name, self.bandwidth_gbps * 1e9 / 8, self.latency_us * 1e-6, self.efficiency, self.source)


class ModelCfg(_Strict):
    """A model: built by a family (``family = "resnet", depth = 50``; kfsim.catalog.families) or
    written tensor by tensor (``tensor_shapes`` + ``flops_per_sample``)."""
    name: str
    family: str | None = None
    depth: int | None = Field(None, ge=1)
    layers: int | None = Field(None, ge=1)
    width: int | None = Field(None, ge=1)
    ffn: int | None = Field(None, ge=1)
    kv_width: int | None = Field(None, ge=1)
    vocab: int | None = Field(None, ge=1)
    seq: int | None = Field(None, ge=1)
    groups: int | None = Field(None, ge=1)
    width_per_group: int | None = Field(None, ge=1)
    classes: int | None = Field(None, ge=1)
    variant: str | None = None
    tensor_shapes: list[list[int]] | None = Field(None, min_length=1)
    flops_per_sample: float | None = Field(None, ge=0)
    tensor_flops: list[float] | None = None
    tensor_kinds: list[str] | None = None
    batch: int | None = Field(None, ge=1)
    mfu: float | None = Field(None, gt=0, le=1)
    efficiency: dict[str, float] = Field(default_factory=dict)
    source: str = "user config"

    @field_validator("efficiency")
    @classmethod
    def _efficiency(cls, v):
        return kinds.check_overrides(v)

    @field_validator("tensor_kinds")
    @classmethod
    def _kinds(cls, v):
        for k in v or ():
            if k not in kinds.KINDS:
                raise ValueError(f"unknown layer kind {k!r} (known: {', '.join(kinds.KINDS)})")
        return v

    @model_validator(mode="after")
    def _one_way(self):
        if (self.family is None) == (self.tensor_shapes is None):
            raise ValueError(f"model {self.name!r}: give either family (with its parameters) or "
                             "tensor_shapes (with flops_per_sample), not both or neither")
        if self.tensor_shapes is not None and self.flops_per_sample is None:
            raise ValueError(f"model {self.name!r}: flops_per_sample: needed with tensor_shapes")
        return self

    @field_validator("tensor_shapes")
    @classmethod
    def _positive(cls, v):
        for s in v:
            if any(d < 1 for d in s):
                raise ValueError(f"tensor dimensions must be >= 1, got {s}")
        return v

    def build(self) -> ModelProfile:
        eff = tuple(sorted(self.efficiency.items()))
        if self.family is not None:
            given = {k: getattr(self, k) for k in families.PARAMS}
            for k in ("tensor_flops", "tensor_kinds"):
                if getattr(self, k) is not None:
                    raise ValueError(f"models.{self.name}.{k}: only with tensor_shapes, not with a family")
            try:
                prof = families.build(self.name, self.family, given, self.batch,
                                      "" if self.source == "user config" else self.source, eff)
            except ValueError as exc:
                raise ValueError(f"models.{self.name}.{exc}") from None
            # a given mfu is one utilisation for the whole model (replaces the per-kind split)
            return prof if self.mfu is None else prof._replace(kind_flops=None, mfu=self.mfu)
        n = len(self.tensor_shapes)
        for k in ("tensor_flops", "tensor_kinds"):
            v = getattr(self, k)
            if v is not None and len(v) != n:
                raise ValueError(f"models.{self.name}.{k}: {len(v)} entries for {n} tensors")
        split = None
        if self.tensor_kinds is not None:
            w = list(self.tensor_flops) if self.tensor_flops is not None else [float(math.prod(s))
                                                                              for s in self.tensor_shapes]
            total = sum(w) or 1.0
            by: dict[str, float] = {}
            for k, x in zip(self.tensor_kinds, w):
                by[k] = by.get(k, 0.0) + self.flops_per_sample * x / total
            split = tuple(sorted(by.items()))
        return ModelProfile(self.name, tuple(tuple(s) for s in self.tensor_shapes), self.flops_per_sample,
                            None if self.tensor_flops is None else tuple(self.tensor_flops), self.batch or 32,
                            self.mfu, self.source, kind_flops=split if self.mfu is None else None, efficiency=eff)


class MeasuredCfg(_Strict):
    """A measured compute time with its unit: ``{ seconds, batch }`` (one iteration at that
    batch) or ``{ per_sample_s }``."""
    seconds: float | None = Field(None, gt=0)
    batch: int | None = Field(None, ge=1)
    per_sample_s: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one_unit(self):
        if (self.seconds is None) == (self.per_sample_s is None):
            raise ValueError("give either seconds (with batch) or per_sample_s")
        if self.seconds is not None and self.batch is None:
            raise ValueError("batch: the batch the seconds were measured at is needed with seconds")
        if self.per_sample_s is not None and self.batch is not None:
            raise ValueError("batch: not with per_sample_s")
        return self

    def pair(self) -> tuple[float, int]:
        return (self.seconds, self.batch) if self.seconds is not None else (self.per_sample_s, 1)


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
    convert_gbs: float | None = Field(None, gt=0)
    op_overhead_us: float | None = Field(None, ge=0)
    call_overhead_us: float | None = Field(None, ge=0, description="per coded tensor and exchange, µs")
    cache_speedup: float | None = Field(None, ge=1, description="streaming rate from the cache over "
                                        "a class's rate, for kernels resident in it (measured)")
    segment_overhead_ns: float | None = Field(None, ge=0, description="per bucket a bucketed kernel walks, ns")
    source: str = ""

    def build(self) -> Codec:
        g = lambda x: None if x is None else x * 1e9  # noqa: E731
        us = lambda x: None if x is None else x / 1e6  # noqa: E731
        return Codec(*[g(getattr(self, f"{c}_gbs")) for c in CODEC_CLASSES], us(self.op_overhead_us), self.source,
                     us(self.call_overhead_us), self.cache_speedup,
                     None if self.segment_overhead_ns is None else self.segment_overhead_ns * 1e-9)


LEGACY_CODEC = ("{where}: {tables} — per-compressor codec throughputs are no longer used and were "
                "ignored: the simulator derives every compressor's encode/decode cost from its own op program "
                "on the device profile. A [codec] table may give per-op-class constants instead "
                "(elementwise_gbs, select_gbs, ..., op_overhead_us); `kfsim calibrate` writes them.")


# sections of per-command settings (`kfsim <command> --config FILE`), checked by kfsim.cli.options
COMMAND_SECTIONS = ("scale", "advise", "train", "study", "launch", "testbed", "calibrate", "validate", "compressors")


def _measurement_form(v) -> str:
    return "MeasuredCfg" if isinstance(v, (dict, MeasuredCfg)) else "str" if isinstance(v, str) else "float"


# one branch per input type, so an error reports only the branch the entry is written in
Measurement = Annotated[Union[Annotated[float, Tag("float")], Annotated[str, Tag("str")],
                              Annotated[MeasuredCfg, Tag("MeasuredCfg")]], Discriminator(_measurement_form)]


class ScaleCfg(_Strict):
    """The sweep settings of `kfsim scale` / `kfsim advise` once resolved (flags and file merged)."""
    model: str = "bert-large"
    workers: list[int] = Field(default_factory=lambda: [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], min_length=1)
    compressors: list[str] | None = None
    bucket_mb: float = Field(25.0, gt=0)
    batch_per_worker: int | None = Field(None, ge=1)
    overlap: bool = True
    network: Literal["analytical", "flow"] = "analytical"
    # how the framework hands gradients to the exchange (kfsim.sim.inputs.EXCHANGES): DDP's buckets as
    # backward makes them ready, or one flat buffer after backward (DeepSpeed's fp16 optimizer)
    exchange: Literal["buckets", "flat"] = "buckets"
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
    # model -> measured compute: a table / string with its unit (kfsim.catalog.measured), or a bare
    # number: seconds per iteration at the model's catalog batch (legacy)
    compute_s: dict[str, Measurement] = Field(default_factory=dict)
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
                    warnings.warn(legacy_message("config", legacy), UserWarning, stacklevel=2)
                v = {k: x for k, x in v.items() if not isinstance(x, dict)}
        return v

    @field_validator("compute_s")
    @classmethod
    def _compute(cls, v):
        """Normalised to model -> (seconds, batch measured at; None: the model's catalog batch)."""
        out = {}
        for k, t in v.items():
            if isinstance(t, MeasuredCfg):
                out[k] = t.pair()
            elif isinstance(t, str):
                try:
                    out[k] = measured.parse_compute(t)
                except ValueError as exc:
                    raise ValueError(f"{k!r}: {exc}") from None
            elif not t > 0:
                raise ValueError(f"compute time of {k!r} must be > 0, got {t}")
            else:
                out[k] = (float(t), None)
        return out


def legacy_message(where: str, families) -> str:
    return LEGACY_CODEC.format(where=where, tables=", ".join(f"[codec.{k}]" for k in families))
