"""Named collectives on a two-level cluster (g devices per node, m nodes, k NICs per node).

Maps a collective name to its all-reduce and all-gather cost, choosing the
α/β of the link each phase crosses, and to the bytes it puts on the wire
(:func:`wire_bytes`, per worker; :func:`nic_bytes`, through the busiest NIC).
Flat algorithms (ring, tree, mccl) are limited by their slowest hop: once the
job spans several nodes every ring step crosses a NIC, so α = α_inter,
β = max(β_inter, β_intra). Node-aware algorithms (rhd, hierarchical, ps) send
from all g devices of a node at once through its k NICs (``nics_per_node``,
default 1: one NIC shared by the node; k = g: one NIC per device, rail-
optimised), so c = ⌈g/k⌉ device streams share each NIC. Names:

* ``ring``: ring all-reduce / ring all-gather (NCCL, Gloo, Horovod)
* ``tree``: NCCL double binary tree (pipelined); all-gather by recursive
  doubling, inter-node distances first
* ``rhd``: recursive halving-doubling (Rabenseifner) with node-contiguous
  ranks: 2⌈log₂p⌉α + 2[(g−1)/g·nβ₁ + (m−1)/m·(n/g)·max(β₁, cβ₂)]
* ``hierarchical``: intra-node reduce-scatter, inter-node ring all-reduce of
  the n/g shard (g concurrent rings, c per NIC), intra-node all-gather
* ``ps``: parameter server (co-located shards, or ``servers`` dedicated ones)
* ``mccl``: MindSpore's CPU collective, a ring whose every message is echoed
  back to its sender (2× bytes per rank, a round trip per step)

All-to-all (SCATTER rounds, :func:`alltoall`) is the pairwise exchange for
every name but ``mccl``, whose lowering (MindSpore's AlltoAll is Ascend-only)
is an all-gather of the whole payload: per worker (p−1)/p·msg on the wire,
c·(p−g)/p·msg through each NIC (``mccl``: its all-gather's).

Bytes (per worker, per call; n bytes all-reduced, msg bytes contributed to an
all-gather; the larger of sent and received, equal for all but the dedicated
parameter server's gather):

    ============  ===============================  ======================
    collective    all-reduce                       all-gather
    ============  ===============================  ======================
    ring, rhd     2(p−1)/p·n                       (p−1)·msg
    tree          2n (two pipelined trees)         (p−1)·msg
    hierarchical  2(g−1)/g·n + 2(m−1)/m·n/g        (m−1)·msg + (g−1)·m·msg
    ps            2(p−1)/p·n (co-located), n       (p−1)/p·(1+p)·msg, p·msg
    mccl          4(p−1)/p·n (echo ring, 2×)       2(p−1)·msg
    ============  ===============================  ======================
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kfsim.sim import collectives as cf


class NetParams(NamedTuple):
    """α/β of the two levels (arrays broadcast), devices per node, γ, servers, NICs per node."""

    alpha_intra: object
    beta_intra: object
    alpha_inter: object
    beta_inter: object
    gpus_per_node: object
    gamma: object = 0.0
    servers: int | None = None
    nics_per_node: object = 1


NAMES = ("ring", "tree", "rhd", "hierarchical", "ps", "mccl")
KINDS = ("allreduce", "allgather", "alltoall")


def check_name(name: str) -> str:
    if name not in NAMES:
        raise ValueError(f"unknown collective {name!r}; known: {', '.join(NAMES)}")
    return name


def _levels(p, net: NetParams):
    p = np.asarray(p, dtype=np.float64)
    g = np.minimum(np.asarray(net.gpus_per_node, dtype=np.float64), p)
    m = np.ceil(p / np.maximum(g, 1))
    multi = m > 1
    a = np.where(multi, np.maximum(net.alpha_inter, net.alpha_intra), net.alpha_intra)
    b = np.where(multi, np.maximum(net.beta_inter, net.beta_intra), net.beta_intra)
    return p, g, m, a, b


def _two(net: NetParams):
    return net.alpha_intra, net.beta_intra, net.alpha_inter, net.beta_inter


def allreduce(name: str, p, n, net: NetParams):
    """Seconds to all-reduce n bytes per rank over p ranks."""
    p, g, m, a, b = _levels(p, net)
    gm, k = net.gamma, net.nics_per_node
    if name == "ring":
        return cf.ring_allreduce(p, n, a, b, gm)
    if name == "tree":
        return cf.double_binary_tree_allreduce(p, n, a, b, gm)
    if name == "rhd":
        return cf.node_aware_rhd_allreduce(g, m, n, *_two(net), gm, nics=k, p=p)
    if name == "hierarchical":
        return cf.hierarchical_allreduce(g, m, n, *_two(net), gm, nics=k)
    if name == "ps":
        return cf.node_aware_parameter_server(g, m, n, *_two(net), net.servers, gm, nics=k, p=p)
    if name == "mccl":
        return cf.mccl_allreduce(p, n, a, b, gm)
    check_name(name)


def allgather(name: str, p, m_bytes, net: NetParams):
    """Seconds to all-gather m bytes contributed by each of p ranks."""
    p, g, m, a, b = _levels(p, net)
    k = net.nics_per_node
    if name == "ring":
        return cf.ring_allgather(p, m_bytes, a, b)
    if name in ("tree", "rhd"):
        return cf.node_aware_rd_allgather(g, m, m_bytes, *_two(net), nics=k, p=p)
    if name == "hierarchical":
        return cf.hierarchical_allgather(g, m, m_bytes, *_two(net), nics=k)
    if name == "ps":
        return cf.node_aware_parameter_server_gather(g, m, m_bytes, *_two(net), net.servers, nics=k, p=p)
    if name == "mccl":
        return cf.mccl_allgather(p, m_bytes, a, b)
    check_name(name)


def alltoall(name: str, p, m_bytes, net: NetParams):
    """Seconds for an all-to-all of m bytes per rank (m/p to each rank) over p ranks."""
    p, g, m, a, b = _levels(p, net)
    if check_name(name) == "mccl":
        return cf.mccl_allgather(p, m_bytes, a, b)
    return cf.pairwise_alltoall(g, m, m_bytes, *_two(net), nics=net.nics_per_node, p=p)


def collective_time(name: str, kind: str, p, nbytes, net: NetParams):
    """:func:`allreduce`, :func:`allgather` or :func:`alltoall` by ``kind``."""
    if kind == "allreduce":
        return allreduce(name, p, nbytes, net)
    if kind == "allgather":
        return allgather(name, p, nbytes, net)
    if kind == "alltoall":
        return alltoall(name, p, nbytes, net)
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def wire_bytes(name: str, kind: str, p, nbytes, gpus_per_node=1, servers: int | None = None):
    """Bytes one worker puts on the wire for one call (the larger of sent and
    received), next to the time formulas: ``nbytes`` is n (all-reduce: bytes
    per rank) or msg (all-gather: bytes each rank contributes). 0 where p = 1."""
    check_name(name)
    p = np.asarray(p, dtype=np.float64)
    x = np.asarray(nbytes, dtype=np.float64)
    g = np.maximum(np.minimum(np.asarray(gpus_per_node, dtype=np.float64), p), 1.0)
    m = np.ceil(p / g)
    f = (p - 1) / np.maximum(p, 1.0)
    if kind == "allreduce":
        if name in ("ring", "rhd"):
            w = 2 * f * x
        elif name == "tree":
            w = 2 * x
        elif name == "hierarchical":
            w = 2 * (g - 1) / g * x + 2 * (m - 1) / m * x / g
        elif name == "ps":
            w = 2 * f * x if servers is None else x
        else:  # mccl: every message echoed back
            w = 4 * f * x
    elif kind == "allgather":
        if name in ("ring", "tree", "rhd"):
            w = (p - 1) * x
        elif name == "hierarchical":
            w = (m - 1) * x + (g - 1) * m * x
        elif name == "ps":
            w = f * (1 + p) * x if servers is None else p * x
        else:
            w = 2 * (p - 1) * x
    elif kind == "alltoall":
        w = 2 * (p - 1) * x if name == "mccl" else f * x
    else:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return np.where(p > 1, w, 0.0)


def nic_bytes(name: str, kind: str, p, nbytes, gpus_per_node=1, nics_per_node=1, servers: int | None = None):
    """Bytes through the busiest NIC for one call (packed ranks, node-contiguous),
    summed over the collective's sequential phases, each at its busier
    direction — so T ≥ nic_bytes · β_inter. 0 on one node."""
    check_name(name)
    p = np.asarray(p, dtype=np.float64)
    x = np.asarray(nbytes, dtype=np.float64)
    g = np.maximum(np.minimum(np.asarray(gpus_per_node, dtype=np.float64), p), 1.0)
    m = np.ceil(p / g)
    c = cf.nic_share(g, nics_per_node)
    k = g / c                                     # effective NICs in use (≤ k)
    fm = (m - 1) / m
    f = (p - 1) / np.maximum(p, 1.0)
    if kind == "allreduce":
        w = {"ring": 2 * f * x,                   # one crossing flow per ring step
             "tree": 2 * x / k,                   # ≈ n up + n down per node, one tree per NIC
             "rhd": c * 2 * fm * x / g,
             "hierarchical": c * 2 * fm * x / g,
             "ps": c * 2 * fm * x if servers is None else c * 2 * x,
             "mccl": 4 * f * x}[name]             # data and echo share the up link
    elif kind == "allgather":
        w = {"ring": (p - 1) * x,
             "tree": c * (m - 1) * x,
             "rhd": c * (m - 1) * x,
             "hierarchical": c * (m - 1) * x,
             "ps": c * fm * (1 + p) * x if servers is None else c * (1 + p) * x,
             "mccl": 2 * (p - 1) * x}[name]
    elif kind == "alltoall":
        w = 2 * (p - 1) * x if name == "mccl" else c * (p - g) / np.maximum(p, 1.0) * x
    else:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return np.where(m > 1, w, 0.0)


def lower_bound(kind: str, p, nbytes, net: NetParams):
    """Flow-level lower bound of any algorithm (α = γ = 0), full nodes:
    the bytes that must cross the busiest link divided by its bandwidth.

    all-reduce: every rank must send ≥ 2(p−1)/p·n over its device link, every
    node ≥ 2(m−1)/m·n over its k NICs (a node is one process of an m-process
    all-reduce; Patarasuk & Yuan 2009); all-gather: every rank receives
    (p−1)·msg, every node (m−1)·g·msg foreign bytes through its k NICs;
    all-to-all: every rank sends (p−1)/p·msg, every node its g ranks' off-node
    parts, g·(p−g)/p·msg, through its k NICs."""
    p = np.asarray(p, dtype=np.float64)
    x = np.asarray(nbytes, dtype=np.float64)
    g = np.maximum(np.minimum(np.asarray(net.gpus_per_node, dtype=np.float64), p), 1.0)
    m = np.ceil(p / g)
    k = np.clip(np.asarray(net.nics_per_node, dtype=np.float64), 1.0, g)
    b1, b2 = np.asarray(net.beta_intra, dtype=np.float64), np.asarray(net.beta_inter, dtype=np.float64)
    if kind == "allreduce":
        dev, nic = 2 * (p - 1) / p * x, 2 * (m - 1) / m * x / k
    elif kind == "allgather":
        dev, nic = (p - 1) * x, (m - 1) * g * x / k
    elif kind == "alltoall":
        dev, nic = (p - 1) / p * x, g * (p - g) / p * x / k
    else:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    # one node: the device links only (β₁); several: a device link may be the slower hop too
    return np.where(p > 1, np.maximum(dev * b1, nic * b2), 0.0)


def net_params(cluster) -> NetParams:
    """NetParams of a :class:`~kfsim.catalog.cluster.Cluster`."""
    gamma = cluster.gamma if cluster.gamma is not None else 3.0 / cluster.device.mem_bw
    return NetParams(cluster.intra.latency, cluster.intra.beta, cluster.inter.latency, cluster.inter.beta,
                     cluster.gpus_per_node, gamma, cluster.servers, getattr(cluster, "nics_per_node", 1))
