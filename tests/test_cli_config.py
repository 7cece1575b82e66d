"""``--config FILE`` on every command (flags > file > defaults), one spelling per concept,
values with units, deprecated spellings, ``--import`` without PYTHONPATH.

Commands that would start real jobs (launch, testbed, calibrate, validate) prove that a
file's value arrives by the error it causes before any job or root check starts.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import rich.markup
from typer.testing import CliRunner

import kfsim.cli as cli
from kfsim import units
from kfsim.cli import options
from kfsim.records import read

for _mod in cli.COMMAND_MODULES:
    importlib.import_module(_mod)

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
# the installed entry point's view: no current directory on sys.path (-P), no PYTHONPATH
KFSIM = [sys.executable, "-P", "-c", "from kfsim.cli import main; main()"]


def invoke(*args, config: str | None = None, tmp: Path | None = None):
    argv = [str(a) for a in args]
    if config is not None:
        path = tmp / "kfsim.toml"
        path.write_text(config)
        argv += ["--config", str(path)]
    return runner.invoke(cli.app, argv)


def one_error(r) -> str:
    err = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.exit_code == 2 and len(err) == 1 and err[0].startswith("error: "), (r.exit_code, r.output)
    return err[0]


# ---------------------------------------------------------------------------- units

def test_units_parse_explicit_units():
    assert units.bandwidth("1Gbit/s") == 1e9
    assert units.bandwidth("100 Mbit/s") == 1e8
    assert units.bandwidth("2.5Gbps") == 2.5e9
    assert units.bandwidth("12.5GB/s") == 1e11          # bytes: x 8
    assert units.bandwidth("800kb/s") == 8e5
    assert units.bandwidth("1e3Mbit/s") == 1e9
    assert units.duration("50us") == pytest.approx(50e-6)
    assert units.duration("50µs") == units.duration("50μs") == pytest.approx(50e-6)
    assert units.duration("2ms") == pytest.approx(2e-3)
    assert units.duration("1.5s") == 1.5 and units.duration("30min") == 1800 and units.duration("0") == 0
    assert units.duration("30", bare="s") == 30 and units.duration(120, bare="s") == 120
    assert units.split_list(["1Gbit/s,2Gbit/s", "3Gbit/s"]) == ["1Gbit/s", "2Gbit/s", "3Gbit/s"]
    assert units.format_bandwidth(1e9) == "1Gbit/s" and units.format_duration(5e-5) == "50us"


@pytest.mark.parametrize("bad,message", [("1", "needs a unit"), (1.0, "needs a unit"), ("1Gbit", "unknown"),
                                         ("0Gbit/s", "> 0"), ("-1Mbit/s", "> 0"), ("fast", "not a bandwidth"),
                                         ("1 G bit/s", "not a bandwidth"), (True, "not a bandwidth")])
def test_bandwidth_rejects(bad, message):
    with pytest.raises(ValueError, match=message):
        units.bandwidth(bad)


@pytest.mark.parametrize("bad,message", [("50", "needs a unit"), ("5 fortnights", "unknown time unit"),
                                         ("-1ms", ">= 0"), ("inf s", "not a duration")])
def test_duration_rejects(bad, message):
    with pytest.raises(ValueError, match=message):
        units.duration(bad)


# ----------------------------------------------------------- a config value per command

def test_scale_config_used_and_flags_win(tmp_path):
    cfg = ('[scale]\nmodel = "resnet-18"\nworkers = [2, 4]\ncompressor = ["none()", "fp16()"]\n'
           'bandwidth = "10Gbit/s"\nbatch_per_worker = 16\noverlap = false\nplot = false\nquiet = true\n')
    r = invoke("scale", "--out", tmp_path / "a", config=cfg, tmp=tmp_path)
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "a" / "scale.json").read_text())
    meta = data["meta"]
    assert meta["scale"]["model"] == "resnet-18" and meta["scale"]["workers"] == [2, 4]
    assert meta["scale"]["batch_per_worker"] == 16 and meta["scale"]["overlap"] is False
    assert meta["cluster"]["cluster"]["inter"]["bandwidth_gbps"] == pytest.approx(10)
    assert {row["compressor"] for row in data["rows"]} == {"none()", "fp16()"}
    assert not (tmp_path / "a" / "scale.png").exists()
    # a flag beats the file; the file beats the default
    r = invoke("scale", "--out", tmp_path / "b", "--workers", "8", "--bandwidth", "100Mbit/s", "--overlap",
               config=cfg, tmp=tmp_path)
    assert r.exit_code == 0, r.output
    meta = json.loads((tmp_path / "b" / "scale.json").read_text())["meta"]
    assert meta["scale"]["workers"] == [8] and meta["scale"]["model"] == "resnet-18"
    assert meta["scale"]["overlap"] is True
    assert meta["cluster"]["cluster"]["inter"]["bandwidth_gbps"] == pytest.approx(0.1)


def test_advise_config_used_inherits_scale_and_flags_win(tmp_path):
    cfg = ('[scale]\nmodel = "resnet-50"\nworkers = [4, 8]\n'
           '[advise]\ncompressor = "fp16()"\nbandwidth = ["1Gbit/s", "10Gbit/s"]\nlatency = "100us"\nplot = false\n')
    r = invoke("advise", "--out", tmp_path / "a", config=cfg, tmp=tmp_path)
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "a" / "advise.json").read_text())
    assert data["meta"]["model"] == "resnet-50" and data["meta"]["compressor"] == "fp16()"
    assert {(x["bandwidth_gbps"], x["workers"]) for x in data["rows"]} == {(1, 4), (1, 8), (10, 4), (10, 8)}
    assert data["meta"]["cluster"]["cluster"]["inter"]["latency_us"] == pytest.approx(100)
    r = invoke("advise", "--out", tmp_path / "b", "--model", "resnet-18", "-b", "25Gbit/s", "-b", "50Gbit/s,100Gbit/s",
               config=cfg, tmp=tmp_path)
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "b" / "advise.json").read_text())
    assert data["meta"]["model"] == "resnet-18"
    assert sorted({x["bandwidth_gbps"] for x in data["rows"]}) == [25, 50, 100]


def test_train_config_used_and_flags_win(tmp_path):
    cfg = ('[train]\nsteps = 2\nglobal_batch = 32\nworkers = 2\nlimit_train = 256\nlimit_test = 64\n'
           'eval_every = 2\nbandwidth = "10Gbit/s"\ncompressor = "ef(topk(ratio=0.1))"\nquiet = true\n')
    r = invoke("train", "--out", tmp_path / "a", config=cfg, tmp=tmp_path)
    assert r.exit_code == 0, r.output
    rec = read(tmp_path / "a" / "record.jsonl")
    assert len(rec.steps) == 2 and rec.meta["batch"] == 32 and rec.meta["workers"] == 2
    assert rec.meta["bandwidth_gbit"] == pytest.approx(10) and rec.meta["compressor"] == "ef(topk(ratio=0.1))"
    r = invoke("train", "--out", tmp_path / "b", "--steps", "3", "--global-batch", "64", config=cfg, tmp=tmp_path)
    assert r.exit_code == 0, r.output
    rec = read(tmp_path / "b" / "record.jsonl")
    assert len(rec.steps) == 3 and rec.meta["batch"] == 64 and rec.meta["workers"] == 2


def test_train_uses_the_files_cluster(tmp_path):
    cfg = ('[cluster]\nnodes = 2\ngpus_per_node = 1\ninter = { bandwidth_gbps = 0.5, latency_us = 10 }\n'
           '[train]\nsteps = 1\nglobal_batch = 32\nworkers = 2\nlimit_train = 64\nlimit_test = 32\neval_every = 1\n')
    r = invoke("train", "--out", tmp_path / "a", "--quiet", config=cfg, tmp=tmp_path)
    assert r.exit_code == 0, r.output
    assert read(tmp_path / "a" / "record.jsonl").meta["cluster"] == str(tmp_path / "kfsim.toml")


def test_study_config_used(tmp_path):
    cfg = ('[study]\ncompressor = ["none()"]\nsteps = 2\nglobal_batch = 32\nworkers = 2\nlimit_test = 64\n'
           'eval_every = 1\nbandwidth = ["2Gbit/s"]\nquiet = true\n')
    r = invoke("study", "--out", tmp_path / "s", config=cfg, tmp=tmp_path)
    assert r.exit_code == 0, r.output
    header, row = (tmp_path / "s" / "study.csv").read_text().splitlines()[:2]
    assert "iter_s@2G" in header and row.startswith("none()")
    cfg_used = json.loads((tmp_path / "s" / "study.json").read_text())["config"]
    assert cfg_used["bandwidths"] == [2.0] and cfg_used["steps"] == 2 and cfg_used["batch"] == 32


def test_launch_config_used_and_flags_win(tmp_path):
    # rejected before msrun starts: the file's global batch 3 does not split over 2 workers
    assert "divisible" in one_error(invoke("launch", config="[launch]\nglobal_batch = 3\nworkers = 2\n",
                                           tmp=tmp_path))
    # the flag replaces the file's batch; the file's resume still arrives
    line = one_error(invoke("launch", "--global-batch", "4", config="[launch]\nglobal_batch = 3\nresume = 5\n",
                            tmp=tmp_path))
    assert "--ckpt-dir" in line
    assert "--timeout" in one_error(invoke("launch", config='[launch]\ntimeout = "0s"\n', tmp=tmp_path))


def test_testbed_calibrate_validate_config_used(tmp_path):
    assert "--workers" in one_error(invoke("testbed", config="[testbed]\nworkers = 1000\n", tmp=tmp_path))
    line = one_error(invoke("testbed", config='[testbed]\nbandwidth = "-5Mbit/s"\n', tmp=tmp_path))
    assert "testbed.bandwidth" in line and "> 0" in line
    assert "nosuch" in one_error(invoke("calibrate", config='[calibrate]\ncompressor = ["nosuch()"]\n',
                                        tmp=tmp_path))
    assert "--what" in one_error(invoke("validate", config='[validate]\nwhat = "nope"\n', tmp=tmp_path))
    # flag over file: a good --what leaves the file's bad --merge to fail
    line = one_error(invoke("validate", "--what", "collectives", config=f'[validate]\nwhat = "nope"\n'
                            f'merge = "{tmp_path}/none.json"\n', tmp=tmp_path))
    assert "none.json" in line


def test_compressors_config_used(tmp_path):
    r = invoke("compressors", config="[compressors]\nmarkdown = true\n", tmp=tmp_path)
    assert r.exit_code == 0 and r.output.startswith("| compressor |")
    r = invoke("compressors", "--no-markdown", config="[compressors]\nmarkdown = true\n", tmp=tmp_path)
    assert r.exit_code == 0 and not r.output.startswith("| compressor |")


def test_every_command_with_options_has_config():
    for name, cmd in options.all_commands().items():
        if name == "explain-seed":  # no options to set
            assert [p.name for p in cmd.params] == []
            continue
        assert "config" in {p.name for p in cmd.params}, name


def test_compressor_commands_have_import():
    takes = {"train", "study", "scale", "advise", "launch", "validate", "calibrate", "compressors", "plan"}
    for name, cmd in options.all_commands().items():
        assert ("imports" in {p.name for p in cmd.params}) == (name in takes), name


def test_yaml_and_json_files(tmp_path):
    (tmp_path / "c.yaml").write_text("scale:\n  model: resnet-18\n  workers: [2]\n  compressor: none()\n"
                                     "  quiet: true\n  plot: false\n")
    r = runner.invoke(cli.app, ["scale", "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "y")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "y" / "scale.json").read_text())["meta"]["scale"]["workers"] == [2]
    (tmp_path / "c.json").write_text(json.dumps({"compressors": {"markdown": True}}))
    r = runner.invoke(cli.app, ["compressors", "--config", str(tmp_path / "c.json")])
    assert r.output.startswith("| compressor |")


@pytest.mark.parametrize("text,mention", [
    ('[train]\nstepz = 3\n', "train.stepz: kfsim train has no such setting"),
    ('[train]\nsteps = "many"\n', "train.steps"),
    ('[train]\nconfig = "x.toml"\n', "train.config"),
    ('[scale]\nbandwidths_gbps = [1, 10]\n', "kfsim scale simulates one inter-node bandwidth"),
    ('[launch]\nglobal_batch = 64\n[study]\nbandwidth = "10"\n', "study.bandwidth"),  # another section: checked too
    ('[trian]\nsteps = 3\n', "trian"),
    ('train = 5\n', "train"),
])
def test_bad_config_is_one_error_naming_the_key(tmp_path, text, mention):
    line = one_error(invoke("train", config=text, tmp=tmp_path))
    assert mention in line and "kfsim.toml" in line, line


@pytest.mark.parametrize("text,mention", [("[scale]\nworkers = [4, 0]\n", "kfsim.toml: scale.workers"),
                                          ("[scale]\nbucket_mb = 0\n", "kfsim.toml: scale.bucket_mb"),
                                          ('[scale]\nmodel = "alexnet"\n', "kfsim.toml: scale.model")])
def test_bad_scale_values_name_file_and_key(tmp_path, text, mention):
    """[scale] values (the schema only knows they are flags) are checked when kfsim scale resolves them."""
    assert mention in one_error(invoke("scale", "--out", tmp_path, config=text, tmp=tmp_path))


def test_legacy_scale_keys_work_with_a_notice(tmp_path):
    cfg = ('[scale]\nmodel = "resnet-18"\nworkers = [2]\ncompressors = ["none()"]\nbandwidths_gbps = [5]\n'
           'plot = false\nquiet = true\n')
    r = invoke("scale", "--out", tmp_path, config=cfg, tmp=tmp_path)
    assert r.exit_code == 0, r.output
    assert "scale.compressors is deprecated, use scale.compressor" in r.stderr
    meta = json.loads((tmp_path / "scale.json").read_text())["meta"]
    assert meta["cluster"]["cluster"]["inter"]["bandwidth_gbps"] == pytest.approx(5)


def test_docs_check_sections():
    options.check_sections({"train": {"global_batch": 64}, "scale": {"bandwidth": "1Gbit/s"}})
    with pytest.raises(ValueError, match="doc.toml: advise.latency_us"):
        options.check_sections({"advise": {"latency_us": 50}}, "doc.toml")


# -------------------------------------------------------------------- deprecated flags

@pytest.mark.parametrize("command,old,new", [
    ("scale", ["--inter-gbps", "10"], ["--bandwidth", "10Gbit/s"]),
    ("scale", ["--batch=8"], ["--batch-per-worker", "8"]),
    ("advise", ["--bandwidths", "1,10"], ["--bandwidth", "1Gbit/s,10Gbit/s"]),
    ("advise", ["--latency-us", "50"], ["--latency", "50us"]),
    ("train", ["--batch", "64"], ["--global-batch", "64"]),
    ("study", ["--spec", "fp16()"], ["--compressor", "fp16()"]),
    ("launch", ["--batch", "64"], ["--global-batch", "64"]),
    ("testbed", ["--rate", "200"], ["--bandwidth", "200Mbit/s"]),
    ("calibrate", ["--rates", "50,1000", "--specs", "a();b()"],
     ["--bandwidth", "50Mbit/s,1000Mbit/s", "--compressor", "a()", "--compressor", "b()"]),
    ("validate", ["--specs", ""], []),
])
def test_deprecated_flags_are_rewritten_with_one_notice(command, old, new):
    notes = []
    assert options.rewrite_aliases(command, ["-x", *old, "--", "--batch"], notes.append) == ["-x", *new, "--",
                                                                                          "--batch"]
    assert len(notes) == len({a.partition("=")[0] for a in old if a.startswith("--")})
    assert all(n.startswith("note: ") and "deprecated" in n for n in notes)


def test_deprecated_flag_runs(tmp_path):
    r = runner.invoke(cli.app, ["scale", "--model", "resnet-18", "--workers", "2", "-c", "none()", "--inter-gbps",
                                "5", "--batch", "8", "--quiet", "--no-plot", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "note: --inter-gbps is deprecated, use --bandwidth" in r.stderr
    meta = json.loads((tmp_path / "scale.json").read_text())["meta"]
    assert meta["scale"]["batch_per_worker"] == 8
    assert meta["cluster"]["cluster"]["inter"]["bandwidth_gbps"] == pytest.approx(5)


def test_help_texts_survive_rich_markup():
    """No help text loses a bracketed part to rich markup (`[r::workers]` once vanished)."""
    for name, cmd in options.all_commands().items():
        for p in cmd.params:
            text = getattr(p, "help", None) or ""
            shown = rich.markup.render(text).plain
            assert shown == text.replace("\\[", "["), (name, p.name, text, shown)


def test_compressors_table_keeps_parameter_defaults_at_80_columns():
    proc = subprocess.run(KFSIM + ["compressors"], capture_output=True, text=True, cwd=ROOT, timeout=240,
                          env={**os.environ, "COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    assert max(len(x) for x in proc.stdout.splitlines()) <= 80
    import compressors
    from compressors.registry import fmt_param

    for e in compressors.entries():
        for p in e.params:
            assert fmt_param(p) in proc.stdout, (e.name, fmt_param(p))


# ---------------------------------------------------------------------------- --import

USER = '''
import compressors as C
from compressors.registry import register


@register("usertopk")
def usertopk(ratio: float = 0.05):
    """top-k under another name (a user compressor for the --import tests)."""
    return C.parse(f"topk(ratio={ratio})")
'''


def _scale(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(KFSIM + ["scale", "--model", "resnet-18", "--workers", "2", "-c", "usertopk(ratio=0.1)",
                                   "--quiet", "--no-plot", "--out", "out", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=240, env=env)


def test_import_a_file_or_a_module_of_the_current_directory(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "usercomp.py").write_text(USER)
    p = _scale(tmp_path)
    assert p.returncode == 2 and "usertopk" in p.stderr  # unknown without --import
    p = _scale(tmp_path, "--import", "sub/usercomp.py")
    assert p.returncode == 0, p.stderr
    rows = json.loads((tmp_path / "out" / "scale.json").read_text())["rows"]
    assert rows[0]["spec"] == "topk(ratio=0.1)"
    p = _scale(tmp_path / "sub", "--import", "usercomp")  # a module importable from the current directory
    assert p.returncode == 0, p.stderr
    (tmp_path / "kfsim.toml").write_text('[scale]\nimport = ["sub/usercomp.py"]\n')
    p = _scale(tmp_path, "--config", "kfsim.toml")
    assert p.returncode == 0, p.stderr


def test_import_errors_are_one_line(tmp_path):
    for target, mention in ((str(tmp_path / "nope.py"), "no such file"), ("no_such_mod_kfsim", "no_such_mod_kfsim"),
                            (str(tmp_path), "must be a package")):
        line = one_error(runner.invoke(cli.app, ["train", "--import", target]))
        assert f"--import {target}" in line and mention in line, line


def test_for_workers_resolves_paths(tmp_path, monkeypatch):
    from kfsim.imports import for_workers

    (tmp_path / "w.py").write_text("")
    monkeypatch.chdir(tmp_path)
    targets, paths = for_workers(["w.py", "json"])
    assert targets == [str(tmp_path / "w.py"), "json"] and len(paths) == 1
