"""Topologies and flow-level collective costs.

A :class:`Network` is a set of directed links (capacity in bytes/s) and a
route (list of links) for every host pair. Builders:

* :func:`single_switch` — every host has an up and a down link to one
  non-blocking switch;
* :func:`two_level` — devices reach their node's internal fabric
  (NVLink/PCIe: per-device up/down links), nodes reach a switch through
  ``nics_per_node`` NICs (up/down; default one per node, shared by its devices);
* :func:`leaf_spine` — two-level nodes under leaf switches, each leaf with
  one uplink per spine of capacity nodes_per_leaf·NIC / (oversubscription·spines);
  cross-leaf routes pick a spine by ECMP hash of (src, dst).

Flow-level collective: a ring step is p concurrent flows rank i → i+1 of
equal size; with max-min sharing (:mod:`kfsim.sim.maxmin`) the step's
duration is size × u, u the completion time of unit-size flows (the fluid
model is linear in size). So a ring all-reduce of n bytes costs
2(p−1)·(α + (n/p)·u) + (p−1)/p·nγ — one flow computation per pattern, not per step.
MindSpore's echo ring adds the echo flows i+1 → i. The hierarchical
collective runs its intra-node rings (all nodes at once) and its g inter-node
rings (one per local rank, all at once, sharing the NICs) as two patterns. Several jobs sharing the
network: :func:`shared_step_times` puts all their ring flows on it at once.
"""
from __future__ import annotations

import functools
from typing import NamedTuple, Sequence

import numpy as np

from kfsim.sim.maxmin import completion_times, maxmin_rates


class Network(NamedTuple):
    capacity: np.ndarray                 # (L,) bytes/s
    hosts: int
    route_fn: object                     # (src, dst) -> list of link ids
    latency: float                       # α per message across the fabric (slowest hop)
    name: str = ""

    def flows(self, pairs: Sequence[tuple[int, int]]):
        """CSR (ptr, idx) of the routes of (src, dst) pairs."""
        ptr = [0]
        idx: list[int] = []
        for s, d in pairs:
            if not (0 <= s < self.hosts and 0 <= d < self.hosts):
                raise ValueError(f"flow {s}->{d} outside hosts 0..{self.hosts - 1}")
            idx.extend(self.route_fn(s, d))
            ptr.append(len(idx))
        return np.array(ptr, dtype=np.int64), np.array(idx, dtype=np.int64)

    def rates(self, pairs) -> np.ndarray:
        ptr, idx = self.flows(pairs)
        return maxmin_rates(ptr, idx, self.capacity)

    def unit_time(self, pairs) -> float:
        """Seconds until every flow of unit size (1 byte) has finished."""
        if not pairs:
            return 0.0
        ptr, idx = self.flows(pairs)
        return float(completion_times(ptr, idx, self.capacity, np.ones(len(pairs))).max())


def single_switch(hosts: int, bandwidth: float, latency: float = 0.0) -> Network:
    """Link 2h = host h up, 2h+1 = host h down."""
    _check(hosts, bandwidth)
    cap = np.full(2 * hosts, float(bandwidth))
    return Network(cap, hosts, lambda s, d: [] if s == d else [2 * s, 2 * d + 1], latency, "switch")


def _nics(g: int, nics_per_node: int) -> int:
    k = int(nics_per_node)
    if k < 1:
        raise ValueError(f"nics_per_node must be >= 1, got {nics_per_node}")
    return min(k, g)


def two_level(nodes: int, gpus_per_node: int, intra_bw: float, nic_bw: float,
              intra_latency: float = 0.0, nic_latency: float = 0.0, nics_per_node: int = 1) -> Network:
    """Devices 0..g−1 on node 0, g..2g−1 on node 1, …; node j has k =
    ``nics_per_node`` NICs (up/down), local device l uses NIC ⌊l·k/g⌋, so
    ⌈g/k⌉ devices share the busiest one (k = 1: the whole node shares one)."""
    g = gpus_per_node
    hosts = nodes * g
    _check(hosts, intra_bw, nic_bw)
    k = _nics(g, nics_per_node)
    # links: [dev up (hosts), dev down (hosts), nic up (nodes·k), nic down (nodes·k)]
    cap = np.concatenate([np.full(2 * hosts, float(intra_bw)), np.full(2 * nodes * k, float(nic_bw))])
    up, down, nup, ndown = 0, hosts, 2 * hosts, 2 * hosts + nodes * k

    def nic(h):
        return (h // g) * k + (h % g) * k // g

    def route(s, d):
        if s == d:
            return []
        if s // g == d // g:
            return [up + s, down + d]
        return [up + s, nup + nic(s), ndown + nic(d), down + d]

    lat = nic_latency if nodes > 1 else intra_latency
    return Network(cap, hosts, route, lat, "two-level")


def leaf_spine(nodes: int, gpus_per_node: int, intra_bw: float, nic_bw: float, *, nodes_per_leaf: int = 16,
               oversubscription: float = 1.0, spines: int | None = None, intra_latency: float = 0.0,
               nic_latency: float = 0.0, nics_per_node: int = 1) -> Network:
    g = gpus_per_node
    hosts = nodes * g
    _check(hosts, intra_bw, nic_bw)
    k = _nics(g, nics_per_node)
    if nodes_per_leaf < 1:
        raise ValueError(f"nodes_per_leaf must be >= 1, got {nodes_per_leaf}")
    if not oversubscription >= 1:
        raise ValueError(f"oversubscription must be >= 1, got {oversubscription}")
    leaves = -(-nodes // nodes_per_leaf)
    S = spines or max(1, min(nodes_per_leaf, 8))
    upl = nodes_per_leaf * k * nic_bw / (oversubscription * S)
    cap = np.concatenate([np.full(2 * hosts, float(intra_bw)), np.full(2 * nodes * k, float(nic_bw)),
                          np.full(2 * leaves * S, float(upl))])
    up, down, nup, ndown = 0, hosts, 2 * hosts, 2 * hosts + nodes * k
    lup, ldown = 2 * hosts + 2 * nodes * k, 2 * hosts + 2 * nodes * k + leaves * S

    def nic(h):
        return (h // g) * k + (h % g) * k // g

    def route(s, d):
        if s == d:
            return []
        ns, nd = s // g, d // g
        if ns == nd:
            return [up + s, down + d]
        ls, ld = ns // nodes_per_leaf, nd // nodes_per_leaf
        r = [up + s, nup + nic(s)]
        if ls != ld:
            sp = (s * 7919 + d) % S  # ECMP: a fixed hash of the pair
            r += [lup + ls * S + sp, ldown + ld * S + sp]
        return r + [ndown + nic(d), down + d]

    lat = nic_latency if nodes > 1 else intra_latency
    return Network(cap, hosts, route, lat, f"leaf-spine({oversubscription}:1)")


def from_cluster(cluster, workers: int) -> Network:
    """The cluster's topology sized for ``workers`` devices (⌈p/g⌉ nodes)."""
    g = min(cluster.gpus_per_node, workers)
    nodes = -(-workers // g)
    intra = cluster.intra.bandwidth * cluster.intra.efficiency
    nic = cluster.inter.bandwidth * cluster.inter.efficiency
    k = getattr(cluster, "nics_per_node", 1)
    topo = cluster.topology
    if topo.kind == "switch":
        return two_level(nodes, g, intra, nic, cluster.intra.latency, cluster.inter.latency, k)
    if topo.kind in ("leaf-spine", "fat-tree"):
        return leaf_spine(nodes, g, intra, nic, nodes_per_leaf=topo.nodes_per_leaf,
                          oversubscription=topo.oversubscription, spines=topo.spines,
                          intra_latency=cluster.intra.latency, nic_latency=cluster.inter.latency,
                          nics_per_node=k)
    raise ValueError(f"unknown topology kind {topo.kind!r}; known: switch, leaf-spine, fat-tree")


def ring_pairs(ranks: Sequence[int], echo: bool = False) -> list[tuple[int, int]]:
    """The flows of one ring step over ``ranks`` (in ring order)."""
    p = len(ranks)
    if p < 2:
        return []
    pairs = [(ranks[i], ranks[(i + 1) % p]) for i in range(p)]
    if echo:
        pairs += [(d, s) for s, d in pairs]
    return pairs


def placement(workers: int, hosts: int, kind: str = "packed", seed: int = 0) -> list[int]:
    """Which host each rank runs on: packed (rank i on host i) or random (seeded)."""
    if workers > hosts:
        raise ValueError(f"{workers} workers on {hosts} hosts")
    if kind == "packed":
        return list(range(workers))
    if kind == "random":
        return [int(x) for x in np.random.default_rng(seed).permutation(hosts)[:workers]]
    raise ValueError(f"placement must be 'packed' or 'random', got {kind!r}")


@functools.lru_cache(maxsize=256)
def ring_unit_time(cluster, workers: int, echo: bool = False) -> float:
    """u: seconds per byte of one ring step of ``workers`` ranks on the cluster's network."""
    net = from_cluster(cluster, workers)
    return net.unit_time(ring_pairs(list(range(workers)), echo))


def hierarchical_rings(workers: int, gpus_per_node: int) -> tuple[list[list[int]], list[list[int]]]:
    """Ranks of the two phases of the hierarchical collective (packed ranks):
    one intra-node ring per node, and one inter-node ring per local rank l
    (device l of every node) — the g rings run at once, sharing the NICs."""
    g = max(1, min(gpus_per_node, workers))
    nodes = -(-workers // g)
    intra = [list(range(j * g, min((j + 1) * g, workers))) for j in range(nodes)]
    inter = [[j * g + l for j in range(nodes) if j * g + l < workers] for l in range(g)]
    return intra, inter


def _concurrent_rings(net: Network, rings) -> float:
    pairs = [pq for r in rings for pq in ring_pairs(r)]
    return net.unit_time(pairs) if pairs else 0.0


@functools.lru_cache(maxsize=256)
def hierarchical_unit_times(cluster, workers: int) -> tuple[float, float]:
    """(u₁, u₂): seconds per byte of one step of the intra-node rings (all nodes
    at once) and of the inter-node rings (all g local ranks at once)."""
    net = from_cluster(cluster, workers)
    intra, inter = hierarchical_rings(workers, cluster.gpus_per_node)
    return _concurrent_rings(net, intra), _concurrent_rings(net, inter)


def flow_comm_fn(cluster, collective: str):
    """A ``comm_fn(kind, p, nbytes)`` for :func:`kfsim.sim.exchange_cost.bucket_cost`
    using flow-level ring steps (collectives ``ring``, ``mccl`` and ``hierarchical``)."""
    if collective == "hierarchical":
        return hierarchical_comm_fn(cluster)
    if collective not in ("ring", "mccl"):
        raise ValueError(f"the flow-level network models the ring, mccl and hierarchical collectives, "
                         f"not {collective!r}")
    echo = collective == "mccl"
    return ring_comm_fn(cluster, lambda p: ring_unit_time(cluster, int(p), echo), echo)


def hierarchical_comm_fn(cluster, unit_times=None):
    """comm_fn of the hierarchical collective on the flow-level network:
    all-reduce 2(g−1)(α₁ + (n/g)u₁) + 2(m−1)(α₂ + (n/(gm))u₂) + γ terms,
    all-gather (m−1)(α₂ + msg·u₂) + (g−1)(α₁ + m·msg·u₁) — the closed forms of
    :mod:`kfsim.sim.collectives` with u₁, u₂ measured on the topology."""
    gamma = cluster.gamma if cluster.gamma is not None else 3.0 / cluster.device.mem_bw
    a1, a2 = cluster.intra.latency, cluster.inter.latency
    unit_times = unit_times or (lambda p: hierarchical_unit_times(cluster, int(p)))

    def comm_fn(kind, p, nbytes):
        nbytes = np.asarray(nbytes, dtype=np.float64)
        if p < 2:
            return np.zeros_like(nbytes)
        u1, u2 = unit_times(p)
        g = min(cluster.gpus_per_node, p)
        m = -(-p // g)
        if kind == "allreduce":
            intra = 2 * (g - 1) * (a1 + nbytes / g * u1) + (g - 1) / g * nbytes * gamma
            inter = 2 * (m - 1) * (a2 + nbytes / (g * m) * u2) + (m - 1) / m * nbytes / g * gamma
            return intra + inter
        return (m - 1) * (a2 + nbytes * u2) + (g - 1) * (a1 + m * nbytes * u1)

    return comm_fn


def ring_comm_fn(cluster, unit_time, echo: bool = False):
    """comm_fn from a function p -> u (seconds per byte of one ring step)."""
    gamma = cluster.gamma if cluster.gamma is not None else 3.0 / cluster.device.mem_bw
    hops = 2.0 if echo else 1.0  # mccl waits for the echo: a round trip per step

    def comm_fn(kind, p, nbytes):
        nbytes = np.asarray(nbytes, dtype=np.float64)
        if p < 2:
            return np.zeros_like(nbytes)
        u = unit_time(p)
        g = min(cluster.gpus_per_node, p)
        alpha = cluster.inter.latency if -(-p // g) > 1 else cluster.intra.latency
        if kind == "allreduce":
            return 2 * (p - 1) * (hops * alpha + nbytes / p * u) + (p - 1) / p * nbytes * gamma
        return (p - 1) * (hops * alpha + nbytes * u)

    return comm_fn


def job_placements(cluster, jobs: Sequence[int], kind: str = "packed", seed: int = 0) -> tuple[Network, list]:
    """Hosts of several jobs on one cluster network: ``packed`` (each job on
    consecutive devices), ``interleaved`` (job j's k-th rank on node k, so
    jobs share every NIC), or ``random`` (seeded)."""
    if not jobs or any(w < 1 for w in jobs):
        raise ValueError(f"jobs must be a list of worker counts >= 1, got {list(jobs)}")
    total = int(sum(jobs))
    net = from_cluster(cluster, total)
    g = min(cluster.gpus_per_node, total)
    nodes = -(-total // g)
    if kind == "packed":
        order = list(range(total))
    elif kind == "interleaved":
        order = [n * g + k for k in range(g) for n in range(nodes)][:total]
    elif kind == "random":
        order = [int(x) for x in np.random.default_rng(seed).permutation(nodes * g)[:total]]
    else:
        raise ValueError(f"placement must be packed, interleaved or random, got {kind!r}")
    out, i = [], 0
    for w in jobs:
        out.append(order[i:i + w])
        i += w
    return net, out


def shared_step_times(net: Network, jobs: Sequence[Sequence[int]], echo: bool = False) -> list[float]:
    """Several ring jobs on one network at once: per job, seconds per byte of a
    ring step while all jobs' steps run concurrently (max-min shared)."""
    pairs, owner = [], []
    for j, ranks in enumerate(jobs):
        pp = ring_pairs(list(ranks), echo)
        pairs += pp
        owner += [j] * len(pp)
    if not pairs:
        return [0.0] * len(jobs)
    ptr, idx = net.flows(pairs)
    done = completion_times(ptr, idx, net.capacity, np.ones(len(pairs)))
    owner = np.array(owner)
    return [float(done[owner == j].max()) if np.any(owner == j) else 0.0 for j in range(len(jobs))]


def _check(hosts, *bws):
    if hosts < 1:
        raise ValueError(f"a network needs >= 1 host, got {hosts}")
    for b in bws:
        if not b > 0:
            raise ValueError(f"link bandwidth must be > 0, got {b}")
