"""``kfsim launch --plan FILE`` end to end: a real 2-worker msrun job runs the per-tensor plan.

The plan file names tensors by path (w1, b2, ...); the launcher turns them into the
reducer's sorted positions. The job must send exactly the plan's payload (not the
default's, not one compressor's) and follow the simulated trajectory of the same plan
(``kfsim train --plan``) within test_msrun's top-k + EF tolerance. One short job."""
from __future__ import annotations

from typer.testing import CliRunner

import compressors
from kfsim import records
from kfsim.plans.file import load
from tests.mindspore.test_msrun import TOL, simulate

STEPS = 6
PLAN = '[plan]\nmodel = "mlp"\ndefault = "fp16()"\n[plan.tensors]\nw1 = "ef(topk(ratio=0.01))"\nb2 = "none()"\n'


def test_launch_runs_a_plan_file(tmp_path):
    from backends.mindspore.reducer import abstract
    from kfsim.cli import app
    from kfsim.cli import launch_cmd  # noqa: F401 - registers the command
    from kfsim.launch.launcher import model_avals

    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(PLAN)
    res = CliRunner().invoke(app, ["launch", "--plan", str(plan_file), "--workers", "2", "--steps", str(STEPS),
                                   "--global-batch", "64", "--out", str(tmp_path / "out"), "--quiet"])
    assert res.exit_code == 0, res.output
    rec = records.read(tmp_path / "out" / "record.jsonl")
    assert rec.source == "mindspore" and len(rec.steps) == STEPS
    plan = load(plan_file)
    avals = abstract(model_avals("mlp"))
    sent = compressors.parse(plan.compressor(indexed=True).spec).exchange_plan(avals).payload_bytes
    uniform = {compressors.parse(s).exchange_plan(avals).payload_bytes for s in ("fp16()", "ef(topk(ratio=0.01))")}
    assert sent not in uniform
    assert all(s.bytes_sent == sent for s in rec.steps)
    sim = simulate(plan.spec, STEPS)
    diffs = [abs(a - b) for a, b in zip(rec.losses, sim)]
    assert max(diffs) < TOL["ef(topk(ratio=0.01))"], diffs
