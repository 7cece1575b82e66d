"""Closed forms against hand-computed values (collectives.md)."""
import numpy as np
import pytest

from kfsim.sim import collectives as cf
from kfsim.sim import algorithms


def test_ring_allreduce_hand_value():
    # 2·3·1e-3 + 2·(3/4)·1000·1e-6 + (3/4)·1000·1e-7
    assert cf.ring_allreduce(4, 1000, 1e-3, 1e-6, 1e-7) == pytest.approx(0.006 + 0.0015 + 0.000075)


def test_reduce_scatter_plus_allgather_is_allreduce():
    p, n, a, b = 8, 8e6, 5e-6, 1e-9
    rs = cf.ring_reduce_scatter(p, n, a, b)
    ag = cf.ring_allgather(p, n / p, a, b)
    assert rs + ag == pytest.approx(cf.ring_allreduce(p, n, a, b))


def test_allgather_hand_value():
    assert cf.ring_allgather(4, 100, 1e-3, 1e-6) == pytest.approx(3 * (1e-3 + 1e-4))


def test_halving_doubling_and_recursive_doubling():
    assert cf.halving_doubling_allreduce(8, 800, 1e-3, 1e-6) == pytest.approx(0.006 + 2 * 7 / 8 * 800e-6)
    assert cf.recursive_doubling_allreduce(8, 800, 1e-3, 1e-6) == pytest.approx(3 * (1e-3 + 800e-6))


def test_tree_pipelined_tends_to_double_binary_tree():
    p, n, a, b = 64, 1e8, 0.0, 1e-9
    assert cf.tree_allreduce(p, n, a, b, chunks=1) == pytest.approx(2 * 6 * n * b)
    assert cf.tree_allreduce(p, n, a, b, chunks=10**6) == pytest.approx(cf.double_binary_tree_allreduce(p, n, a, b),
                                                                        rel=1e-4)


def test_parameter_server_hand_values():
    assert cf.parameter_server(8, 1000, 1e-3, 1e-6, servers=2) == pytest.approx(2e-3 + 2 * 4 * 1e-3)
    assert cf.parameter_server(8, 1000, 1e-3, 1e-6, servers=16) == pytest.approx(2e-3 + 2 * 1e-3)
    assert cf.parameter_server(8, 1000, 1e-3, 1e-6) == pytest.approx(2e-3 + 2 * 7 / 8 * 1e-3)


def test_hierarchical_hand_value():
    # one NIC per node (default): the node's 4 shards of 250 B share it, 2·(1/2)·1000 B cross it
    got = cf.hierarchical_allreduce(4, 2, 1000, 1e-6, 1e-9, 1e-3, 1e-6)
    assert got == pytest.approx(2 * (3e-6 + 0.75 * 1000e-9) + 2e-3 + 2 * 0.5 * 1000e-6)
    # one NIC per device (rail-optimised, k = g): each NIC carries one 250 B shard
    got = cf.hierarchical_allreduce(4, 2, 1000, 1e-6, 1e-9, 1e-3, 1e-6, nics=4)
    assert got == pytest.approx(2 * (3e-6 + 0.75 * 1000e-9) + 2e-3 + 2 * 0.5 * 250e-6)
    # two NICs: two shards per NIC
    got = cf.hierarchical_allreduce(4, 2, 1000, 1e-6, 1e-9, 1e-3, 1e-6, nics=2)
    assert got == pytest.approx(2 * (3e-6 + 0.75 * 1000e-9) + 2e-3 + 2 * 0.5 * 500e-6)


def test_seed_hierarchical_matches_one_nic_per_node():
    """The issue's numbers: BERT-large (1.36 GB) on 4 nodes x 4 GPUs, 1 Gbit/s line rate, α = 0."""
    beta, n = 8e-9, 1.36e9
    inter = cf.hierarchical_inter_phase(4, 4, n, 0.0, 1 / 25.2e9, 0.0, beta)
    assert inter == pytest.approx(16.32)                      # 2(m−1)/m·n·β, not 4.08
    assert cf.hierarchical_inter_phase(4, 4, n, 0.0, 1 / 25.2e9, 0.0, beta, nics=4) == pytest.approx(4.08)
    ar = cf.hierarchical_allreduce(4, 4, n, 0.0, 1 / 25.2e9, 0.0, beta)
    ag = cf.hierarchical_allgather(4, 4, n / 16, 0.0, 1 / 25.2e9, 0.0, beta)
    assert ar > inter and ag < ar and ag == pytest.approx(ar / 2)


def test_hierarchical_one_node_is_ring():
    assert cf.hierarchical_allreduce(8, 1, 1e6, 1e-6, 1e-9, 1e-3, 1e-6) == pytest.approx(
        cf.ring_allreduce(8, 1e6, 1e-6, 1e-9))


def test_mccl_echo_ring_doubles_bytes_and_latency():
    assert cf.mccl_allreduce(4, 1000, 1e-3, 1e-6) == pytest.approx(2 * 3 * (2e-3 + 2 * 250e-6))
    assert cf.mccl_allgather(4, 100, 1e-3, 1e-6) == pytest.approx(3 * (2e-3 + 2e-4))


def test_single_rank_costs_nothing_and_broadcasting():
    assert cf.ring_allreduce(1, 1e9, 1.0, 1.0) == 0.0
    p = np.array([1, 2, 4])[:, None]
    n = np.array([0.0, 1e3, 1e6])[None, :]
    out = cf.ring_allreduce(p, n, 1e-5, 1e-9)
    assert out.shape == (3, 3)
    assert np.all(out[0] == 0.0) and np.all(np.diff(out[2]) > 0)


def test_bus_bandwidth():
    assert cf.bus_bandwidth(100.0, 8) == pytest.approx(175.0)


def test_named_collectives_single_node_uses_intra_link():
    net = algorithms.NetParams(1e-6, 1e-10, 1e-3, 1e-8, 8, 0.0)
    assert algorithms.allreduce("ring", 8, 1e6, net) == pytest.approx(cf.ring_allreduce(8, 1e6, 1e-6, 1e-10))
    # 16 ranks on 2 nodes: the flat ring is limited by the NIC
    assert algorithms.allreduce("ring", 16, 1e6, net) == pytest.approx(cf.ring_allreduce(16, 1e6, 1e-3, 1e-8))
    with pytest.raises(ValueError, match="unknown collective"):
        algorithms.allreduce("butterfly", 4, 1.0, net)
