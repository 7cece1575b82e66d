"""Exchange cost from plans, and the bucket pipeline against the closed forms."""
import numpy as np
import pytest

import compressors
from kfsim import catalog
from kfsim.catalog import ModelProfile
from kfsim.sim import collectives as cf
from kfsim.sim.compute import compute_time
from kfsim.sim.exchange_cost import assign_buckets, exchange_time, tensor_plan
from kfsim.sim.pipeline import schedule, serial_chain
from kfsim.sim.predict import predict_iteration

SEED = catalog.seed_cluster()
MLP = ModelProfile("mlp", [(512, 784), (512,), (10, 512), (10,)], 2 * 3 * 407050.0, batch=64)


def test_one_bucket_no_overlap_equals_closed_form():
    m = catalog.get_model("bert-large")
    for spec in ("none", "fp16", "ef(topk(ratio=0.01))", "powersgd(rank=4)"):
        b = predict_iteration(m, SEED, spec, 16, bucket_mb=1e9, overlap=False)
        ct = compute_time(m, SEED, m.batch)
        ov = SEED.overheads   # framework overheads per tensor and per step (collective calls: in exchange_time)
        expect = (ct.total + exchange_time(compressors.parse(spec), m.tensor_shapes, 16, SEED)
                  + len(m.tensor_shapes) * ov.tensor_s + ov.step_s)
        assert b.buckets == 1
        assert b.total_s == pytest.approx(expect, rel=1e-12)


def test_dense_exchange_is_ring_allreduce():
    m = catalog.get_model("resnet-50")
    n = 4.0 * m.params
    gamma = 3.0 / SEED.device.mem_bw
    expect = cf.ring_allreduce(16, n, SEED.inter.latency, SEED.inter.beta, gamma) + SEED.overheads.collective_s
    assert exchange_time(compressors.parse("none"), m.tensor_shapes, 16, SEED) == pytest.approx(float(expect))


def test_topk_is_allgather_of_values_and_indices():
    shapes = [(1000, 1000)]
    k = 10000
    t = exchange_time(compressors.parse("topk(ratio=0.01)"), shapes, 16, SEED)
    comm = cf.ring_allgather(16, k * 8, SEED.inter.latency, SEED.inter.beta)
    assert t > comm  # plus encode/decode
    assert t == pytest.approx(float(comm), rel=0.05)


def test_powersgd_has_two_sum_rounds():
    plan = tensor_plan(compressors.parse("powersgd(rank=4)"), [(1024, 1024)])
    assert plan.sum_bytes.shape[1] == 2
    assert plan.sum_bytes[0, 0] == 1024 * 4 * 4 and plan.sum_bytes[0, 1] == 1024 * 4 * 4
    assert plan.gather_bytes.sum() == 0


def test_identity_tensors_have_no_codec_cost():
    plan = tensor_plan(compressors.parse("filter(topk(ratio=0.01), min_size=1000)"), [(10,), (100, 100)])
    assert list(plan.coded) == [False, True]


def test_buckets_follow_backward_order_and_cap():
    ids = assign_buckets(np.array([10.0, 10.0, 10.0, 30.0]), 20.0)
    # backward visits the last tensor first: it fills bucket 0 alone
    assert list(ids) == [2, 1, 1, 0]
    with pytest.raises(ValueError):
        assign_buckets(np.ones(3), 0.0)


def test_serial_chain_matches_loop():
    rng = np.random.default_rng(0)
    ready = np.sort(rng.random(50))
    dur = rng.random(50) * 0.1
    e, out = 0.0, []
    for r, d in zip(ready, dur):
        e = max(r, e) + d
        out.append(e)
    assert np.allclose(serial_chain(ready, dur), out)


def test_overlap_hides_communication():
    frac = np.array([0.25, 0.5, 0.75, 1.0])
    comm = np.full(4, 0.1)
    z = np.zeros(4)
    ov = schedule(0.1, 1.0, 0.0, frac, z, comm, z, overlap=True)
    no = schedule(0.1, 1.0, 0.0, frac, z, comm, z, overlap=False)
    assert no.total_s == pytest.approx(1.5)
    # only the last bucket's exchange sticks out past the backward pass
    assert ov.total_s == pytest.approx(1.2)
    assert ov.exposed_comm_s == pytest.approx(0.1)
    assert ov.total_s == pytest.approx(ov.compute_s + ov.codec_s + ov.exposed_comm_s + ov.idle_s)


def test_interference_slows_backward():
    frac = np.array([1.0])
    b = schedule(0.0, 1.0, 0.0, frac, [0.0], [0.5], [0.0], interference=1.1)
    assert b.total_s == pytest.approx(1.1 + 0.5)


def test_custom_cpu_device_and_small_model():
    cpu = catalog.get_device("cpu")._replace(peak_flops=50e9)
    cl = SEED._replace(device=cpu, gpus_per_node=1, nodes=2, intra=catalog.get_link("pcie4"))
    b1 = predict_iteration(MLP, cl, "none", 1)
    assert b1.exposed_comm_s == 0 and b1.bytes_per_worker == 0
    b = predict_iteration(MLP, cl, "ef(topk(ratio=0.01))", 2)
    assert b.total_s > 0 and b.bytes_per_worker < 4 * 407050
    # cached: the same call returns the identical object
    assert predict_iteration(MLP, cl, "ef(topk(ratio=0.01))", 2) is b


def test_warmup_step_changes_plan():
    c = compressors.parse("warmup(topk(ratio=0.01), steps=10)")
    early = predict_iteration("resnet-18", SEED, c, 8, step=0)
    late = predict_iteration("resnet-18", SEED, c, 8, step=100)
    assert early.bytes_per_worker == pytest.approx(4 * catalog.get_model("resnet-18").params)
    assert late.bytes_per_worker < early.bytes_per_worker / 10


@pytest.mark.parametrize("kw,match", [({"workers": 0}, "workers"), ({"bucket_mb": 0}, "bucket_mb"),
                                      ({"batch_per_worker": 0}, "batch"), ({"collective": "x"}, "collective"),
                                      ({"network": "x"}, "network")])
def test_bad_arguments(kw, match):
    args = {"workers": 4, **kw}
    w = args.pop("workers")
    with pytest.raises(ValueError, match=match):
        predict_iteration("resnet-18", SEED, "none", w, **args)


def test_scheduled_compressor_cached_per_phase():
    c = compressors.parse("warmup(topk(ratio=0.01), steps=10)")
    a = predict_iteration(MLP, SEED, c, 4, step=1)
    assert predict_iteration(MLP, SEED, c, 4, step=7) is a          # same phase: cache hit
    assert predict_iteration(MLP, SEED, c, 4, step=12).bytes_per_worker < a.bytes_per_worker


def test_sweep_shapes():
    from kfsim.sim.predict import sweep
    assert sweep("resnet-18", SEED, "none", [2, 4]).shape == (2,)
    out = sweep("resnet-18", SEED, "none", [8, 16], bandwidths=[1e8, 1e10])
    assert out.shape == (2, 2) and np.all(out[0] > out[1])


def test_many_small_tensors_pay_their_overhead():
    """Same parameters in 300 tensors vs 3: slower by (300 − 3) × the per-tensor overhead exactly
    (one bucket each, no codec, same bytes), and by a non-zero amount."""
    from kfsim.catalog.overheads import Overheads
    few = ModelProfile("few", [(100_000,)] * 3, 6e9, batch=32)
    many = ModelProfile("many", [(1_000,)] * 300, 6e9, batch=32)
    assert few.params == many.params
    cl = SEED._replace(overheads=Overheads(collective_s=10e-6, tensor_s=7e-6, step_s=50e-6))
    for overlap in (False, True):
        a = predict_iteration(few, cl, "none", 16, bucket_mb=1e9, overlap=overlap)
        b = predict_iteration(many, cl, "none", 16, bucket_mb=1e9, overlap=overlap)
        assert a.buckets == b.buckets == 1
        assert b.total_s - a.total_s == pytest.approx(297 * 7e-6, rel=1e-9)
        assert b.overhead_s - a.overhead_s == pytest.approx(297 * 7e-6, rel=1e-12)
    bare = SEED._replace(overheads=Overheads(0.0, 0.0, 0.0))
    assert predict_iteration(many, bare, "none", 16, bucket_mb=1e9).total_s == pytest.approx(
        predict_iteration(few, bare, "none", 16, bucket_mb=1e9).total_s, rel=1e-12)


def test_collective_and_step_overheads():
    """Each collective call pays collective_s; each step step_s; p = 1 pays neither."""
    from kfsim.catalog.overheads import Overheads
    m = catalog.get_model("resnet-50")
    bare = SEED._replace(overheads=Overheads(0.0, 0.0, 0.0))
    call = SEED._replace(overheads=Overheads(1e-3, 0.0, 0.0))
    step = SEED._replace(overheads=Overheads(0.0, 0.0, 2e-3))
    for spec, calls in (("none", 1), ("powersgd(rank=4)", 2)):    # PowerSGD: two SUM rounds
        t0 = predict_iteration(m, bare, spec, 16, bucket_mb=1e9, overlap=False).total_s
        t1 = predict_iteration(m, call, spec, 16, bucket_mb=1e9, overlap=False).total_s
        assert t1 - t0 == pytest.approx(calls * 1e-3, rel=1e-9)
    t0 = predict_iteration(m, bare, "none", 16).total_s
    assert predict_iteration(m, step, "none", 16).total_s - t0 == pytest.approx(2e-3, rel=1e-9)
    assert predict_iteration(m, step, "none", 1).total_s == predict_iteration(m, bare, "none", 1).total_s
