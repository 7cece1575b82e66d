"""Links: per-direction bandwidth (bytes/s), latency per message, efficiency.

``efficiency`` is the fraction of line rate a collective reaches (e.g. NCCL's
ring on H100 NVLink ≈ 370 of 450 GB/s bus bandwidth, NCCL-tests); the
simulator uses β = 1 / (bandwidth · efficiency). Bandwidths and latencies:
the IEEE 802.3 / InfiniBand / NVLink / PCIe line rates and the typical
latencies in the project's catalog notes; efficiencies are stated
assumptions (≈ 0.9 for TCP/RoCE/IB, 0.82 for NVLink as above, 0.8 for PCIe)
that ``kfsim calibrate`` replaces with measured values.
"""
from __future__ import annotations

from typing import NamedTuple


class Link(NamedTuple):
    name: str
    bandwidth: float      # bytes/s per direction (line rate)
    latency: float        # s per message
    efficiency: float = 1.0
    source: str = ""

    @property
    def beta(self) -> float:
        """Seconds per byte at the achievable rate."""
        return 1.0 / (self.bandwidth * self.efficiency)


def gbit(x: float) -> float:
    """Gbit/s → bytes/s."""
    return x * 1e9 / 8


BUILTIN: dict[str, Link] = {
    "1gbe": Link("1gbe", gbit(1), 50e-6, 0.9, "IEEE 802.3 1 GbE; TCP latency ≈ 50 µs"),
    "10gbe": Link("10gbe", gbit(10), 50e-6, 0.9, "IEEE 802.3 10 GbE; TCP latency ≈ 50 µs"),
    "25gbe": Link("25gbe", gbit(25), 50e-6, 0.9, "IEEE 802.3 25 GbE; TCP latency ≈ 50 µs"),
    "25gbe-roce": Link("25gbe-roce", gbit(25), 3e-6, 0.9, "IEEE 802.3 25 GbE with RoCE; 2–5 µs"),
    "40gbe": Link("40gbe", gbit(40), 50e-6, 0.9, "IEEE 802.3 40 GbE; TCP latency ≈ 50 µs"),
    "100gbe": Link("100gbe", gbit(100), 3e-6, 0.9, "100 GbE RoCE; 2–5 µs"),
    "200gbe": Link("200gbe", gbit(200), 3e-6, 0.9, "200 GbE RoCE; 2–5 µs"),
    "400gbe": Link("400gbe", gbit(400), 3e-6, 0.9, "400 GbE RoCE; 2–5 µs"),
    "ib-hdr": Link("ib-hdr", 25e9, 1e-6, 0.9, "InfiniBand HDR 200 Gbit/s; ≈1 µs"),
    "ib-ndr": Link("ib-ndr", 50e9, 1e-6, 0.9, "InfiniBand NDR 400 Gbit/s; ≈1 µs"),
    "nvlink3": Link("nvlink3", 300e9, 7e-6, 0.82, "NVLink 3 per GPU per direction; NCCL intra-node 5–10 µs"),
    "nvlink4": Link("nvlink4", 450e9, 7e-6, 0.82, "NVLink 4 per GPU per direction; NCCL ring ≈370/450 GB/s"),
    "pcie3": Link("pcie3", 15.75e9, 1e-6, 0.8, "PCIe 3.0 ×16 per direction"),
    "pcie4": Link("pcie4", 31.5e9, 1e-6, 0.8, "PCIe 4.0 ×16 per direction"),
    "pcie5": Link("pcie5", 63e9, 1e-6, 0.8, "PCIe 5.0 ×16 per direction"),
}

ALIASES = {"1g": "1gbe", "10g": "10gbe", "25g": "25gbe", "100g": "100gbe", "hdr": "ib-hdr", "ndr": "ib-ndr",
           "ethernet-1g": "1gbe"}
