"""CLI smoke runs with small sweeps that write real files."""
import json

import pytest
from typer.testing import CliRunner

import kfsim.cli.advise_cmd  # noqa: F401
import kfsim.cli.explain_cmd  # noqa: F401
import kfsim.cli.scale_cmd  # noqa: F401
from kfsim.cli import app
from kfsim.cli.explain_cmd import seed_figures
from kfsim.cli.scale_cmd import default_compressors

runner = CliRunner()


def test_scale_small_sweep_writes_files(tmp_path):
    out = tmp_path / "scale"
    r = runner.invoke(app, ["scale", "--model", "resnet-18", "--workers", "2,8,32", "-c", "none", "-c",
                            "ef(topk(ratio=0.01))", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "resnet-18" in r.output
    data = json.loads((out / "scale.json").read_text())
    assert len(data["rows"]) == 6 and data["meta"]["scale"]["workers"] == [2, 8, 32]
    assert (out / "scale.csv").read_text().count("\n") == 7
    assert (out / "scale.png").stat().st_size > 1000
    none = [row for row in data["rows"] if row["compressor"] == "none"]
    assert all(row["speedup_vs_none"] == pytest.approx(1.0) for row in none)
    # payload is the same at every p; the ring's wire bytes grow as 2(p−1)/p × payload
    assert len({row["payload_MiB_per_worker"] for row in none}) == 1
    for row in none:
        p = row["workers"]
        assert row["wire_MiB_per_worker"] == pytest.approx(2 * (p - 1) / p * row["payload_MiB_per_worker"])
    assert "payload MiB" in r.output and "wire MiB" in r.output


def test_scale_config_file_and_flag_override(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[scale]\nmodel = "resnet-50"\nworkers = [4]\ncompressor = ["none", "fp16"]\n'
                   '[cluster]\ninter = "10gbe"\n')
    r = runner.invoke(app, ["scale", "--config", str(cfg), "--workers", "8", "--out", str(tmp_path), "--no-plot",
                            "--quiet"])
    assert r.exit_code == 0, r.output
    rows = json.loads((tmp_path / "scale.json").read_text())["rows"]
    assert [row["workers"] for row in rows] == [8, 8]
    assert rows[0]["compressor"] == "none"


def test_scale_default_compressors_resolve():
    specs = default_compressors()
    assert specs[0] == "none()" and len(specs) >= 5


@pytest.mark.parametrize("args,msg", [(["--workers", "0"], "scale.workers"),
                                      (["--model", "alexnet"], "scale.model"),
                                      (["--bucket-mb", "100000"], "scale.bucket_mb"),
                                      (["--bandwidth", "0Gbit/s"], "--bandwidth")])
def test_scale_errors(tmp_path, args, msg):
    r = runner.invoke(app, ["scale", *args, "--out", str(tmp_path)])
    assert r.exit_code == 2
    assert msg in r.output


def test_advise_writes_heatmap(tmp_path):
    r = runner.invoke(app, ["advise", "--model", "resnet-50", "-c", "powersgd(rank=4)", "--bandwidth", "1Gbit/s,100Gbit/s",
                            "--workers", "8,64", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "advise.png").stat().st_size > 1000
    rows = json.loads((tmp_path / "advise.json").read_text())["rows"]
    assert len(rows) == 4
    low = [x["speedup"] for x in rows if x["bandwidth_gbps"] == 1]
    high = [x["speedup"] for x in rows if x["bandwidth_gbps"] == 100]
    assert min(low) > max(high)  # compression pays more on the slow network


def test_explain_seed_numbers():
    f = seed_figures()
    assert f["fig2_seed_s"] == pytest.approx(10.88)
    assert f["fig2_seed_quant_s"] == pytest.approx(2.72)
    assert f["fig2_ring_s"] == pytest.approx(10.88 * 2 * 15 / 16)
    assert f["fig1_ring_bytes_per_rank"] == pytest.approx(7.875e9)
    assert f["fig1_seed_total_bytes"] == pytest.approx(256e9)          # 64 x 4 GB: a sum of gradients
    assert f["fig1_ring_worker"] == f["fig1_ring_nic"] == pytest.approx(7.875e9)
    assert f["fig1_hierarchical_worker"] == pytest.approx(7.875e9)       # 2·3/4·4 + 2·15/16·4/4 GB
    assert f["fig1_hierarchical_nic"] == pytest.approx(7.5e9)            # 2(m−1)/m·n, one NIC per node
    assert f["fig1_rail_hierarchical_nic"] == pytest.approx(1.875e9)     # one NIC per GPU: n/g shards
    # two-level row: 2(m−1)/m·n through the node's single NIC, not the n/g shard
    assert f["fig2_hierarchical_inter_s"] == pytest.approx(16.32)
    assert f["fig2_hierarchical_s"] == pytest.approx(16.32 + 2 * 3 / 4 * 1.36e9 / 25.2e9)
    assert f["fig2_hierarchical_s"] < f["fig2_ring_s"]
    assert f["fig2_hierarchical_nic"] == pytest.approx(1.5 * 1.36e9)
    r = runner.invoke(app, ["explain-seed"])
    assert r.exit_code == 0 and "10.88" in r.output and "1.875" in r.output
    assert "256 GB" in r.output and "7.875 GB" in r.output and "16.4 s" in r.output and "not traffic" in r.output
    assert max(len(line) for line in r.output.splitlines()) <= 80


def test_scale_jitter_is_seeded(tmp_path):
    from kfsim.cli.scale_cmd import straggler_idle
    assert straggler_idle(64, 1.0, 0.2, seed=1) == straggler_idle(64, 1.0, 0.2, seed=1) > 0
    assert straggler_idle(64, 1.0, 0.0, seed=1) == 0.0
    assert straggler_idle(256, 1.0, 0.2, seed=1) > straggler_idle(4, 1.0, 0.2, seed=1)
