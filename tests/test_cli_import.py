"""``--import FILE`` on every command that takes a compressor: the user's
compressor is unknown without it and resolved with it, on train, study,
scale, advise, launch, calibrate and validate (and listed by
``compressors``); a bad import is one ``error:`` line on each.

Commands that would start real jobs (launch: msrun; calibrate, validate:
root and network namespaces) are run up to a later check that fails once the
compressor has been resolved: the error then names that check, not the
compressor. (A real msrun launch with ``--import``:
``tests/mindspore/test_launch_import.py``; without PYTHONPATH, from the
current directory: ``tests/test_cli_config.py``.)
"""
from __future__ import annotations

import importlib
import json
import sys
import uuid

import pytest
from typer.testing import CliRunner

import kfsim.cli as cli
from compressors.registry import unregister
from kfsim.records import read

for _mod in cli.COMMAND_MODULES:
    importlib.import_module(_mod)

runner = CliRunner()

USER = '''
import compressors as C
from compressors.registry import register


@register("{name}")
def {name}(ratio: float = 0.05):
    """top-k under another name: a compressor only this file defines."""
    return C.parse(f"topk(ratio={{ratio}})")
'''


@pytest.fixture
def user(tmp_path, monkeypatch):
    """(file, compressor name): a user file registering a fresh name; forgotten afterwards."""
    name = f"usertopk{uuid.uuid4().hex[:8]}"
    (tmp_path / "mine").mkdir()
    path = tmp_path / "mine" / f"{name}_mod.py"
    path.write_text(USER.format(name=name))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    yield f"mine/{path.name}", name
    sys.modules.pop(path.stem, None)
    try:
        unregister(name)
    except ValueError:
        pass


def error_line(r) -> str:
    err = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.exit_code == 2 and len(err) == 1 and err[0].startswith("error: "), (r.exit_code, r.output)
    return err[0]


def commands(spec: str) -> dict:
    """{command: argv taking ``spec``}, each as cheap as it can be run."""
    tiny = ["--workers", "2", "--global-batch", "8", "--steps", "1", "--eval-every", "1", "--limit-test", "32"]
    return {
        "train": ["train", "-c", spec, *tiny, "--limit-train", "64", "--out", "train", "--quiet"],
        "study": ["study", "-c", spec, *tiny, "-b", "1Gbit/s", "--out", "study", "--quiet"],
        "scale": ["scale", "-c", spec, "--model", "resnet-18", "--workers", "2", "--no-plot", "--out", "scale",
                  "--quiet"],
        "advise": ["advise", "-c", spec, "--model", "resnet-18", "--workers", "2", "-b", "1Gbit/s", "--no-plot",
                   "--out", "advise"],
        # launch: the spec is parsed and its lowering checked, then the preflight rejects --resume >= --steps
        "launch": ["launch", "-c", f"ef({spec})", "--steps", "2", "--resume", "5", "--ckpt-dir", "ckpt",
                   "--out", "launch"],
        # calibrate / validate: the specs are parsed, then a bad --layers / --png stops them before root
        "calibrate": ["calibrate", "-c", spec, "--layers", "abc", "--out", "calibrate"],
        "validate": ["validate", "--what", "compressed", "-c", "native", "-c", spec, "--png", "mine"],
    }


LATER_CHECK = {"launch": "resume", "calibrate": "layers", "validate": "--png"}


@pytest.mark.slow
def test_import_resolves_the_user_compressor_on_every_command(user):
    target, name = user
    spec = f"{name}(ratio=0.1)"
    for cmd, argv in commands(spec).items():  # unknown without --import
        line = error_line(runner.invoke(cli.app, argv))
        assert name in line and "unknown" in line.lower(), (cmd, line)
    for cmd, argv in commands(spec).items():
        r = runner.invoke(cli.app, [argv[0], "--import", target, *argv[1:]])
        if cmd in LATER_CHECK:
            line = error_line(r)
            assert LATER_CHECK[cmd] in line and name not in line, (cmd, line)
        else:
            assert r.exit_code == 0, (cmd, r.output)
    assert read("train/record.jsonl").meta["compressor"] == spec
    assert [row["spec"] for row in json.loads(open("scale/scale.json").read())["rows"]] == ["topk(ratio=0.1)"]
    r = runner.invoke(cli.app, ["compressors", "--import", target])
    assert r.exit_code == 0 and name in r.output, r.output


@pytest.mark.parametrize("cmd", ["train", "study", "scale", "advise", "launch", "calibrate", "validate"])
def test_a_bad_import_is_one_error_line(tmp_path, cmd):
    (tmp_path / "broken.py").write_text("1 / 0\n")
    for target, mention in ((str(tmp_path / "nope.py"), "no such file"), (str(tmp_path / "broken.py"),
                                                                            "ZeroDivisionError")):
        line = error_line(runner.invoke(cli.app, [cmd, "--import", target]))
        assert f"--import {target}" in line and mention in line, (cmd, line)
