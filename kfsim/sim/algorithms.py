"""Named collectives on a two-level cluster (g devices per node, m nodes).

Maps a collective name to its all-reduce and all-gather cost, choosing the
α/β of the link each phase crosses. Flat algorithms (ring, tree, mccl)
are limited by their slowest hop: once the job spans several nodes every
ring step crosses a NIC, so α = α_inter, β = β_inter. Names:

* ``ring``: ring all-reduce / ring all-gather (NCCL, Gloo, Horovod)
* ``tree``: NCCL double binary tree (pipelined), recursive-doubling all-gather
* ``rhd``: recursive halving-doubling (Rabenseifner); with node-contiguous
  ranks the first log₂g steps stay inside the node and the last log₂m steps
  share the NIC among g senders: 2⌈log₂p⌉α + 2[(g−1)/g·nβ₁ + (m−1)/m·nβ₂]
* ``hierarchical``: intra-node reduce-scatter, inter-node ring all-reduce of
  the shard, intra-node all-gather
* ``ps``: parameter server (co-located shards, or ``servers`` dedicated ones)
* ``mccl``: MindSpore's CPU collective, a ring whose every message is echoed
  back to its sender (2× bytes per rank, a round trip per step)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kfsim.sim import collectives as cf


class NetParams(NamedTuple):
    """α/β of the two levels (arrays broadcast), devices per node, γ, servers."""

    alpha_intra: object
    beta_intra: object
    alpha_inter: object
    beta_inter: object
    gpus_per_node: object
    gamma: object = 0.0
    servers: int | None = None


NAMES = ("ring", "tree", "rhd", "hierarchical", "ps", "mccl")


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


def allreduce(name: str, p, n, net: NetParams):
    """Seconds to all-reduce n bytes per rank over p ranks."""
    p, g, m, a, b = _levels(p, net)
    gm = net.gamma
    if name == "ring":
        return cf.ring_allreduce(p, n, a, b, gm)
    if name == "tree":
        return cf.double_binary_tree_allreduce(p, n, a, b, gm)
    if name == "rhd":
        n = np.asarray(n, dtype=np.float64)
        lat = 2 * np.ceil(np.log2(np.maximum(p, 1))) * a
        bw = 2 * ((g - 1) / g * n * net.beta_intra + (m - 1) / m * n * np.asarray(net.beta_inter))
        return np.where(p > 1, lat + bw + (p - 1) / p * n * gm, 0.0)
    if name == "hierarchical":
        return cf.hierarchical_allreduce(g, m, n, net.alpha_intra, net.beta_intra,
                                         net.alpha_inter, net.beta_inter, gm)
    if name == "ps":
        return cf.parameter_server(p, n, a, b, net.servers, gm)
    if name == "mccl":
        return cf.mccl_allreduce(p, n, a, b, gm)
    check_name(name)


def allgather(name: str, p, m_bytes, net: NetParams):
    """Seconds to all-gather m bytes contributed by each of p ranks."""
    p, g, m, a, b = _levels(p, net)
    if name == "ring":
        return cf.ring_allgather(p, m_bytes, a, b)
    if name in ("tree", "rhd"):
        return cf.recursive_doubling_allgather(p, m_bytes, a, b)
    if name == "hierarchical":
        return cf.hierarchical_allgather(g, m, m_bytes, net.alpha_intra, net.beta_intra,
                                         net.alpha_inter, net.beta_inter)
    if name == "ps":
        return cf.parameter_server_gather(p, m_bytes, a, b, net.servers)
    if name == "mccl":
        return cf.mccl_allgather(p, m_bytes, a, b)
    check_name(name)


def net_params(cluster) -> NetParams:
    """NetParams of a :class:`~kfsim.catalog.cluster.Cluster`."""
    gamma = cluster.gamma if cluster.gamma is not None else 3.0 / cluster.device.mem_bw
    return NetParams(cluster.intra.latency, cluster.intra.beta, cluster.inter.latency, cluster.inter.beta,
                     cluster.gpus_per_node, gamma, cluster.servers)
