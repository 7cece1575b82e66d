"""`--exchange flat`: the model exchanged as one buffer after backward (kfsim.sim.inputs.exchanged),
for scale and advise, from a flag or the config file, and refused where it cannot hold."""
import json

import pytest
from typer.testing import CliRunner

import kfsim.cli.advise_cmd  # noqa: F401
import kfsim.cli.scale_cmd  # noqa: F401
from kfsim import catalog
from kfsim.cli import app
from kfsim.sim.inputs import EXCHANGES, as_model, exchanged, flattened
from kfsim.sim.predict import predict_iteration

runner = CliRunner()


def _rows(out):
    return {(r["compressor"], r["workers"]): r for r in json.loads((out / "scale.json").read_text())["rows"]}


def test_exchanged_is_the_model_or_its_flat_buffer():
    m = as_model("resnet-50")
    assert exchanged("resnet-50") == m == exchanged(m, "buckets")
    f = exchanged("resnet-50", "flat")
    assert f == flattened(m) and f.tensor_shapes == ((m.params,),) and f.name == m.name
    assert f.kind_flops == m.kind_flops and f.flops_per_sample == m.flops_per_sample
    with pytest.raises(ValueError, match="exchange must be one of buckets, flat, got 'fused'"):
        exchanged(m, "fused")
    assert EXCHANGES == ("buckets", "flat")


def test_flat_keeps_a_measured_compute_time():
    """The flat buffer is the same model: a measured compute time of it still applies."""
    m = as_model("resnet-50")
    cl = catalog.make_cluster("rtx3090", 4, 2, "pcie4", "10gbe")
    cl = cl._replace(compute_s=((m.name, 0.5, m.batch),))
    b, f = (predict_iteration(x, cl, "none()", 8) for x in (m, flattened(m)))
    assert b.compute_s == pytest.approx(f.compute_s) and f.compute_s > 0.4


def test_scale_flat_is_one_buffer_after_backward(tmp_path):
    args = ["scale", "--model", "resnet-50", "--workers", "8", "--inter", "10gbe", "-c", "none()",
            "-c", "powersgd(rank=4)", "--no-plot", "--quiet"]
    assert runner.invoke(app, [*args, "--out", str(tmp_path / "b")]).exit_code == 0
    r = runner.invoke(app, [*args, "--exchange", "flat", "--out", str(tmp_path / "f")])
    assert r.exit_code == 0, r.output
    bk, fl = _rows(tmp_path / "b"), _rows(tmp_path / "f")
    assert json.loads((tmp_path / "f" / "scale.json").read_text())["meta"]["scale"]["exchange"] == "flat"
    for spec in ("none()", "powersgd(rank=4)"):
        assert fl[(spec, 8)]["compute_s"] == pytest.approx(bk[(spec, 8)]["compute_s"])
    # the dense all-reduce no longer hides under backward: it waits for the whole buffer
    assert fl[("none()", 8)]["total_s"] > bk[("none()", 8)]["total_s"]
    assert fl[("none()", 8)]["buckets"] == 1 < bk[("none()", 8)]["buckets"]
    want = predict_iteration(flattened("resnet-50"), catalog.make_cluster("rtx3090", 4, 2, "pcie4", "10gbe"),
                             "none()", 8)
    assert fl[("none()", 8)]["total_s"] == pytest.approx(want.total_s)
    # a flat buffer is one matrix to PowerSGD's eyes only if it is 2-D: the 1-D buffer is sent dense
    assert fl[("powersgd(rank=4)", 8)]["payload_MiB_per_worker"] == pytest.approx(
        fl[("none()", 8)]["payload_MiB_per_worker"])


def test_config_file_exchange_reaches_scale_and_advise(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[scale]\nmodel = "resnet-50"\nworkers = [8]\nexchange = "flat"\n')
    r = runner.invoke(app, ["scale", "--config", str(cfg), "-c", "none()", "--out", str(tmp_path / "s"),
                            "--no-plot", "--quiet"])
    assert r.exit_code == 0, r.output
    assert _rows(tmp_path / "s")[("none()", 8)]["buckets"] == 1
    r = runner.invoke(app, ["advise", "--config", str(cfg), "-c", "fp16()", "--bandwidth", "1Gbit/s",
                            "--out", str(tmp_path / "a"), "--no-plot"])
    assert r.exit_code == 0, r.output
    flat = json.loads((tmp_path / "a" / "advise.json").read_text())["rows"][0]
    r = runner.invoke(app, ["advise", "--config", str(cfg), "--exchange", "buckets", "-c", "fp16()",
                            "--bandwidth", "1Gbit/s", "--out", str(tmp_path / "b"), "--no-plot"])
    assert r.exit_code == 0, r.output
    buckets = json.loads((tmp_path / "b" / "advise.json").read_text())["rows"][0]
    assert flat["t_uncompressed_s"] > buckets["t_uncompressed_s"]   # the flag wins over the file


@pytest.mark.parametrize("command", ["scale", "advise"])
def test_bad_exchange_and_plan_with_flat_are_one_line(tmp_path, command):
    r = runner.invoke(app, [command, "--exchange", "fused", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "scale.exchange" in r.output and "Traceback" not in r.output
    plan = tmp_path / "p.toml"
    plan.write_text('[plan]\nmodel = "mlp"\ndefault = "fp16()"\n[plan.tensors]\nw1 = "int8()"\n')
    r = runner.invoke(app, [command, "--plan", str(plan), "--exchange", "flat", "--out", str(tmp_path / "y")])
    assert r.exit_code == 2 and "--exchange flat" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
