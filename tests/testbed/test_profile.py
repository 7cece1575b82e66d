"""Profile files written by calibration load in the simulator."""
import numpy as np
import pytest

from kfsim.sim import algorithms
from kfsim.sim.predict import predict_iteration
from kfsim.testbed import calibrate as cal
from kfsim.testbed.fit import CollectiveFit, Sample, fit_collectives
from kfsim.testbed.microbench import Measured, combine
from kfsim.testbed.profile import profile_dict, profile_path, read_profile, write_profile
from kfsim.testbed.training import mlp_model_entry, mlp_name, mlp_params


def _fit(alpha=4e-4, beta=2.5e-7, gamma=1e-9):
    return CollectiveFit(alpha, beta, gamma, np.zeros(1), 1)


@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
def test_profile_roundtrip_and_simulator_uses_it(tmp_path, suffix):
    layers = [32, 64, 10]
    data = profile_dict("tb", 50, _fit(), 4, compute_s={mlp_name(layers): 0.02},
                        codec={"select_gbs": 1.0, "op_overhead_us": 3.0}, models=[mlp_model_entry(layers, 16)])
    path = write_profile(data, tmp_path / f"tb-50mbit{suffix}")
    cl = read_profile(path)
    assert cl.collective == "mccl" and cl.workers == 4 and cl.gpus_per_node == 1
    assert cl.inter.beta == pytest.approx(2.5e-7)
    assert cl.inter.latency == pytest.approx(4e-4)
    assert cl.gamma == pytest.approx(1e-9)
    assert cl.codec.select == pytest.approx(1e9) and cl.codec.op_overhead == pytest.approx(3e-6)
    assert cl.codec.elementwise is None and cl.device.factor("select") == 4.0  # the catalog CPU's factors
    # the simulator's mccl all-reduce with the profile's α, β, γ
    t = float(algorithms.allreduce("mccl", 4, 1e6, algorithms.net_params(cl)))
    assert t == pytest.approx(2 * 3 * (2 * 4e-4 + 2 * 1e6 / 4 * 2.5e-7) + 0.75 * 1e6 * 1e-9)
    br = predict_iteration(mlp_name(layers), str(path), "none", 4, overlap=False)
    assert br.compute_s > 0.02 and br.total_s > br.compute_s
    assert br.bytes_per_worker == pytest.approx(mlp_params(layers) * 4)


def test_profile_path_and_names(tmp_path):
    assert profile_path("lab", 200, tmp_path).name == "lab-200mbit.toml"
    with pytest.raises(ValueError):
        profile_path("a/b", 200)
    with pytest.raises(ValueError):
        profile_path("lab", 0)


def test_profile_rejects_unusable_fit(tmp_path):
    with pytest.raises(ValueError):
        profile_dict("tb", 50, _fit(beta=0.0), 2)
    with pytest.raises(ValueError):
        write_profile(profile_dict("tb", 50, _fit(), 2), tmp_path / "x.ini")


def test_efficiency_above_one_keeps_beta(tmp_path):
    # β below the shaped rate's (e > 1): bandwidth raised so that β is unchanged
    data = profile_dict("tb", 100, _fit(beta=0.5 / (100e6 / 8)), 2)
    cl = read_profile(write_profile(data, tmp_path / "t.toml"))
    assert cl.inter.beta == pytest.approx(0.5 / (100e6 / 8))


def test_calibration_pipeline_from_measurements(tmp_path):
    """measurements → per-(rate, p) and pooled fits → profiles that the simulator loads."""
    coll = []
    for rate in (50.0, 200.0):
        beta = 8 / (rate * 1e6)
        for p in (2, 4):
            for n in (16384, 1048576, 4194304):
                coll.append(Measured(rate, "allreduce", p, n, float(design_ar(p, n, 1e-3, beta)), 0.0))
                coll.append(Measured(rate, "allgather", p, n, float(design_ag(p, n, 1e-3, beta)), 0.0))
    layers = [16, 8, 4]
    comp = [{"p": 2, "model": mlp_name(layers), "batch": 8, "seconds": 0.01},
            {"p": 4, "model": mlp_name(layers), "batch": 8, "seconds": 0.02}]
    data = cal.merge(cal.load_measurements(tmp_path / "none.json"), coll, comp,
                     {mlp_name(layers): mlp_model_entry(layers, 8)})
    fitted = cal.fits(data)
    assert set(fitted) == {(50.0, None), (50.0, 2), (50.0, 4), (200.0, None), (200.0, 2), (200.0, 4)}
    assert fitted[(200.0, 4)].beta == pytest.approx(8 / 200e6, rel=1e-6)
    paths = cal.write_profiles("tb", data, tmp_path)
    assert paths[(50.0, 4)].name == "tb-50mbit-p4.toml"
    cl = read_profile(paths[(50.0, 4)])
    assert cl.inter.efficiency == pytest.approx(1.0, rel=1e-6)
    assert cl.measured_compute(mlp_name(layers)) == pytest.approx(0.02 - 28 * mlp_params(layers) / 5e9)
    # re-measuring a cell replaces it, other cells stay
    again = cal.merge(data, [Measured(50.0, "allreduce", 2, 16384, 1.0, 0.0)], [], {})
    assert len([c for c in again["collectives"] if c["rate_mbit"] == 50.0 and c["p"] == 2]) == 1
    assert len([c for c in again["collectives"] if c["rate_mbit"] == 200.0]) == 12


def design_ar(p, n, a, b):
    from kfsim.sim.collectives import mccl_allreduce
    return mccl_allreduce(p, n, a, b)


def design_ag(p, n, a, b):
    from kfsim.sim.collectives import mccl_allgather
    return mccl_allgather(p, n, a, b)


def test_combine_takes_slowest_rank_median():
    recs = [{"op": "allreduce", "bytes": 8, "p": 2, "rank": 0, "times": [1.0, 2.0, 3.0], "tx": [10, 10, 10]},
            {"op": "allreduce", "bytes": 8, "p": 2, "rank": 1, "times": [2.0, 4.0, 9.0], "tx": [30, 30, 30]}]
    (m,) = combine(recs, 100.0)
    assert m.seconds == 4.0 and m.tx_per_rank == 20.0 and m.sample() == Sample("allreduce", 2, 8.0, 4.0)


def test_step_costs_fit_codec_constants_from_programs(tmp_path):
    """Codec times generated from the programs with known constants are fitted back; no family names."""
    import compressors
    from compressors.cost import CLASSES
    from kfsim.catalog import get_device
    from kfsim.sim.codec import codec_cost
    from kfsim.testbed.compressed import wide_model_entry, wide_name
    m = wide_model_entry(64, 32)
    name = wide_name(64)
    a, t_op = 2e-10, 4e-5   # s per factor-weighted byte, s per op
    specs = ("topk(ratio=0.01)", "ef(topk(ratio=0.01))", "powersgd(rank=2)", "qsgd(levels=15, bucket=512)",
             "signum(beta=0.9)")   # signum: an elementwise-heavy program, which identifies that class
    steps = [{"p": 2, "spec": "native", "model": name, "global_batch": 32, "seconds": 0.10}]
    cpu = get_device("cpu")
    for spec in specs:
        by_class, n_ops, _ = cal.program_totals(spec, m["tensor_shapes"])
        assert sum(by_class) > 0 and n_ops >= 1
        mb = sum(b * cpu.factor(c) for b, c in zip(by_class, CLASSES))
        steps.append({"p": 2, "spec": spec, "model": name, "global_batch": 32, "seconds": 0.10 + a * mb + t_op * n_ops})
    data = {"collectives": [], "compute": [], "models": {name: m}, "steps": steps}
    compute, codec = cal.step_costs(data, 2, mem_bw_gbs=5.0)
    n = sum(int(np.prod(s)) for s in m["tensor_shapes"])
    assert compute[name] == pytest.approx((0.10 - 28 * n / 5e9) * 2)
    assert codec["op_overhead_us"] == pytest.approx(t_op * 1e6, rel=1e-6)
    for cls in CLASSES:
        assert codec[f"{cls.replace('/', '_')}_gbs"] == pytest.approx(1 / (a * cpu.factor(cls)) / 1e9, rel=1e-6)
    assert not any(spec.split("(")[0] in k for k in codec for spec in specs)
    # a class the programs use more slowly than the one-scale fit: the per-class stage finds it
    slow = [dict(steps[0])]
    for e in steps[1:]:
        by_class, n_ops, _ = cal.program_totals(e["spec"], m["tensor_shapes"])
        x = [a * cpu.factor(c) * (5 if c == "select" else 1) for c in CLASSES]
        slow.append(dict(e, seconds=0.10 + sum(b * xc for b, xc in zip(by_class, x)) + 1e-6 * n_ops))
    _, fitted = cal.step_costs({"steps": slow, "models": {name: m}}, 2)
    assert fitted["select_gbs"] < 0.5 * codec["select_gbs"]
    assert fitted["elementwise_gbs"] == pytest.approx(codec["elementwise_gbs"], rel=0.3)
    # the simulator, on a profile with these constants, prices a measured spec back (encode + 1-payload decode)
    cl = read_profile(write_profile(profile_dict("tb", 50, _fit(), 2, codec=codec, models=[m]), tmp_path / "t.toml"))
    comp = compressors.parse("ef(topk(ratio=0.01))")
    got = sum(c.enc + c.decode(1) for c in (codec_cost(comp, s, cl) for s in m["tensor_shapes"]))
    assert got == pytest.approx(steps[2]["seconds"] - 0.10, rel=1e-6)
    assert cal.step_costs({"steps": [], "models": {}}, 2) == ({}, {})


def test_fit_codec_with_a_per_call_term_recovers_it():
    """Rows with a coded-tensor count T: t_call is fitted beside the class bandwidths and t_op, from
    two sizes (one size cannot tell a fixed cost from a per-byte one); the simulator then charges it
    once per coded tensor's encode."""
    import compressors
    from compressors.cost import CLASSES
    from kfsim import catalog
    from kfsim.catalog.cluster import CODEC_CLASSES
    from kfsim.sim.codec import codec_cost
    cpu = catalog.get_device("cpu")
    a, t_op, t_call = 2e-10, 3e-6, 5e-4
    rows = []
    for spec in ("topk(ratio=0.01)", "ef(topk(ratio=0.01))", "powersgd(rank=2)", "qsgd(levels=15, bucket=512)",
                 "signsgd()", "fp16()", "randomk(ratio=0.1)"):
        for shape in ((100, 1000), (3000, 3000)):
            by_class, n_ops, _ = cal.program_totals(spec, [shape])
            sec = a * sum(b * cpu.factor(c) for b, c in zip(by_class, CLASSES)) + t_op * n_ops + t_call
            rows.append((sec, by_class, n_ops, spec, 1.0))
    fit = cal.fit_codec(rows)
    assert fit["call_overhead_us"] == pytest.approx(t_call * 1e6, rel=1e-3)
    assert fit["op_overhead_us"] == pytest.approx(t_op * 1e6, rel=1e-2)
    assert "t_call" in fit["source"]
    assert "call_overhead_us" not in cal.fit_codec([r[:4] for r in rows])  # without T: the old model
    codec = catalog.Codec(**{c: fit[f"{c}_gbs"] * 1e9 for c in CODEC_CLASSES}, op_overhead=fit["op_overhead_us"] / 1e6,
                          call_overhead=fit["call_overhead_us"] / 1e6)
    cl = catalog.make_cluster(device="cpu")._replace(codec=codec)
    comp = compressors.parse("ef(topk(ratio=0.01))")
    with_call = codec_cost(comp, (100, 1000), cl)
    without = codec_cost(comp, (100, 1000), cl._replace(codec=codec._replace(call_overhead=None)))
    assert with_call.enc - without.enc == pytest.approx(codec.call_overhead)
    assert with_call.enc + with_call.decode(1) == pytest.approx(rows[2][0], rel=1e-3)


def test_calibrate_rejects_an_unsplittable_batch_before_measuring(monkeypatch):
    """A worker count the global batch cannot be split over fails before any collective is measured
    (it used to fail after minutes of collectives, which were then lost)."""
    def no_testbed(*a, **k):
        raise AssertionError("a testbed was started")

    monkeypatch.setattr(cal, "Testbed", no_testbed)
    with pytest.raises(ValueError, match=r"global batch 64 must be divisible by every worker count \[2, 3\]"):
        cal.measure([50.0], [2, 3], [4096], specs=["quantize(bits=8)"], global_batch=64)
    with pytest.raises(AssertionError, match="started"):   # collectives only: no batch to split, it goes on
        cal.measure([50.0], [2, 3], [4096], global_batch=64)
