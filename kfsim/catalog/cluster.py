"""A cluster: devices, how many per node, the links inside and between nodes.

``nodes × gpus_per_node`` is the cluster's own size; a sweep over workers
grows or shrinks it node by node (p workers use ⌈p / gpus_per_node⌉ nodes).
A *cluster profile* (``kfsim calibrate``) is the same object with measured
links, measured compute time per model, measured codec throughputs and a
named collective, stored in a TOML/YAML file (see :mod:`kfsim.catalog.config`).
"""
from __future__ import annotations

from typing import NamedTuple

from kfsim.catalog.devices import Accelerator
from kfsim.catalog.links import Link


class Topology(NamedTuple):
    """How nodes connect: ``switch`` (one non-blocking switch), ``leaf-spine``
    (nodes_per_leaf nodes under each leaf switch, uplinks oversubscribed by
    ``oversubscription`` : 1; used by the flow-level network model)."""

    kind: str = "switch"
    nodes_per_leaf: int = 16
    oversubscription: float = 1.0
    spines: int | None = None


class Codec(NamedTuple):
    """Measured or assumed encode/decode throughput of one compressor family
    (bytes of fp32 gradient per second; ``gather_decode`` per received byte)."""

    family: str
    encode: float
    decode: float
    gather_decode: float | None = None


class Cluster(NamedTuple):
    name: str
    device: Accelerator
    gpus_per_node: int
    nodes: int
    intra: Link
    inter: Link
    topology: Topology = Topology()
    collective: str = "ring"
    interference: float = 1.0       # λ: backward slowdown while communicating (Agarwal et al. 2022: 1.04–1.1)
    codecs: tuple[Codec, ...] = ()  # overrides of the default codec model
    compute_s: tuple[tuple[str, float], ...] = ()  # measured compute per iteration, per model name
    servers: int | None = None      # dedicated parameter servers (collective "ps"); None = co-located
    gamma: float | None = None      # reduction s/byte; None = 3 / device.mem_bw
    source: str = ""

    @property
    def workers(self) -> int:
        return self.nodes * self.gpus_per_node

    def codec(self, family: str) -> Codec | None:
        for c in self.codecs:
            if c.family == family:
                return c
        return None

    def measured_compute(self, model: str) -> float | None:
        for name, t in self.compute_s:
            if name == model:
                return t
        return None
