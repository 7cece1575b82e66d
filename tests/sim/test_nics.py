"""NICs per node and the physical invariants of every collective × topology.

Invariants tested (grid: g ∈ {1, 2, 3, 4, 8} devices per node, m ∈ {1, 2, 3, 4, 16}
nodes, k ∈ {1, 2, g} NICs per node, slow and fast NICs, co-located and dedicated
parameter servers; plus hypothesis over α, β, γ):

I1  flow-level lower bound: T ≥ max(device-link bytes·β₁, node bytes/k·β₂) for any
    all-reduce / all-gather (``algorithms.lower_bound``), and T ≥ the bytes the
    algorithm itself puts through the busiest NIC × β₂ (``algorithms.nic_bytes``,
    itself checked against routed flows on the flow engine's topology).
I2  all-reduce ⊇ all-gather: T_AG(msg = n/p) ≤ T_AR(n) for every collective and every
    α, β, γ ≥ 0 — an all-reduce is a reduce-scatter followed by the all-gather of the
    n/p shards, so the same data all-gathered can never cost more (the hierarchical
    all-gather used to cost 2× its all-reduce on the seed).
I3  equal payloads, bandwidth terms (α = γ = 0), p ≥ 2: T_AG(m) ≥ T_AR(m) for the
    bandwidth-optimal all-reduces (ring, rhd, hierarchical, ps, mccl): an all-gather
    must deliver (p−1)·m foreign bytes to every rank, an optimal all-reduce moves
    2(p−1)/p·m ≤ (p−1)·m. NCCL's tree all-reduce is not bandwidth-optimal (2m), so for
    ``tree`` the all-gather is checked against the all-reduce lower bound instead.
I4  hierarchical never below its inter-node phase, in closed form and on the flow engine,
    and the two agree on a non-blocking switch.
"""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfsim import catalog
from kfsim.catalog import config as cfgmod
from kfsim.sim import algorithms as A
from kfsim.sim import collectives as cf
from kfsim.sim import network as nw

GRID = [(g, m, k) for g in (1, 2, 3, 4, 8) for m in (1, 2, 3, 4, 16) for k in sorted({1, 2, g}) if k <= g]
BETAS = [(1 / 25e9, 8e-9), (1 / 25e9, 1 / 50e9), (1 / 10e9, 1 / 12.5e9)]   # slow NIC, fast NIC, similar
SERVERS = (None, 2)
REL = 1 - 1e-9


def _net(g, k, b1, b2, a1=0.0, a2=0.0, gamma=0.0, servers=None):
    return A.NetParams(a1, b1, a2, b2, g, gamma, servers, k)


def _cases():
    for (g, m, k), (b1, b2), s in itertools.product(GRID, BETAS, SERVERS):
        yield g, m, k, b1, b2, s


@pytest.mark.parametrize("name", A.NAMES)
@pytest.mark.parametrize("kind", A.KINDS)
def test_I1_never_below_flow_lower_bound(name, kind):
    n = 1e8
    for g, m, k, b1, b2, s in _cases():
        p = g * m
        net = _net(g, k, b1, b2, servers=s)
        t = float(A.collective_time(name, kind, p, n, net))
        lb = float(A.lower_bound(kind, p, n, net))
        nic = float(A.nic_bytes(name, kind, p, n, g, k, s)) * b2
        dev = float(A.wire_bytes(name, kind, p, n, g, s)) * b1
        where = (name, kind, g, m, k, b1, b2, s)
        assert t >= lb * REL, where
        assert t >= nic * REL, where
        assert t >= dev * REL, where


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(A.NAMES), g=st.integers(1, 8), m=st.integers(1, 32), k=st.integers(1, 8),
       a1=st.floats(0, 1e-4), a2=st.floats(0, 1e-3), b1=st.floats(1e-12, 1e-8), b2=st.floats(1e-12, 1e-7),
       gamma=st.floats(0, 1e-9), n=st.floats(1.0, 1e10), s=st.sampled_from(SERVERS))
def test_I1_I2_random(name, g, m, k, a1, a2, b1, b2, gamma, n, s):
    k = min(k, g)
    p = g * m
    net = _net(g, k, b1, b2, a1, a2, gamma, s)
    ar = float(A.allreduce(name, p, n, net))
    ag = float(A.allgather(name, p, n / p, net))
    assert ar >= float(A.lower_bound("allreduce", p, n, net)) * REL
    assert ag >= float(A.lower_bound("allgather", p, n / p, net)) * REL
    assert ag <= ar / REL                                      # I2: all-reduce = reduce-scatter + all-gather


@pytest.mark.parametrize("name", A.NAMES)
def test_I2_allgather_of_shards_never_above_allreduce(name):
    n = 3e7
    for g, m, k, b1, b2, s in _cases():
        p = g * m
        net = _net(g, k, b1, b2, a1=2e-6, a2=5e-5, gamma=1e-11, servers=s)
        assert float(A.allgather(name, p, n / p, net)) <= float(A.allreduce(name, p, n, net)) / REL, \
            (name, g, m, k, s)


@pytest.mark.parametrize("name", A.NAMES)
def test_I3_equal_payload_allgather_never_cheaper(name):
    msg = 1e6
    for g, m, k, b1, b2, s in _cases():
        p = g * m
        if p < 2:
            continue
        net = _net(g, k, b1, b2, servers=s)
        ag = float(A.allgather(name, p, msg, net))
        ref = A.lower_bound("allreduce", p, msg, net) if name == "tree" else A.allreduce(name, p, msg, net)
        assert ag >= float(ref) * REL, (name, g, m, k, s)


def test_I4_hierarchical_never_below_inter_phase():
    n = 1e8
    for g, m, k, b1, b2, _ in _cases():
        args = (g, m, n, 1e-6, b1, 5e-5, b2)
        inter = cf.hierarchical_inter_phase(*args, nics=k)
        assert cf.hierarchical_allreduce(*args, 1e-11, nics=k) >= inter * REL
        # the inter phase itself carries 2(m−1)/m·n/k of the node's bytes at least
        assert inter >= 2 * (m - 1) / m * n / k * b2 * REL


def test_hierarchical_charges_the_shared_nic_on_the_seed():
    """The issue: 4 nodes x 4 RTX 3090, BERT-large fp32 gradients, 1 Gbit/s at line rate."""
    cl = catalog.seed_cluster()
    cl = cl._replace(inter=cl.inter._replace(efficiency=1.0, latency=0.0), intra=cl.intra._replace(latency=0.0),
                     gamma=0.0)
    n = 4 * catalog.get_model("bert-large").params
    net = A.net_params(cl)
    inter = 2 * 3 / 4 * n * cl.inter.beta
    hier = float(A.allreduce("hierarchical", 16, n, net))
    assert hier == pytest.approx(inter + 2 * 3 / 4 * n * cl.intra.beta)
    assert float(A.allgather("hierarchical", 16, n / 16, net)) < hier
    # the flow engine (one NIC per node) agrees
    fn = nw.flow_comm_fn(cl, "hierarchical")
    assert float(fn("allreduce", 16, np.array(n))) == pytest.approx(hier, rel=1e-6)
    # rail-optimised nodes (one NIC per device) get the n/g term
    rail = cl._replace(nics_per_node=4)
    assert float(A.allreduce("hierarchical", 16, n, A.net_params(rail))) == pytest.approx(
        inter / 4 + 2 * 3 / 4 * n * cl.intra.beta)
    assert float(nw.flow_comm_fn(rail, "hierarchical")("allreduce", 16, np.array(n))) == pytest.approx(
        float(A.allreduce("hierarchical", 16, n, A.net_params(rail))), rel=1e-6)


def _cluster(g, nodes, k, kind="switch"):
    base = catalog.make_cluster("rtx3090", g, nodes, "pcie4", "10gbe")
    return base._replace(nics_per_node=k, topology=catalog.Topology(kind, nodes_per_leaf=2, oversubscription=2.0),
                         gamma=0.0, inter=base.inter._replace(latency=0.0), intra=base.intra._replace(latency=0.0))


@pytest.mark.parametrize("g,m,k", [(4, 4, 1), (4, 4, 2), (4, 4, 4), (3, 4, 2), (8, 2, 1), (2, 8, 2), (4, 1, 1)])
def test_flow_engine_nics_match_closed_forms_and_bounds(g, m, k):
    cl = _cluster(g, m, k)
    p, n = g * m, 1e8
    net = A.net_params(cl)
    hier = nw.flow_comm_fn(cl, "hierarchical")
    ring = nw.flow_comm_fn(cl, "ring")
    for kind, x in (("allreduce", n), ("allgather", n / p)):
        closed = float(A.collective_time("hierarchical", kind, p, x, net))
        assert float(hier(kind, p, np.array(x))) == pytest.approx(closed, rel=1e-6), kind
        assert float(ring(kind, p, np.array(x))) == pytest.approx(
            float(A.collective_time("ring", kind, p, x, net)), rel=1e-6), kind
        for fn in (hier, ring):
            assert float(fn(kind, p, np.array(x))) >= float(A.lower_bound(kind, p, x, net)) * REL
    # nic_bytes against routed flows: bytes through every NIC link of the pattern
    topo = nw.from_cluster(cl, p)
    nic_links = np.arange(2 * p, len(topo.capacity))

    def busiest(rings, per_step, steps):
        load = np.zeros(len(topo.capacity))
        for r in rings:
            for s, d in nw.ring_pairs(r):
                load[topo.route_fn(s, d)] += per_step * steps
        return load[nic_links].max() if len(nic_links) else 0.0

    assert busiest([list(range(p))], n / p, 2 * (p - 1)) == pytest.approx(
        float(A.nic_bytes("ring", "allreduce", p, n, g, k)))
    _, inter = nw.hierarchical_rings(p, g)
    assert busiest(inter, n / p, 2 * (m - 1)) == pytest.approx(
        float(A.nic_bytes("hierarchical", "allreduce", p, n, g, k)))


def test_flow_leaf_spine_hierarchical_never_below_inter_phase_or_bound():
    cl = _cluster(4, 8, 1, "leaf-spine")
    p, n = 32, 1e8
    u1, u2 = nw.hierarchical_unit_times(cl, p)
    inter = 2 * 7 * (n / 32) * u2
    t = float(nw.flow_comm_fn(cl, "hierarchical")("allreduce", p, np.array(n)))
    assert t >= inter and t >= float(A.lower_bound("allreduce", p, n, A.net_params(cl))) * REL
    # oversubscribed uplinks are slower than the switch
    assert t > float(nw.flow_comm_fn(_cluster(4, 8, 1), "hierarchical")("allreduce", p, np.array(n)))


def test_more_nics_never_slower():
    n = 1e8
    for name, kind in itertools.product(A.NAMES, A.KINDS):
        for g, m in ((4, 4), (8, 2), (8, 16)):
            ts = [float(A.collective_time(name, kind, g * m, n, _net(g, k, 1 / 25e9, 8e-9))) for k in range(1, g + 1)]
            assert all(b <= a / REL for a, b in zip(ts, ts[1:])), (name, kind, g, m, ts)


def test_wire_bytes_formulas():
    p, n, g = 16, 1000.0, 4
    assert A.wire_bytes("ring", "allreduce", p, n, g) == pytest.approx(2 * 15 / 16 * n)
    assert A.wire_bytes("rhd", "allreduce", p, n, g) == pytest.approx(2 * 15 / 16 * n)
    assert A.wire_bytes("tree", "allreduce", p, n, g) == pytest.approx(2 * n)
    # hierarchical: intra 2(g−1)/g·n + inter 2(m−1)/m·n/g — the same total as the ring, fewer bytes on the NIC
    assert A.wire_bytes("hierarchical", "allreduce", p, n, g) == pytest.approx(2 * 3 / 4 * n + 2 * 3 / 4 * n / 4)
    assert A.wire_bytes("mccl", "allreduce", p, n, g) == pytest.approx(2 * A.wire_bytes("ring", "allreduce", p, n))
    assert A.wire_bytes("ps", "allreduce", p, n, g, servers=2) == n
    for name in A.NAMES:
        assert A.wire_bytes(name, "allgather", 1, n, g) == 0.0
    assert A.wire_bytes("ring", "allgather", p, n, g) == A.wire_bytes("hierarchical", "allgather", p, n, g) == 15 * n


def test_config_nics_per_node_round_trip(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[cluster]\nnodes = 2\ngpus_per_node = 8\nnics_per_node = 8\ncollective = "hierarchical"\n')
    cl = cfgmod.load_cluster(f)
    assert cl.nics_per_node == 8 and A.net_params(cl).nics_per_node == 8
    out = cfgmod.dump_profile(cl, tmp_path / "p.toml")
    assert cfgmod.load_cluster(out).nics_per_node == 8
    assert catalog.seed_cluster().nics_per_node == 1
    f.write_text('[cluster]\ngpus_per_node = 4\nnics_per_node = 8\n')
    with pytest.raises(ValueError, match="cluster.nics_per_node"):
        cfgmod.load_cluster(f)


def test_breakdown_payload_vs_wire_bytes():
    from kfsim.sim.predict import payload_bytes, predict_iteration
    seed = catalog.seed_cluster()
    dense = 4 * catalog.get_model("resnet-18").params
    b2, b1024 = (predict_iteration("resnet-18", seed, "none", p) for p in (2, 1024))
    assert b2.bytes_per_worker == b1024.bytes_per_worker == pytest.approx(dense) == payload_bytes("resnet-18", "none")
    assert b2.wire_bytes_per_worker == pytest.approx(2 * 1 / 2 * dense)
    assert b1024.wire_bytes_per_worker == pytest.approx(2 * 1023 / 1024 * dense)
    h = predict_iteration("resnet-18", seed, "none", 16, collective="hierarchical")
    assert h.wire_bytes_per_worker == pytest.approx((2 * 3 / 4 + 2 * 3 / 4 / 4) * dense)
    m = predict_iteration("resnet-18", seed, "none", 16, collective="mccl")
    assert m.wire_bytes_per_worker == pytest.approx(2 * 2 * 15 / 16 * dense)
    # an all-gather compressor: (p−1) × its payload
    tk = predict_iteration("resnet-18", seed, "topk(ratio=0.01)", 16)
    assert tk.wire_bytes_per_worker == pytest.approx(15 * tk.bytes_per_worker)
    assert predict_iteration("resnet-18", seed, "none", 1).wire_bytes_per_worker == 0.0


def test_flow_network_runs_hierarchical_predictions():
    from kfsim.sim.predict import predict_iteration
    cl = catalog.seed_cluster()
    a = predict_iteration("resnet-50", cl, "none", 16, collective="hierarchical", overlap=False)
    f = predict_iteration("resnet-50", cl, "none", 16, collective="hierarchical", overlap=False, network="flow")
    assert f.total_s == pytest.approx(a.total_s, rel=1e-3)
    rail = cl._replace(nics_per_node=4)
    assert predict_iteration("resnet-50", rail, "none", 16, collective="hierarchical").total_s < a.total_s
