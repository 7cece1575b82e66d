"""Per-layer-kind compute efficiency, measured compute with its unit, and the model families."""
import json

import pytest
from typer.testing import CliRunner

import kfsim.cli.advise_cmd  # noqa: F401
import kfsim.cli.scale_cmd  # noqa: F401
from kfsim import catalog
from kfsim.catalog import config, families, kinds
from kfsim.catalog.kinds import EFFICIENCY, conv_kind
from kfsim.catalog.measured import parse_compute
from kfsim.cli import app
from kfsim.sim.compute import compute_time

runner = CliRunner()
A100 = catalog.make_cluster("a100", 8, 1, "nvlink3", "100gbe")


def _load(tmp_path, text, name="c.toml"):
    p = tmp_path / name
    p.write_text(text)
    return config.load(p)


def _fb(model, cl, batch=None):
    ct = compute_time(model, cl, model.batch if batch is None else batch)
    return ct.fwd + ct.bwd


# ---------------------------------------------------------------- (a) per-kind efficiency

@pytest.mark.parametrize("groups,in_c,out_c,kind", [
    (1, 64, 64, "conv"), (64, 64, 64, "depthwise_conv"), (32, 64, 128, "grouped_conv"), (64, 64, 128, "depthwise_conv"),
    (32, 128, 128, "grouped_conv"), (2, 2, 4, "depthwise_conv"), (1, 1, 1, "conv")])
def test_conv_kinds(groups, in_c, out_c, kind):
    assert conv_kind(groups, in_c, out_c) == kind


@pytest.mark.parametrize("name,kinds_present", [
    ("resnet-50", {"conv", "elementwise", "matmul"}),
    ("resnext101-32x4d", {"conv", "grouped_conv", "elementwise", "matmul"}),
    ("efficientnet-b0", {"conv", "depthwise_conv", "elementwise", "matmul"}),
    ("bert-large", {"matmul", "elementwise"}), ("llama-7b", {"matmul", "elementwise"})])
def test_builtins_split_their_flops_by_kind(name, kinds_present):
    m = catalog.get_model(name)
    split = dict(m.kind_flops)
    assert set(split) == kinds_present
    # the dense kinds share the catalog's FLOPs; elementwise work comes on top of them
    assert sum(f for k, f in split.items() if k != "elementwise") == pytest.approx(m.flops_per_sample, rel=1e-12)
    assert 0 < split["elementwise"] < 0.15 * m.flops_per_sample


def test_compute_is_the_sum_over_kinds():
    m = catalog.get_model("resnext101-32x4d")
    peak = A100.device.compute_flops("mixed")
    expect = m.batch * sum(f / (peak * EFFICIENCY[k]) for k, f in m.kind_flops)
    assert _fb(m, A100) == pytest.approx(expect, rel=1e-12)


def test_depthwise_model_is_slower_than_a_dense_one_of_the_same_flops(tmp_path):
    text = ""
    for name, kind in (("dense", "conv"), ("dw", "depthwise_conv"), ("grp", "grouped_conv")):
        text += (f'[[models]]\nname = "{name}"\ntensor_shapes = [[256, 1, 3, 3], [256]]\n'
                 f'tensor_kinds = ["{kind}", "elementwise"]\ntensor_flops = [1.0, 0.0]\n'
                 f'flops_per_sample = 1e9\nbatch = 32\n')
    _load(tmp_path, text)
    dense, dw, grp = (_fb(catalog.get_model(n), A100) for n in ("dense", "dw", "grp"))
    assert dense < grp < dw
    assert dw / dense == pytest.approx(EFFICIENCY["conv"] / EFFICIENCY["depthwise_conv"], rel=1e-12)
    # the real networks: a grouped / depthwise CNN reaches far fewer FLOP/s than ResNet-50
    rate = {n: catalog.get_model(n).flops_per_sample / _fb(catalog.get_model(n), A100, 1)
            for n in ("resnet-50", "resnext101-32x4d", "efficientnet-b0")}
    assert rate["efficientnet-b0"] < rate["resnext101-32x4d"] < rate["resnet-50"]
    assert rate["efficientnet-b0"] < 0.25 * rate["resnet-50"]


def test_efficiency_override_and_one_mfu(tmp_path):
    _load(tmp_path, '[[models]]\nname = "r50-fast"\nfamily = "resnet"\ndepth = 50\nefficiency = { conv = 0.48 }\n'
                    '[[models]]\nname = "r50-mfu"\nfamily = "resnet"\ndepth = 50\nmfu = 0.3\n')
    fast, one = catalog.get_model("r50-fast"), catalog.get_model("r50-mfu")
    split = dict(fast.kind_flops)
    peak = A100.device.compute_flops("mixed")
    t = fast.batch * (split["conv"] / (peak * 0.48) + split["elementwise"] / (peak * EFFICIENCY["elementwise"])
                      + split["matmul"] / (peak * EFFICIENCY["matmul"]))
    assert _fb(fast, A100) == pytest.approx(t, rel=1e-12)
    assert one.kind_flops is None
    assert _fb(one, A100) == pytest.approx(one.flops_per_sample * one.batch / (peak * 0.3), rel=1e-12)


@pytest.mark.parametrize("entry,field", [
    ("efficiency = { conv = 1.5 }", "efficiency"), ("efficiency = { conv = 0 }", "efficiency"),
    ("efficiency = { attention = 0.5 }", "efficiency"),
])
def test_bad_efficiency_names_the_field(tmp_path, entry, field):
    with pytest.raises(ValueError, match=rf"models\.0\.{field}"):
        _load(tmp_path, f'[[models]]\nname = "x"\nfamily = "resnet"\ndepth = 50\n{entry}\n')
    with pytest.raises(ValueError, match="unknown layer kind 'attention'"):
        kinds.efficiency("attention")


# ---------------------------------------------------------------- (b) measured compute, unit explicit

@pytest.mark.parametrize("text,expect", [
    ("81ms@8", (0.081, 8)), ("0.081s@8", (0.081, 8)), ("81 ms @ batch=8", (0.081, 8)),
    ("10ms/sample", (0.01, 1)), ("250us/sample", (250e-6, 1)), ("1e-3s@1", (1e-3, 1))])
def test_parse_compute(text, expect):
    s, b = parse_compute(text)
    assert (s, b) == (pytest.approx(expect[0], rel=1e-12), expect[1])


@pytest.mark.parametrize("text,msg", [
    ("81ms@0", ">= 1, got 0"), ("81ms@-4", ">= 1, got -4"), ("0ms@8", "> 0 s"), ("-3ms/sample", "> 0 s"),
    ("81ms", "expected"), ("81@8", "expected"), ("fast", "expected"), ("81ms@8.5", "expected")])
def test_parse_compute_rejects(text, msg):
    with pytest.raises(ValueError, match=msg):
        parse_compute(text)


def test_measured_compute_per_sample_or_at_a_stated_batch(tmp_path):
    m = catalog.get_model("bert-large")            # catalog batch 8
    _, cl = _load(tmp_path, '[compute_s]\n"bert-large" = { seconds = 0.16, batch = 16 }\n'
                            '"resnet-50" = { per_sample_s = 0.002 }\n"gpt2-124m" = "30ms@2"\n'
                            '"bert-base" = 0.05\n')
    assert _fb(m, cl, 8) == pytest.approx(0.08, rel=1e-12)       # 0.16 s at batch 16 → 0.08 s at 8
    assert _fb(m, cl, 32) == pytest.approx(0.32, rel=1e-12)
    r50 = catalog.get_model("resnet-50")
    assert _fb(r50, cl, 64) == pytest.approx(0.128, rel=1e-12)
    assert _fb(catalog.get_model("gpt2-124m"), cl, 5) == pytest.approx(0.075, rel=1e-12)
    bb = catalog.get_model("bert-base")            # legacy bare number: at the catalog batch (32)
    assert _fb(bb, cl, 64) == pytest.approx(0.10, rel=1e-12)
    back = config.build_cluster(config.validate(config.cluster_dict(cl)))
    assert sorted(back.compute_s) == sorted(cl.compute_s)
    assert cl.measured_per_sample("resnet-50", 64) == pytest.approx(0.002)


@pytest.mark.parametrize("entry,needle", [
    ('{ seconds = 0.1, batch = 0 }', r"compute_s\.m\.batch: Input should be greater than or equal to 1"),
    ('{ seconds = 0.1, batch = -2 }', r"compute_s\.m\.batch"),
    ('{ seconds = 0.1 }', "batch: the batch the seconds were measured at"),
    ('{ per_sample_s = 0.1, batch = 4 }', "batch: not with per_sample_s"),
    ('{ seconds = 0.1, per_sample_s = 0.1, batch = 2 }', "either seconds"),
    ('{ seconds = -1.0, batch = 2 }', r"compute_s\.m\.seconds"),
    ('{ per_sample = 0.1 }', r"compute_s\.m\.per_sample"),
    ('"81ms@0"', "'m': the batch a compute time was measured at must be >= 1, got 0"),
    ('-0.5', "compute time of 'm' must be > 0"),
])
def test_bad_measured_compute_names_the_field(tmp_path, entry, needle):
    with pytest.raises(ValueError, match=needle) as exc:
        _load(tmp_path, f'[compute_s]\nm = {entry}\n')
    assert str(exc.value).startswith(str(tmp_path / "c.toml") + ": compute_s")
    assert len(str(exc.value).splitlines()) == 1


def test_cli_compute_flag(tmp_path):
    out = tmp_path / "s"
    args = ["scale", "--model", "resnet-50", "--workers", "2", "-c", "none", "--out", str(out), "--no-plot", "--quiet"]
    ok = runner.invoke(app, [*args, "--compute", "2ms/sample", "--batch-per-worker", "10"])
    assert ok.exit_code == 0, ok.output
    row = json.loads((out / "scale.json").read_text())["rows"][0]
    opt = 28 * catalog.get_model("resnet-50").params / catalog.seed_cluster().device.mem_bw
    lam = catalog.seed_cluster().interference
    assert row["compute_s"] == pytest.approx(0.02 / 3 + lam * 0.02 * 2 / 3 + opt, rel=1e-9)
    for bad, msg in (("2ms@0", "must be >= 1, got 0"), ("2ms", "expected"), ("-1ms@4", "> 0 s")):
        r = runner.invoke(app, [*args, "--compute", bad])
        assert r.exit_code != 0 and "error: --compute:" in r.output and msg in r.output, r.output
        assert "Traceback" not in r.output
    r = runner.invoke(app, ["advise", "--model", "resnet-50", "--workers", "2", "--bandwidth", "1Gbit/s",
                            "--compute", "3ms@-1", "--out", str(tmp_path / "a"), "--no-plot"])
    assert r.exit_code != 0 and "error: --compute:" in r.output and "got -1" in r.output, r.output


# ---------------------------------------------------------------- (c) families from a config file

TORCHVISION = {("resnet", 18): 11_689_512, ("resnet", 34): 21_797_672, ("resnet", 50): 25_557_032,
               ("resnet", 101): 44_549_160, ("resnet", 152): 60_192_808, ("resnext", 50): 25_028_904,
               ("vgg", 11): 132_863_336, ("vgg", 13): 133_047_848, ("vgg", 16): 138_357_544,
               ("vgg", 19): 143_667_240}


@pytest.mark.parametrize("family,depth", sorted(TORCHVISION))
def test_family_parameter_counts_equal_torchvision(family, depth):
    m = families.build("m", family, {"depth": depth})
    assert m.params == TORCHVISION[family, depth]
    dense = sum(f for k, f in m.kind_flops if k != "elementwise")
    assert m.flops_per_sample == pytest.approx(dense, rel=1e-12) and m.flops_per_sample > 6e9


def test_other_families_match_references():
    assert families.build("e", "efficientnet", {}).params == 5_288_548                  # torchvision
    assert families.build("x", "resnext", {"depth": 101, "groups": 32, "width_per_group": 8}).params == 88_791_336
    assert families.build("x", "resnext", {"depth": 101}).params == 44_177_704          # NVIDIA's 44.18 M
    bert = families.build("b", "transformer", {"layers": 24, "width": 1024})
    ref = catalog.get_model("bert-large")
    # 6·N·T + 6·L·T²·d with the built N = 335.1 M; the catalog's 0.264 TFLOP takes the paper's rounded 340 M
    assert bert.params == ref.params and bert.flops_per_sample == pytest.approx(ref.flops_per_sample, rel=0.02)
    gpt = families.build("g", "gpt", {"layers": 12, "width": 768})
    assert gpt.params == catalog.get_model("gpt2-124m").params
    assert gpt.flops_per_sample == pytest.approx(0.82e12, rel=0.02)                     # catalog notes
    ll = families.build("l", "llama", {"layers": 32, "width": 4096, "ffn": 11008})
    assert ll.params == catalog.get_model("llama-7b").params
    assert ll.flops_per_sample == pytest.approx(86.1e12, rel=0.02)


def test_family_models_from_a_config_file(tmp_path):
    _, cl = _load(tmp_path, '[[models]]\nname = "my-r50"\nfamily = "resnet"\ndepth = 50\nbatch = 128\n'
                            '[[models]]\nname = "my-bert"\nfamily = "transformer"\nlayers = 24\nwidth = 1024\n'
                            'seq = 512\n')
    r50, ref = catalog.get_model("my-r50"), catalog.get_model("resnet-50")
    assert r50.batch == 128 and r50.tensor_shapes == ref.tensor_shapes
    assert r50.flops_per_sample == pytest.approx(ref.flops_per_sample, rel=0.01)   # 6 × 4.09 G vs 24.7 G
    b = catalog.get_model("my-bert")
    assert b.flops_per_sample == pytest.approx(1.083e12, rel=0.02)   # catalog notes, T=512 (N = 340 M there)
    assert dict(b.kind_flops).keys() == {"matmul", "elementwise"}
    r = runner.invoke(app, ["scale", "--config", str(tmp_path / "c.toml"), "--model", "my-r50", "--workers", "2",
                            "-c", "none", "--out", str(tmp_path / "o"), "--no-plot", "--quiet"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("body,needle", [
    ('family = "alexnet"', r"models\.m\.family: unknown model family 'alexnet' \(known: resnet"),
    ('family = "resnet"\ndepth = 42', r"models\.m\.depth: resnet depth 42 is not supported \(supported: 18, 34, 50"),
    ('family = "resnext"\ndepth = 18', r"models\.m\.depth: resnext depth 18 is not supported"),
    ('family = "vgg"\ndepth = 17', r"models\.m\.depth: vgg depth 17"),
    ('family = "resnet"', r"models\.m\.depth: family 'resnet' needs it"),
    ('family = "transformer"\nlayers = 2\ndepth = 50\nwidth = 64', r"models\.m\.depth: not a parameter of family"),
    ('family = "efficientnet"\nvariant = "b7"', r"models\.m\.variant: efficientnet variant 'b7' is not supported"),
    ('family = "llama"\nlayers = 2\nwidth = 64', r"models\.m\.ffn: family 'llama' needs it"),
    ('family = "resnet"\ndepth = 50\ntensor_kinds = ["conv"]', r"models\.m\.tensor_kinds: only with tensor_shapes"),
])
def test_bad_family_names_the_field(tmp_path, body, needle):
    with pytest.raises(ValueError, match=needle) as exc:
        _load(tmp_path, f'[[models]]\nname = "m"\n{body}\n')
    assert len(str(exc.value).splitlines()) == 1


@pytest.mark.parametrize("body,needle", [
    ('family = "resnet"\ndepth = 0', r"models\.0\.depth: Input should be greater than or equal to 1"),
    ('family = "transformer"\nlayers = -1\nwidth = 8', r"models\.0\.layers"),
    ('family = "resnet"\ndepth = 50\ntensor_shapes = [[3]]\nflops_per_sample = 1', "either family"),
    ('batch = 4', "either family"),
    ('tensor_shapes = [[3]]', "flops_per_sample: needed with tensor_shapes"),
    ('tensor_shapes = [[3]]\nflops_per_sample = 1\ntensor_kinds = ["attention"]', "unknown layer kind"),
    ('family = "resnet"\ndepth = 50\nbatch = 0', r"models\.0\.batch"),
])
def test_bad_model_schema_names_the_field(tmp_path, body, needle):
    with pytest.raises(ValueError, match=needle):
        _load(tmp_path, f'[[models]]\nname = "m"\n{body}\n')


def test_bad_config_is_one_error_line_on_the_cli(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('[[models]]\nname = "m"\nfamily = "resnet"\ndepth = 42\n')
    r = runner.invoke(app, ["scale", "--config", str(p), "--model", "m", "--workers", "2", "-c", "none",
                            "--out", str(tmp_path / "o"), "--no-plot", "--quiet"])
    assert r.exit_code != 0 and "Traceback" not in r.output
    lines = [l for l in r.output.splitlines() if l.startswith("error:")]
    assert len(lines) == 1 and "models.m.depth" in lines[0], r.output
