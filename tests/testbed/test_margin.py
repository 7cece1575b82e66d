"""advise's margin: a speedup pays only beyond the validated error of its regime."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kfsim.testbed import margin as M


def test_every_compressed_case_with_a_native_twin_is_scored():
    raw = json.loads(M.DEFAULT_CASES.read_text())
    twins = {(c["rate_mbit"], c["p"]) for c in raw if c["kind"] == "none"}
    expected = sum(1 for c in raw if c["kind"] != "none" and (c["rate_mbit"], c["p"]) in twins)
    errs = M.speedup_errors()
    assert len(errs) == expected > 10
    assert all(r in M.REGIMES and e >= 0 for r, *_, e in errs)
    got = M.validated()
    assert set(got) == set(M.REGIMES)
    worst = max(e for *_, e in errs)
    for m in got.values():
        mine = [e for r, *_, e in errs if r == m.regime]
        assert m.error == (max(mine) if mine else worst) and m.cases == len(mine)


def test_pays_only_beyond_the_error():
    m = M.Margin("network", 0.2, 5)
    assert not m.pays(1.001) and not m.pays(1.2) and m.pays(1.21)
    assert m.margin(1.2) == pytest.approx(0.0) and m.margin(2.4) == pytest.approx(1.0)
    assert "no validated case" in M.describe(M.Margin("codec", 0.5, 0)) and "5 validated cases" in M.describe(m)


def test_corrupt_cases_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "v.json"
    bad.write_text("[{")
    with pytest.raises(ValueError, match="unreadable"):
        M.speedup_errors(bad)


def test_advise_marks_pays_by_margin(tmp_path):
    import kfsim.cli as cli
    import kfsim.cli.advise_cmd  # noqa: F401  (registers the command)
    # PowerSGD on 64 slow-linked workers clears any validated error; on 2 workers in one node it is slower
    r = CliRunner().invoke(cli.app, ["advise", "--out", str(tmp_path), "--no-plot", "-b", "0.1Gbit/s,100Gbit/s",
                                     "--workers", "2,64", "-c", "powersgd(rank=4)"])
    assert r.exit_code == 0, r.output
    assert "main uncertainty:" in r.output and "validated error" in r.output
    rows = json.loads((tmp_path / "advise.json").read_text())["rows"]
    for row in rows:
        assert row["pays"] == (row["speedup"] > 1 + row["validated_error"])
        assert row["regime"] in M.REGIMES
    assert any(r["pays"] for r in rows) and not all(r["pays"] for r in rows)
