"""Closed-form α-β-γ costs of collectives, vectorised over numpy arrays.

Notation (Thakur, Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009):
p ranks, n bytes per rank, α latency per message (s), β = 1/bandwidth
(s/byte), γ reduction cost per byte (s/byte). Every function broadcasts its
arguments like a numpy ufunc, so a sweep over 10⁶ configurations is one call.

    ring all-reduce           2(p−1)α + 2(p−1)/p·nβ + (p−1)/p·nγ
    ring reduce-scatter       (p−1)α + (p−1)/p·nβ + (p−1)/p·nγ
    ring all-gather (m each)  (p−1)α + (p−1)·mβ
    halving-doubling (Rabenseifner)  2·log₂p·α + 2(p−1)/p·nβ + (p−1)/p·nγ
    recursive doubling        log₂p·(α + nβ + nγ)
    binary tree, k chunks     2(log₂p + k − 1)(α + nβ/k)   (k=1: unpipelined)
    double binary tree (NCCL) 2·log₂p·α + 2nβ... (two trees, each half the data,
                              pipelined: the k→∞ limit of the line above)
    parameter server (s servers)   2α + 2·max(1, p/s)·nβ
    hierarchical (g per node, m nodes, k NICs per node, c = ⌈g/k⌉ devices per NIC)
        2[(g−1)α₁ + (g−1)/g·nβ₁] + 2(m−1)α₂ + 2(m−1)/m·(n/g)·max(β₁, c·β₂)
        (the g shards of n/g leave the node through its k NICs at once: with one
        NIC per node, k = 1, the NIC carries 2(m−1)/m·n; only k = g — one NIC per
        device, rail-optimised — gets the (n/g)β₂ term)
    mccl (MindSpore CPU "echo ring"): the ring, but each message is echoed
        back to its sender as acknowledgement, so every step costs a round trip
        and each rank's link carries twice the bytes:
        2(p−1)·(2α + 2(n/p)β)  (all-reduce),  (p−1)·(2α + 2mβ)  (all-gather)

A single rank (p = 1) costs nothing.
"""
from __future__ import annotations

import numpy as np

ArrayLike = "float | np.ndarray"


def _f(*xs):
    return [np.asarray(x, dtype=np.float64) for x in xs]


def _one(p, t):
    """Zero cost where p <= 1 (nothing to exchange)."""
    return np.where(p > 1, t, 0.0)


def _log2(p):
    return np.log2(np.maximum(p, 1.0))


def ring_allreduce(p, n, alpha, beta, gamma=0.0):
    """2(p−1)α + 2(p−1)/p·nβ + (p−1)/p·nγ (Patarasuk & Yuan 2009)."""
    p, n, a, b, g = _f(p, n, alpha, beta, gamma)
    f = (p - 1) / np.maximum(p, 1)
    return _one(p, 2 * (p - 1) * a + 2 * f * n * b + f * n * g)


def ring_reduce_scatter(p, n, alpha, beta, gamma=0.0):
    """(p−1)α + (p−1)/p·nβ + (p−1)/p·nγ; n is the full vector per rank."""
    p, n, a, b, g = _f(p, n, alpha, beta, gamma)
    f = (p - 1) / np.maximum(p, 1)
    return _one(p, (p - 1) * a + f * n * b + f * n * g)


def ring_allgather(p, m, alpha, beta):
    """(p−1)α + (p−1)·mβ; each rank contributes m bytes, receives (p−1)m."""
    p, m, a, b = _f(p, m, alpha, beta)
    return _one(p, (p - 1) * (a + m * b))


def halving_doubling_allreduce(p, n, alpha, beta, gamma=0.0):
    """Rabenseifner: 2·log₂p·α + 2(p−1)/p·nβ + (p−1)/p·nγ (p a power of two;
    other p are charged ⌈log₂p⌉ latency rounds)."""
    p, n, a, b, g = _f(p, n, alpha, beta, gamma)
    f = (p - 1) / np.maximum(p, 1)
    return _one(p, 2 * np.ceil(_log2(p)) * a + 2 * f * n * b + f * n * g)


def recursive_doubling_allreduce(p, n, alpha, beta, gamma=0.0):
    """log₂p·(α + nβ + nγ): best for tiny messages."""
    p, n, a, b, g = _f(p, n, alpha, beta, gamma)
    return _one(p, np.ceil(_log2(p)) * (a + n * b + n * g))


def recursive_doubling_allgather(p, m, alpha, beta):
    """⌈log₂p⌉α + (p−1)·mβ."""
    p, m, a, b = _f(p, m, alpha, beta)
    return _one(p, np.ceil(_log2(p)) * a + (p - 1) * m * b)


def tree_allreduce(p, n, alpha, beta, gamma=0.0, chunks=1):
    """Binary-tree reduce + broadcast in k chunks: 2(⌈log₂p⌉ + k − 1)(α + nβ/k) + nγ."""
    p, n, a, b, g, k = _f(p, n, alpha, beta, gamma, chunks)
    k = np.maximum(k, 1.0)
    return _one(p, 2 * (np.ceil(_log2(p)) + k - 1) * (a + n * b / k) + n * g)


def double_binary_tree_allreduce(p, n, alpha, beta, gamma=0.0):
    """NCCL's double binary tree, pipelined: ≈ 2·⌈log₂p⌉·α + 2nβ + nγ.

    Two complementary trees each carry half the data; with fine pipelining
    every rank sends and receives ≈ n bytes in each of reduce and broadcast.
    """
    p, n, a, b, g = _f(p, n, alpha, beta, gamma)
    return _one(p, 2 * np.ceil(_log2(p)) * a + 2 * n * b + n * g)


def parameter_server(p, n, alpha, beta, servers=None, gamma=0.0):
    """Push + pull through s servers: 2α + 2·max(1, p/s)·nβ (+ p·n/s·γ at the server).

    ``servers=None`` means co-located shards (s = p, every worker serves 1/p
    of the model): 2α + 2(p−1)/p·nβ, the bandwidth of a ring.
    """
    p, n, a, b, g = _f(p, n, alpha, beta, gamma)
    if servers is None:
        f = (p - 1) / np.maximum(p, 1)
        return _one(p, 2 * a + 2 * f * n * b + f * n * g)
    (s,) = _f(servers)
    load = np.maximum(1.0, p / np.maximum(s, 1.0))
    return 2 * a + 2 * load * n * b + p / np.maximum(s, 1.0) * n * g


def parameter_server_gather(p, m, alpha, beta, servers=None):
    """Gather-law exchange through servers: each worker pushes m bytes, the
    servers relay all p payloads back (pull p·m). Dedicated servers' links
    carry p·m/s in and p²·m/s out:  2α + max(m, pm/s)β + max(pm, p²m/s)β.
    Co-located (s = p): 2α + (p−1)/p·(m + p·m)β."""
    p, m, a, b = _f(p, m, alpha, beta)
    if servers is None:
        f = (p - 1) / np.maximum(p, 1)
        return _one(p, 2 * a + f * (m + p * m) * b)
    (s,) = _f(servers)
    s = np.maximum(s, 1.0)
    return 2 * a + np.maximum(m, p * m / s) * b + np.maximum(p * m, p * p * m / s) * b


def nic_share(g, nics=1):
    """c = ⌈g / k⌉: devices of one node sharing its busiest NIC (k clipped to 1..g)."""
    g, k = _f(g, nics)
    g = np.maximum(g, 1.0)
    return np.ceil(g / np.clip(k, 1.0, g))


def hierarchical_allreduce(g, m, n, alpha1, beta1, alpha2, beta2, gamma=0.0, nics=1):
    """Two-level all-reduce (Goyal et al. 2017; Horovod hierarchical):
    reduce-scatter inside each node (g devices), all-reduce of the n/g shard
    across the m nodes — g concurrent rings, one per local rank, sharing the
    node's k NICs (c = ⌈g/k⌉ shards per NIC) —, all-gather inside the node:

        2[(g−1)α₁ + (g−1)/g·nβ₁] + 2(m−1)α₂ + 2(m−1)/m·(n/g)·max(β₁, c·β₂)  (+ γ terms)

    A shard crosses its device link (β₁) and its NIC (c·β₂, shared): the
    slower of the two paces the inter-node phase. k = 1 (one NIC per node,
    the default): the NIC carries 2(m−1)/m·n bytes, as many as a flat ring's.
    """
    g, m, n, a1, b1, a2, b2, gm = _f(g, m, n, alpha1, beta1, alpha2, beta2, gamma)
    c = nic_share(g, nics)
    g = np.maximum(g, 1.0)
    fg = (g - 1) / g
    fm = (m - 1) / np.maximum(m, 1)
    intra = 2 * ((g - 1) * a1 + fg * n * b1) + fg * n * gm
    inter = (2 * (m - 1) * a2 + 2 * fm * (n / g) * np.maximum(b1, c * b2)
             + fm * n / g * gm)
    return intra + inter


def hierarchical_inter_phase(g, m, n, alpha1, beta1, alpha2, beta2, nics=1):
    """The inter-node phase of :func:`hierarchical_allreduce` alone (no γ):
    2(m−1)α₂ + 2(m−1)/m·(n/g)·max(β₁, c·β₂)."""
    g, m, n, a1, b1, a2, b2 = _f(g, m, n, alpha1, beta1, alpha2, beta2)
    c = nic_share(g, nics)
    g = np.maximum(g, 1.0)
    return 2 * (m - 1) * a2 + 2 * (m - 1) / np.maximum(m, 1) * (n / g) * np.maximum(b1, c * b2)


def hierarchical_allgather(g, m, msg, alpha1, beta1, alpha2, beta2, nics=1):
    """Two-level all-gather, inter-node first: g concurrent rings (one per
    local rank) all-gather each rank's msg bytes across the m nodes — c = ⌈g/k⌉
    of them share a NIC —, then a ring all-gather inside the node of the
    m·msg-byte blocks each device now holds:

        (m−1)(α₂ + msg·max(β₁, c·β₂)) + (g−1)(α₁ + m·msg·β₁)

    Every node receives its (m−1)·g·msg foreign bytes exactly once (no
    redundant copies), so T_AG(n/p) is half the bandwidth of
    :func:`hierarchical_allreduce` (n) — an all-reduce is a reduce-scatter
    plus this all-gather.
    """
    g, m, x, a1, b1, a2, b2 = _f(g, m, msg, alpha1, beta1, alpha2, beta2)
    c = nic_share(g, nics)
    inter = (m - 1) * (a2 + x * np.maximum(b1, c * b2))
    intra = (g - 1) * (a1 + m * x * b1)
    return inter + intra


def node_aware_rhd_allreduce(g, m, n, alpha1, beta1, alpha2, beta2, gamma=0.0, nics=1, p=None):
    """Recursive halving-doubling with node-contiguous ranks: the first log₂g
    halving steps stay inside the node, the last log₂m cross it with all g
    devices sending at once through the node's k NICs:

        2⌈log₂p⌉α + 2(g−1)/g·nβ₁ + 2(m−1)/m·(n/g)·max(β₁, c·β₂) + (p−1)/p·nγ

    (α = α₂ once m > 1; c = ⌈g/k⌉)."""
    g, m, n, a1, b1, a2, b2, gm = _f(g, m, n, alpha1, beta1, alpha2, beta2, gamma)
    c = nic_share(g, nics)
    g = np.maximum(g, 1.0)
    p = g * m if p is None else np.asarray(p, dtype=np.float64)
    a = np.where(m > 1, np.maximum(a1, a2), a1)
    lat = 2 * np.ceil(_log2(p)) * a
    bw = 2 * ((g - 1) / g * n * b1 + (m - 1) / np.maximum(m, 1) * (n / g) * np.maximum(b1, c * b2))
    return _one(p, lat + bw + (p - 1) / p * n * gm)


def node_aware_rd_allgather(g, m, msg, alpha1, beta1, alpha2, beta2, nics=1, p=None):
    """Recursive-doubling all-gather, inter-node distances first (so no node
    fetches the same foreign block twice): log₂m steps across nodes, g senders
    per node through its k NICs, then log₂g steps inside the node:

        ⌈log₂p⌉α + (m−1)·msg·max(β₁, c·β₂) + (g−1)·m·msg·β₁
    """
    g, m, x, a1, b1, a2, b2 = _f(g, m, msg, alpha1, beta1, alpha2, beta2)
    c = nic_share(g, nics)
    g = np.maximum(g, 1.0)
    p = g * m if p is None else np.asarray(p, dtype=np.float64)
    a = np.where(m > 1, np.maximum(a1, a2), a1)
    return _one(p, np.ceil(_log2(p)) * a + (m - 1) * x * np.maximum(b1, c * b2) + (g - 1) * m * x * b1)


def node_aware_parameter_server(g, m, n, alpha1, beta1, alpha2, beta2, servers=None, gamma=0.0, nics=1, p=None):
    """Parameter server on a two-level cluster, push then pull.

    Co-located shards (every worker serves 1/p): a worker sends (p−1)/p·n per
    phase through its device link, and each node's g workers push (m−1)/m·n
    each off the node through its k NICs (pull: the same back), so per phase
    max((p−1)/p·nβ₁, c·(m−1)/m·nβ₂):  2α + 2n·max((p−1)/p·β₁, c·(m−1)/m·β₂).
    ``servers`` = s dedicated server hosts (one NIC each): every worker's n
    bytes leave its node (c per NIC), every server takes p·n/s:
    2α + 2·max(c, p/s)·nβ₂ (one node, m = 1: c = 1 and β = β₁ as before)."""
    g, m, n, a1, b1, a2, b2, gm = _f(g, m, n, alpha1, beta1, alpha2, beta2, gamma)
    p, a, c, multi, f, per = _ps_terms(g, m, a1, b1, a2, b2, nics, p)
    if servers is None:
        return _one(p, 2 * a + 2 * n * per + f * n * gm)
    b = np.where(multi, np.maximum(b1, b2), b1)
    (s,) = _f(servers)
    s = np.maximum(s, 1.0)
    load = np.maximum(np.where(multi, c, 1.0), p / s)
    return 2 * a + 2 * load * n * b + p / s * n * gm


def _ps_terms(g, m, a1, b1, a2, b2, nics, p):
    """What both parameter-server forms share: (p, α of the slowest hop, c workers per NIC,
    multi-node mask, (p−1)/p, per-byte time of the co-located busiest link)."""
    c = nic_share(g, nics)
    g = np.maximum(g, 1.0)
    p = g * m if p is None else np.asarray(p, dtype=np.float64)
    multi = m > 1
    a = np.where(multi, np.maximum(a1, a2), a1)
    f = (p - 1) / p
    per = np.maximum(f * b1, np.where(multi, c * (m - 1) / np.maximum(m, 1) * b2, 0.0))
    return p, a, c, multi, f, per


def node_aware_parameter_server_gather(g, m, msg, alpha1, beta1, alpha2, beta2, servers=None, nics=1, p=None):
    """Gather-law exchange through servers on a two-level cluster (push msg,
    pull p·msg). Co-located: 2α + (1 + p)·msg·max((p−1)/p·β₁, c·(m−1)/m·β₂);
    dedicated s servers: 2α + max(c·msg, p·msg/s)β + max(c·p·msg, p²·msg/s)β."""
    g, m, x, a1, b1, a2, b2 = _f(g, m, msg, alpha1, beta1, alpha2, beta2)
    p, a, c, multi, f, per = _ps_terms(g, m, a1, b1, a2, b2, nics, p)
    if servers is None:
        return _one(p, 2 * a + (1 + p) * x * per)
    b = np.where(multi, np.maximum(b1, b2), b1)
    (s,) = _f(servers)
    s = np.maximum(s, 1.0)
    c = np.where(multi, c, 1.0)
    return 2 * a + np.maximum(c * x, p * x / s) * b + np.maximum(c * p * x, p * p * x / s) * b


def mccl_allreduce(p, n, alpha, beta, gamma=0.0):
    """MindSpore CPU echo ring: 2(p−1)·(2α + 2(n/p)β) + (p−1)/p·nγ."""
    p, n, a, b, g = _f(p, n, alpha, beta, gamma)
    f = (p - 1) / np.maximum(p, 1)
    return _one(p, 2 * (p - 1) * (2 * a + 2 * n / np.maximum(p, 1) * b) + f * n * g)


def mccl_allgather(p, m, alpha, beta):
    """MindSpore CPU echo ring all-gather: (p−1)·(2α + 2mβ)."""
    p, m, a, b = _f(p, m, alpha, beta)
    return _one(p, (p - 1) * (2 * a + 2 * m * b))


def pairwise_alltoall(g, m, msg, alpha1, beta1, alpha2, beta2, nics=1, p=None):
    """All-to-all of msg bytes per rank (msg/p to each rank; Thakur et al. 2005's pairwise
    exchange): p−1 steps, α each, every rank's (p−1)/p·msg over its device link and each NIC
    carrying its c = ⌈g/k⌉ devices' off-node parts, c·(p−g)/p·msg:
    (p−1)α + max((p−1)/p·msg·β₁, c·(p−g)/p·msg·β₂), α = α₂ once the job spans nodes.
    Unlike a reduce-scatter nothing is reduced on the way: every foreign byte crosses a NIC."""
    g, m, msg, a1, b1, a2, b2 = _f(g, m, msg, alpha1, beta1, alpha2, beta2)
    p = g * m if p is None else np.asarray(p, dtype=np.float64)
    c = nic_share(g, nics)
    multi = m > 1
    a = np.where(multi, np.maximum(a1, a2), a1)
    pp = np.maximum(p, 1.0)
    dev = (p - 1) / pp * msg * b1
    nic = np.where(multi, c * np.maximum(p - g, 0.0) / pp * msg * b2, 0.0)
    return _one(p, (p - 1) * a + np.maximum(dev, nic))


def bus_bandwidth(alg_bandwidth, p):
    """nccl-tests convention: busbw = algbw × 2(p−1)/p for all-reduce."""
    alg_bandwidth, p = _f(alg_bandwidth, p)
    return alg_bandwidth * 2 * (p - 1) / np.maximum(p, 1)
