"""Bytes actually put on the wire per worker, from interface counters.

Each worker's traffic leaves through ``eth0`` inside its namespace, so
``tx_bytes`` there (Ethernet frames: payload + TCP/IP/Ethernet headers, about
66 bytes per ≤1448-byte segment, i.e. ≈ 4.5 % above the payload for bulk
transfers) is exactly what it sent. Read from outside with
``ip -n NS -s -j link`` or, from a process inside the namespace, from
``/sys/class/net/eth0/statistics`` (sysfs is remounted per namespace by
``ip netns exec``).
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import NamedTuple

from kfsim.testbed.netns import worker_ns

HEADER_BYTES = 66          # Ethernet 14 + IPv4 20 + TCP 32 (timestamps)
MSS = 1448


class Counters(NamedTuple):
    tx_bytes: int
    rx_bytes: int
    tx_packets: int
    rx_packets: int

    def __sub__(self, other: "Counters") -> "Counters":
        return Counters(*(a - b for a, b in zip(self, other)))


def read_ns(ns: str, dev: str = "eth0") -> Counters:
    """Counters of ``dev`` inside namespace ``ns`` (from outside it)."""
    r = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev],
                       capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        raise RuntimeError(f"cannot read counters of {dev} in {ns}: {r.stderr.strip()}")
    st = json.loads(r.stdout)[0]["stats64"]
    return Counters(st["tx"]["bytes"], st["rx"]["bytes"], st["tx"]["packets"], st["rx"]["packets"])


def read_worker(i: int) -> Counters:
    return read_ns(worker_ns(i))


def read_local(dev: str = "eth0") -> Counters:
    """Counters of ``dev`` as seen from the current process (a worker inside its namespace)."""
    base = Path("/sys/class/net") / dev / "statistics"
    v = [int((base / f).read_text()) for f in ("tx_bytes", "rx_bytes", "tx_packets", "rx_packets")]
    return Counters(*v)


def payload_estimate(frame_bytes: float, packets: float) -> float:
    """TCP payload bytes inside ``frame_bytes`` carried by ``packets`` frames."""
    return max(frame_bytes - HEADER_BYTES * packets, 0.0)
