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
                        codecs={"topk": (1e9, 2e9, 3e9)}, models=[mlp_model_entry(layers, 16)])
    path = write_profile(data, tmp_path / f"tb-50mbit{suffix}")
    cl = read_profile(path)
    assert cl.collective == "mccl" and cl.workers == 4 and cl.gpus_per_node == 1
    assert cl.inter.beta == pytest.approx(2.5e-7)
    assert cl.inter.latency == pytest.approx(4e-4)
    assert cl.gamma == pytest.approx(1e-9)
    assert cl.codec("topk").encode == pytest.approx(1e9)
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


def test_step_costs_attribute_codec_time_to_families():
    from kfsim.sim.exchange_cost import tensor_plan
    import compressors
    from kfsim.testbed.compressed import wide_model_entry, wide_name
    m = wide_model_entry(64, 32)
    name = wide_name(64)
    steps = [{"p": 2, "spec": "native", "model": name, "global_batch": 32, "seconds": 0.10},
             {"p": 2, "spec": "topk(ratio=0.01)", "model": name, "global_batch": 32, "seconds": 0.50},
             {"p": 2, "spec": "ef(topk(ratio=0.01))", "model": name, "global_batch": 32, "seconds": 0.60}]
    data = {"collectives": [], "compute": [], "models": {name: m}, "steps": steps}
    compute, codecs = cal.step_costs(data, 2, mem_bw_gbs=5.0)
    n = sum(int(np.prod(s)) for s in m["tensor_shapes"])
    assert compute[name] == pytest.approx((0.10 - 28 * n / 5e9) * 2)
    plan = tensor_plan(compressors.parse("topk(ratio=0.01)"), [tuple(s) for s in m["tensor_shapes"]])
    coded = float((plan.dense_bytes * plan.coded).sum())
    enc, dec, _ = codecs["topk"]
    assert 1 / enc + 1 / dec == pytest.approx(0.40 / coded)
    enc, dec, _ = codecs["ef"]
    assert 1 / enc + 1 / dec == pytest.approx(0.10 / coded)
