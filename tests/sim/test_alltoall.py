"""All-to-all (SCATTER rounds) in the simulator: the pairwise closed form, its bounds, and the
compressed all-reduce built on it (``doublesqueeze``: all-to-all + all-gather of 1/p shards).

I5  a compressed all-reduce — all-to-all of msg plus all-gather of msg/p — is never below the
    all-reduce lower bound of msg: every byte it sums must still reach every rank.
"""
import itertools

import numpy as np
import pytest

from kfsim import catalog
from kfsim.sim import algorithms as A
from kfsim.sim import collectives as cf
from kfsim.sim.exchange_cost import tensor_plan
from kfsim.sim.predict import payload_bytes, predict_iteration

REL = 1 - 1e-9
GRID = [(g, m, k) for g in (1, 2, 4, 8) for m in (1, 2, 3, 16) for k in sorted({1, 2, g}) if k <= g]


def _net(g, k, b1=1 / 25e9, b2=8e-9, a1=1e-6, a2=5e-5):
    return A.NetParams(a1, b1, a2, b2, g, 0.0, None, k)


def test_pairwise_alltoall_hand_values():
    # one node of 4: 3 steps, 3/4 of the message over the device link
    assert cf.pairwise_alltoall(4, 1, 1e6, 1e-6, 1e-9, 5e-5, 1e-8) == pytest.approx(3 * 1e-6 + 0.75 * 1e6 * 1e-9)
    # 4 nodes × 4 devices, one NIC: 4 devices' 12/16 of the message through it, at α₂ per step
    t = cf.pairwise_alltoall(4, 4, 1e6, 1e-6, 1e-9, 5e-5, 1e-8, nics=1)
    assert t == pytest.approx(15 * 5e-5 + 4 * 12 / 16 * 1e6 * 1e-8)
    # one NIC per device: each carries its own device's part only
    t4 = cf.pairwise_alltoall(4, 4, 1e6, 1e-6, 1e-9, 5e-5, 1e-8, nics=4)
    assert t4 == pytest.approx(15 * 5e-5 + 12 / 16 * 1e6 * 1e-8)
    assert cf.pairwise_alltoall(1, 1, 1e6, 1e-6, 1e-9, 5e-5, 1e-8) == 0.0


def test_mccl_alltoall_is_its_allgather():
    net = _net(4, 1)
    assert A.alltoall("mccl", 16, 1e6, net) == pytest.approx(A.allgather("mccl", 16, 1e6, net))
    assert A.wire_bytes("mccl", "alltoall", 16, 1e6, 4) == pytest.approx(2 * 15 * 1e6)
    assert A.wire_bytes("ring", "alltoall", 16, 1e6, 4) == pytest.approx(15 / 16 * 1e6)


@pytest.mark.parametrize("name", A.NAMES)
def test_I5_compressed_allreduce_never_below_allreduce_bound(name):
    msg = 4e7
    for g, m, k in GRID:
        p = g * m
        net = _net(g, k)
        t = float(A.alltoall(name, p, msg, net) + A.allgather(name, p, msg / p, net))
        assert t >= float(A.lower_bound("allreduce", p, msg, net)) * REL, (name, g, m, k)


def test_all_to_all_more_nic_bound_than_reduce_scatter():
    """Many devices behind one NIC: the all-to-all moves g× the ring reduce-scatter's NIC bytes."""
    net = _net(8, 1)
    a2a = float(A.alltoall("ring", 64, 1e8, net))
    rs = float(cf.ring_reduce_scatter(64, 1e8, 5e-5, 8e-9))
    assert a2a > 4 * rs


def test_doublesqueeze_plan_prices_scatter_and_shards():
    comp = "doublesqueeze()"
    plan = tensor_plan(__import__("compressors").parse(comp), [(4096,), (10,)])
    bits = np.array([2 * (2048 + 32), 32 + 32])
    assert plan.scatter_bytes[:, 0] == pytest.approx(bits / 8)
    assert plan.shard_bytes[:, 1] == pytest.approx(bits / 8)
    assert not plan.gather_bytes.any() and not plan.sum_bytes.any()
    assert plan.payload_at(4) == pytest.approx(bits.sum() / 8 * (1 + 1 / 4))
    seed = catalog.seed_cluster()
    d = catalog.get_model("resnet-18")
    for p in (2, 16, 256):
        b = predict_iteration("resnet-18", seed, comp, p)
        assert b.bytes_per_worker == pytest.approx(payload_bytes("resnet-18", comp, workers=p))
        # ring: all-to-all (p−1)/p·m + all-gather (p−1)·m/p: the ring all-reduce's 2(p−1)/p of the 1-bit payload
        m = payload_bytes("resnet-18", comp) / 2
        assert b.wire_bytes_per_worker == pytest.approx(2 * (p - 1) / p * m, rel=1e-9)
        assert b.wire_bytes_per_worker < 2 * 4 * d.params / 30   # ~1/32 of fp32's 2(p−1)/p·4d


def test_doublesqueeze_flat_in_p_where_all_gather_of_signs_grows():
    seed = catalog.seed_cluster()
    ps = (16, 64, 512)   # 4 devices per node on 1 GbE: all multi-node
    ds = [predict_iteration("bert-large", seed, "doublesqueeze()", p).comm_s for p in ps]
    ef = [predict_iteration("bert-large", seed, "efsignsgd()", p).comm_s for p in ps]
    dense = [predict_iteration("bert-large", seed, "none()", p).comm_s for p in ps]
    assert ef[2] / ef[0] > 20                     # (p−1) whole payloads
    assert ds[2] / ds[0] < 3.5                    # ≈ g payloads through the NIC, plus (p−1)·α per call
    assert all(d < e for d, e in zip(ds, ef)) and all(5 * d < n for d, n in zip(ds, dense))


@pytest.mark.parametrize("name", A.NAMES)
def test_alltoall_broadcasts_and_p1_is_free(name):
    net = _net(4, 1)
    out = A.alltoall(name, np.array([1, 2, 8, 64])[:, None], np.array([0.0, 1e3, 1e9]), net)
    assert out.shape == (4, 3) and (out[0] == 0).all() and (np.diff(out[1:], axis=0) >= 0).all()
    assert list(itertools.chain(A.KINDS)) == ["allreduce", "allgather", "alltoall"]
