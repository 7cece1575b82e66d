"""Config files: validation errors name the field; profiles round-trip."""
import tomllib
from pathlib import Path

import pytest

from kfsim import catalog
from kfsim.catalog import config
from kfsim.sim.predict import predict_iteration


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("text,field", [
    ("[cluster]\ninter = { bandwidth_gbps = 0 }\n", "cluster.inter.bandwidth_gbps"),
    ("[cluster]\ninter = { bandwidth_gbps = -1 }\n", "cluster.inter.bandwidth_gbps"),
    ("[cluster]\nnodes = 0\n", "cluster.nodes"),
    ("[cluster]\ncollective = \"smoke-signals\"\n", "cluster.collective"),
    ("[cluster]\ntypo = 1\n", "cluster.typo"),
    ("[[models]]\nname = \"m\"\ntensor_shapes = [[0, 3]]\nflops_per_sample = 1\n", "models.0.tensor_shapes"),
    ("[codec]\nselect_gbs = 0\n", "codec.select_gbs"),
    ("[codec]\nselect_gbs = 1\nop_overhead_us = -1\n", "codec.op_overhead_us"),
    ("[[devices]]\nname = \"d\"\npeak_tflops = 1\nmem_bw_gbs = 1\ncodec_factors = { sorting = 2 }\n",
     "devices.0.codec_factors"),
])
def test_schema_errors_name_the_field(tmp_path, text, field):
    p = _write(tmp_path, "c.toml", text)
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        config.load(p)


def test_semantic_errors_name_the_field(tmp_path):
    with pytest.raises(ValueError, match=r"scale\.model: unknown model 'alexnet'"):
        config.check_scale(config.ScaleCfg(model="alexnet"))
    with pytest.raises(ValueError, match=r"scale\.bucket_mb: 5000 MB is larger than the model resnet-18"):
        config.check_scale(config.ScaleCfg(model="resnet-18", bucket_mb=5000))
    with pytest.raises(ValueError, match=r"scale\.compressors\[1\]"):
        config.check_scale(config.ScaleCfg(compressors=["none()", "nonsense(3)"]))
    p = _write(tmp_path, "c.toml", "[cluster]\ndevice = \"abacus\"\n")
    with pytest.raises(ValueError, match=r"cluster\.device: unknown device"):
        config.load(p)
    with pytest.raises(ValueError, match="does not exist"):
        config.load(tmp_path / "missing.toml")
    with pytest.raises(ValueError, match="cannot parse"):
        config.load(_write(tmp_path, "bad.toml", "[cluster\n"))


def test_yaml_user_entries_and_prediction(tmp_path):
    p = _write(tmp_path, "c.yaml", """
name: lab
cluster:
  device: my-cpu
  nodes: 2
  gpus_per_node: 1
  inter: {bandwidth_gbps: 0.1, latency_us: 100}
devices:
  - {name: my-cpu, peak_tflops: 0.05, mem_bw_gbs: 10, mfu: 0.5}
models:
  - {name: tiny-mlp, tensor_shapes: [[256, 784], [256], [10, 256], [10]], flops_per_sample: 1.2e6, batch: 32}
""")
    cfg, cl = config.load(p)
    assert cl.device.name == "my-cpu" and cl.inter.bandwidth == pytest.approx(0.1e9 / 8)
    b = predict_iteration("tiny-mlp", cl, "none", 2)
    assert b.compute_s > 0 and b.bytes_per_worker == 4 * (256 * 784 + 256 + 2570)


@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
def test_calibrated_profile_round_trips(tmp_path, suffix):
    cl = catalog.seed_cluster()._replace(
        name="lab-calibrated", collective="mccl", interference=1.05,
        inter=catalog.Link("measured", 0.94e9 / 8, 180e-6, 1.0, "fit"),
        codec=catalog.Codec(select=60e9, gather_scatter=200e9, op_overhead=6e-6, source="fit", call_overhead=4e-4),
        compute_s=(("bert-large", 0.081),))
    path = config.dump_profile(cl, tmp_path / f"profile{suffix}")
    back = config.load_cluster(path)
    assert back.collective == "mccl" and back.name == "lab-calibrated"
    assert back.inter.bandwidth == pytest.approx(cl.inter.bandwidth)
    assert back.inter.latency == pytest.approx(cl.inter.latency)
    assert back.codec.select == pytest.approx(60e9) and back.codec.elementwise is None
    assert back.codec.op_overhead == pytest.approx(6e-6) and back.device.launch_s == pytest.approx(5e-6)
    assert back.codec.call_overhead == pytest.approx(4e-4)
    assert back.device._replace(launch_s=0.0) == cl.device._replace(launch_s=0.0)
    assert back.measured_compute("bert-large") == pytest.approx(0.081)
    a = predict_iteration("bert-large", cl, "ef(topk(ratio=0.01))", 4)
    b = predict_iteration("bert-large", back, "ef(topk(ratio=0.01))", 4)
    assert b.total_s == pytest.approx(a.total_s, rel=1e-9)
    opt = 28 * catalog.get_model("bert-large").params / cl.device.mem_bw
    assert b.compute_s == pytest.approx(0.081 / 3 + 1.05 * 0.081 * 2 / 3 + opt)  # λ = 1.05 on backward


def test_documented_example_loads(tmp_path):
    doc = config.__doc__
    block = doc.split("Example (all sections optional)::")[1]
    text = "\n".join(line[4:] for line in block.splitlines() if line.startswith("    ") or not line.strip())
    cfg, cl = config.load(_write(tmp_path, "example.toml", text))
    assert cl.collective == "mccl" and cl.topology.kind == "leaf-spine"
    assert cl.codec.select == pytest.approx(60e9) and cl.codec.op_overhead == pytest.approx(6e-6)
    assert catalog.get_device("my-cpu").factor("select") == 4.0
    assert cfg.scale["workers"] == [2, 4, 8, 16] and cfg.train["bandwidth"] == "10Gbit/s"
    from kfsim.cli.options import check_sections

    check_sections(tomllib.loads(text), "example.toml")  # the command sections against the flags
    assert predict_iteration("my-mlp", cl, "ef(topk(ratio=0.01))", 4).total_s > 0
