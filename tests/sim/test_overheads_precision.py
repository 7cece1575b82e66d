"""Framework overheads and the run's precision in cluster profiles, predict_iteration and the sweep."""
import pytest

from kfsim import catalog
from kfsim.catalog import config
from kfsim.catalog.kinds import EFFICIENCY
from kfsim.catalog.overheads import DEFAULT_INTERFERENCE, Overheads
from kfsim.sim.compute import compute_time
from kfsim.sim.predict import predict_iteration
from kfsim.sim.sweep import sweep_grid


def _cluster(device: str, precision: str = "mixed"):
    return catalog.make_cluster(device, 4, 2, "pcie4", "1gbe",
                                precision=precision)


@pytest.mark.parametrize("device,precision,peak", [
    ("a100", "mixed", 312e12), ("a100", "fp16", 312e12), ("a100", "bf16", 312e12),
    ("a100", "fp32", 19.5e12), ("a100", "tf32", 156e12), ("h100", "tf32", 494.7e12),
    ("v100", "tf32", 15.7e12),   # no TF32 tensor cores: the fp32 peak
    ("v100", "bf16", 15.7e12), ("rtx3090", "fp32", 35.6e12)])
def test_precision_picks_the_peak(device, precision, peak):
    m = catalog.get_model("resnet-50")
    ct = compute_time(m, _cluster(device, precision), m.batch)
    # per layer kind: FLOPs of the kind / (peak(precision) · efficiency(kind))  (kfsim.catalog.kinds)
    expect = m.batch * sum(f / (peak * EFFICIENCY[k]) for k, f in m.kind_flops)
    assert ct.fwd + ct.bwd == pytest.approx(expect, rel=1e-12)


def test_fp32_is_slower_than_mixed_by_the_peak_ratio():
    m = catalog.get_model("bert-large")
    cl = catalog.seed_cluster()
    mixed = predict_iteration(m, cl, "none", 1)
    fp32 = predict_iteration(m, cl, "none", 1, precision="fp32")
    assert (fp32.compute_s - compute_time(m, cl, m.batch).opt) == pytest.approx(
        (mixed.compute_s - compute_time(m, cl, m.batch).opt) * 71e12 / 35.6e12, rel=1e-12)
    with pytest.raises(ValueError, match="unknown precision 'fp8'"):
        predict_iteration(m, cl, "none", 4, precision="fp8")


def test_sweep_agrees_with_predict_under_overheads_and_precision():
    cl = catalog.seed_cluster()._replace(overheads=Overheads(3e-5, 4e-6, 7e-5))
    models, comps, workers = ["resnet-50", "bert-base"], ["none", "ef(topk(ratio=0.01))", "powersgd(rank=2)"], [1, 2, 8, 32]
    for prec in ("mixed", "fp32"):
        for overlap in (True, False):
            out = sweep_grid(models, cl, comps, workers, overlap=overlap, precision=prec)
            for i, m in enumerate(models):
                for j, c in enumerate(comps):
                    for k, w in enumerate(workers):
                        b = predict_iteration(m, cl, c, w, overlap=overlap, precision=prec)
                        assert out[i, j, 0, k] == pytest.approx(b.total_s, rel=1e-12)


def test_defaults_and_profile_overrides(tmp_path):
    cl = catalog.seed_cluster()
    assert cl.interference == DEFAULT_INTERFERENCE == 1.05
    assert cl.overheads == Overheads(10e-6, 5e-6, 50e-6) and cl.precision == "mixed"
    p = tmp_path / "c.toml"
    p.write_text('[cluster]\nprecision = "tf32"\ninterference = 1.1\n'
                 '[cluster.overheads]\ncollective_us = 20\ntensor_us = 0\nstep_us = 125\n')
    got = config.load_cluster(p)
    assert (got.precision, got.interference) == ("tf32", 1.1)
    assert got.overheads == Overheads(20e-6, 0.0, 125e-6)
    back = config.cluster_dict(got)["cluster"]
    assert back["overheads"] == {"collective_us": 20.0, "tensor_us": 0.0, "step_us": 125.0}
    assert back["precision"] == "tf32"


@pytest.mark.parametrize("text,field", [
    ('[cluster.overheads]\ntensor_us = -1\n', "tensor_us"),
    ('[cluster.overheads]\nper_layer_us = 3\n', "per_layer_us"),
    ('[cluster]\nprecision = "fp8"\n', "precision"),
])
def test_bad_overheads_and_precision_name_the_field(tmp_path, text, field):
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(ValueError, match=field):
        config.load_cluster(p)
