"""A cluster: devices, how many per node, the links inside and between nodes.

``nodes × gpus_per_node`` is the cluster's own size; each node reaches the
others through ``nics_per_node`` NICs of the ``inter`` link (default 1: the
node's devices share one NIC); a sweep over workers
grows or shrinks it node by node (p workers use ⌈p / gpus_per_node⌉ nodes).
A *cluster profile* (``kfsim calibrate``) is the same object with measured
links, measured compute time per model, measured codec-kernel constants and a
named collective, stored in a TOML/YAML file (see :mod:`kfsim.catalog.config`).
"""
from __future__ import annotations

from typing import NamedTuple

from kfsim.catalog.devices import Accelerator
from kfsim.catalog.links import Link
from kfsim.catalog.overheads import DEFAULT_INTERFERENCE, Overheads


class Topology(NamedTuple):
    """How nodes connect: ``switch`` (one non-blocking switch), ``leaf-spine``
    (nodes_per_leaf nodes under each leaf switch, uplinks oversubscribed by
    ``oversubscription`` : 1; used by the flow-level network model)."""

    kind: str = "switch"
    nodes_per_leaf: int = 16
    oversubscription: float = 1.0
    spines: int | None = None


class Codec(NamedTuple):
    """Measured codec-kernel constants that override the device profile.

    Per cost class of ``compressors.cost`` (elementwise, reduction, matmul,
    select, gather/scatter, rng, pack): the bytes/s (read + written) one op of
    that class moves — replacing ``device.achievable_bw / device.factor(class)``
    — the per-op overhead in seconds (replacing ``device.launch_s``), and the
    per-call overhead: seconds each coded tensor's codec pays once per
    exchange (the framework's entry into its encode and decode: a Python
    call, a graph launch), 0 unless measured; and the cache speedup: how
    many times faster a kernel resident in the last-level cache streams
    (``kfsim.sim.codec``), replacing ``device.cache_speedup``; and the
    segment overhead: seconds per bucket a bucketed kernel walks, 0 unless measured.
    ``None`` keeps the device's value. No compressor is named: every
    compressor's cost comes from its own op program (``kfsim.sim.codec``)."""

    elementwise: float | None = None
    reduction: float | None = None
    matmul: float | None = None
    select: float | None = None
    gather_scatter: float | None = None
    rng: float | None = None
    pack: float | None = None
    convert: float | None = None
    op_overhead: float | None = None
    source: str = ""
    call_overhead: float | None = None
    cache_speedup: float | None = None   # measured streaming rate from the cache over a class's rate
    segment_overhead: float | None = None   # seconds per bucket a bucketed kernel walks (0 unless measured)

    def rate(self, cls: str) -> float | None:
        """bytes/s of cost class ``cls`` (``"gather/scatter"`` or ``gather_scatter``), or None."""
        return getattr(self, cls.replace("/", "_"))

    @property
    def empty(self) -> bool:
        return (all(v is None for v in self[:len(CODEC_CLASSES) + 1]) and self.call_overhead is None
                and self.cache_speedup is None and self.segment_overhead is None)

    def __call__(self, family: str):  # the old ``cluster.codec(family)`` look-up
        raise TypeError(f"per-compressor codec throughputs (cluster.codec({family!r})) were removed: "
                        "the simulator derives a compressor's codec cost from its op program; "
                        "cluster.codec holds per-op-class constants (cluster.codec.select, ...)")


CODEC_CLASSES = ("elementwise", "reduction", "matmul", "select", "gather_scatter", "rng", "pack", "convert")


class Cluster(NamedTuple):
    name: str
    device: Accelerator
    gpus_per_node: int
    nodes: int
    intra: Link
    inter: Link
    topology: Topology = Topology()
    collective: str = "ring"
    interference: float = DEFAULT_INTERFERENCE  # λ: backward slowdown while communicating (Agarwal et al. 2022: 1.04–1.1)
    codec: Codec = Codec()          # measured codec-kernel constants overriding the device profile
    compute_s: tuple = ()           # measured compute per model: (name, seconds, batch measured at); a
                                    # 2-tuple (name, seconds) is at the model's catalog batch (legacy)
    servers: int | None = None      # dedicated parameter servers (collective "ps"); None = co-located
    gamma: float | None = None      # reduction s/byte; None = 3 / device.mem_bw
    source: str = ""
    nics_per_node: int = 1          # k: inter-node NICs per node, each ``inter``'s bandwidth; 1 = one NIC shared
                                    # by the node's devices, gpus_per_node = one per device (rail-optimised)
    overheads: Overheads = Overheads()  # per collective call / per gradient tensor / per step (overheads.py)
    precision: str = "mixed"        # the run's precision: mixed | fp32 | tf32 | fp16 | bf16 (Accelerator.compute_flops)

    @property
    def workers(self) -> int:
        return self.nodes * self.gpus_per_node

    def measured_compute(self, model: str) -> float | None:
        """The measured seconds of ``model`` (at its entry's batch), or None."""
        for name, t, *_ in self.compute_s:
            if name == model:
                return t
        return None

    def measured_per_sample(self, model: str, catalog_batch: int) -> float | None:
        """Measured compute seconds per sample of ``model``: seconds / the batch they were measured
        at (``catalog_batch`` for a legacy entry without one), or None."""
        for name, t, *batch in self.compute_s:
            if name == model:
                return t / (batch[0] if batch else catalog_batch)
        return None
