"""Flow-level max-min sharing and topologies."""
import numpy as np
import pytest

from kfsim import catalog
from kfsim.catalog import Topology
from kfsim.sim import network as nw
from kfsim.sim.maxmin import completion_times, maxmin_rates
from kfsim.sim.predict import predict_iteration


def test_two_flows_on_one_link_each_get_half():
    assert maxmin_rates([0, 1, 2], [0, 0], [10.0]).tolist() == [5.0, 5.0]
    net = nw.single_switch(3, 100.0)
    r = net.rates([(0, 2), (1, 2)])  # incast on host 2's down link
    assert r.tolist() == [50.0, 50.0]


def test_maxmin_textbook_case():
    # A on l0; B on l0,l1; C on l1; cap l0=1, l1=2 → A=B=0.5, C=1.5
    assert maxmin_rates([0, 1, 3, 4], [0, 0, 1, 1], [1.0, 2.0]).tolist() == pytest.approx([0.5, 0.5, 1.5])


def test_completion_reallocates_freed_bandwidth():
    # sizes 10 and 20 share 10 B/s: first ends at 2 s, second gets the full link: 3 s
    assert completion_times([0, 1, 2], [0, 0], [10.0], [10.0, 20.0]).tolist() == pytest.approx([2.0, 3.0])


def test_flow_ring_equals_closed_form_on_a_switch():
    cl = catalog.seed_cluster()
    for p in (2, 8, 32):
        a = predict_iteration("resnet-50", cl, "none", p, overlap=False)
        f = predict_iteration("resnet-50", cl, "none", p, overlap=False, network="flow")
        assert f.total_s == pytest.approx(a.total_s, rel=1e-3)


def test_ecmp_on_oversubscribed_leaf_spine_is_slower():
    base = catalog.seed_cluster()
    ls = base._replace(topology=Topology("leaf-spine", nodes_per_leaf=4, oversubscription=4.0))
    u_switch = nw.ring_unit_time(base, 64)
    u_ls = nw.ring_unit_time(ls, 64)
    assert u_ls > u_switch * 1.5


def test_shared_network_jobs_contend():
    net = nw.single_switch(8, 1.0)
    alone = nw.shared_step_times(net, [[0, 1, 2, 3]])
    disjoint = nw.shared_step_times(net, [[0, 1, 2, 3], [4, 5, 6, 7]])
    same = nw.shared_step_times(net, [[0, 1, 2, 3], [3, 2, 1, 0][::-1]])
    assert alone == pytest.approx([1.0])
    assert disjoint == pytest.approx([1.0, 1.0])
    assert same == pytest.approx([2.0, 2.0])


def test_echo_ring_doubles_step_time():
    net = nw.single_switch(4, 1.0)
    assert net.unit_time(nw.ring_pairs([0, 1, 2, 3], echo=True)) == pytest.approx(
        2 * net.unit_time(nw.ring_pairs([0, 1, 2, 3])))


def test_bad_inputs():
    with pytest.raises(ValueError, match="bandwidth"):
        nw.single_switch(4, 0.0)
    with pytest.raises(ValueError, match="outside"):
        nw.single_switch(2, 1.0).rates([(0, 5)])
    with pytest.raises(ValueError, match="ring, mccl and hierarchical"):
        predict_iteration("resnet-18", catalog.seed_cluster(), "none", 8, collective="tree", network="flow")
    with pytest.raises(ValueError, match="random"):
        nw.placement(4, 8, "scattered")


def test_jobs_sharing_nics_slow_each_other():
    from kfsim.sim.predict import predict_shared
    cl = catalog.seed_cluster()
    alone = predict_iteration("resnet-50", cl, "none", 8).total_s
    packed = predict_shared("resnet-50", cl, "none", [8, 8], placement="packed")
    mixed = predict_shared("resnet-50", cl, "none", [8, 8], placement="interleaved")
    assert [b.total_s for b in packed] == pytest.approx([alone, alone])  # disjoint nodes: no contention
    assert all(b.total_s > 2 * alone for b in mixed)
    with pytest.raises(ValueError, match="jobs"):
        predict_shared("resnet-50", cl, "none", [8, 0])
