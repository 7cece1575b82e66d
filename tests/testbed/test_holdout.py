"""Held-out validation: one α, e, γ across rates and worker counts (no testbed needed)."""
import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kfsim.cli.testbed_cmd  # noqa: F401  (registers validate)
from kfsim.cli import app
from kfsim.sim import collectives
from kfsim.testbed import holdout as ho, microbench

ROOT = Path(__file__).resolve().parents[2]

ALPHA, EFF, GAMMA = 80e-6, 0.85, 1.5e-9
RATES, WORKERS, SIZES = (50.0, 200.0, 1000.0), (2, 3, 4, 8), (4096, 65536, 262144, 1048576, 4194304)


def _time(op, rate, p, n, burst):
    """The echo-ring cost written out, independently of the design matrix under test."""
    beta = 8 / (EFF * rate * 1e6)
    b = max(32 * 1024, rate * 1e6 / 8 / 250) if burst else 0.0
    if op == "allreduce":
        return 4 * (p - 1) * ALPHA + max(4 * (p - 1) * n / p - b, 0) * beta + (p - 1) / p * n * GAMMA
    return 2 * (p - 1) * ALPHA + max(2 * (p - 1) * n - b, 0) * beta


def _data(burst):
    cells = [{"rate_mbit": r, "op": op, "p": p, "nbytes": n, "seconds": _time(op, r, p, n, burst), "tx_per_rank": 0}
             for r in RATES for p in WORKERS for op in ("allreduce", "allgather") for n in SIZES]
    return {"collectives": cells, "compute": [], "models": {}, "steps": []}


def test_no_burst_design_is_the_simulators_closed_form():
    for p in WORKERS:
        for n in SIZES:
            beta = 8 / (EFF * 200e6)
            x = ho.physical_design("allreduce", 200.0, p, n)
            assert x @ [ALPHA, 1 / EFF, GAMMA] == pytest.approx(
                float(collectives.mccl_allreduce(p, n, ALPHA, beta, GAMMA)), rel=1e-12)
            x = ho.physical_design("allgather", 200.0, p, n)
            assert x @ [ALPHA, 1 / EFF, GAMMA] == pytest.approx(
                float(collectives.mccl_allgather(p, n, ALPHA, beta)), rel=1e-12)


@pytest.mark.parametrize("burst", [True, False])
def test_fit_on_subset_recovers_parameters_and_predicts_held_out_exactly(burst):
    data = _data(burst)
    subset = ho.parse_subset("p=2,rates=50,1000")
    cells = ho.calibration_cells(data, subset)
    assert len(cells) == 2 * 2 * len(SIZES) and all(c["p"] == 2 and c["rate_mbit"] != 200 for c in cells)
    fit = ho.fit_physical(cells, burst=burst)
    assert (fit.alpha, fit.efficiency, fit.gamma) == pytest.approx((ALPHA, EFF, GAMMA), rel=1e-6)
    assert fit.beta(200.0) == pytest.approx(8 / (EFF * 200e6), rel=1e-6)
    rows = ho.collective_rows(data, subset, fit)
    held = [r for r in rows if not r.in_sample]
    assert len(held) == len(rows) - len(cells) and {r.p for r in held} == set(WORKERS)
    assert any(r.rate_mbit == 200.0 and r.p == 2 for r in held)
    assert max(abs(r.rel_error) for r in rows) < 1e-6
    groups = {g.group: g for g in ho.summarise(rows)}
    assert groups["collective held-out"].n == len(held) and groups["all held-out"].worst_abs_error < 1e-6


def test_wrong_model_shows_up_as_held_out_error():
    """Data with burst, fitted without: held-out cells are mispredicted (the check can fail)."""
    data = _data(burst=True)
    subset = ho.parse_subset("p=2,rates=50,1000")
    fit = ho.fit_physical(ho.calibration_cells(data, subset), burst=False)
    rows = ho.collective_rows(data, subset, fit)
    assert max(abs(r.rel_error) for r in rows if not r.in_sample) > 0.05


def test_parse_subset_forms():
    assert ho.parse_subset("p=2,rates=50,1000") == ho.Subset((2,), (50.0, 1000.0))
    assert ho.parse_subset("p=4,2; rates=1Gbit/s,200") == ho.Subset((2, 4), (200.0, 1000.0))
    assert ho.parse_subset("rates=50 p=2") == ho.Subset((2,), (50.0,))
    s = ho.parse_subset(ho.DEFAULT_SUBSET)
    assert s.holds(50, 2) and s.holds(1000.0, 2) and not s.holds(200, 2) and not s.holds(50, 4)
    assert ho.parse_subset(str(s)) == s


@pytest.mark.parametrize("text, mention", [
    ("", "empty"), ("p=two,rates=50", "integers"), ("p=1,rates=50", ">= 2"), ("rates=50", "p= needs"),
    ("p=2", "rates= needs"), ("p=2,rates=fast", "bandwidth"), ("p=2,rates=-5", "> 0"),
    ("q=2,rates=50", "unknown key"), ("2,rates=50", "before any key"), ("p=2,p=4,rates=50", "twice")])
def test_parse_subset_rejects(text, mention):
    with pytest.raises(ValueError, match="--calibrate-on") as exc:
        ho.parse_subset(text)
    assert mention in str(exc.value)


def _write(tmp_path):
    prof = tmp_path / "profiles"
    prof.mkdir()
    (prof / "testbed-measurements.json").write_text(json.dumps(_data(burst=True)))
    (tmp_path / "nocases.json").write_text("[]")
    return prof


@pytest.mark.parametrize("subset, mention", [("p=two,rates=50", "integers"), ("p=2,rates=", "rates= needs"),
                                             ("p=2;rates=10Qbit/s", "bandwidth"), ("p=16,rates=50", "no stored")])
def test_cli_bad_calibrate_on_is_one_error_line(tmp_path, subset, mention):
    prof = _write(tmp_path)
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["validate", "--profiles", str(prof), "--calibrate-on", subset,
                                 "--cases", str(tmp_path / "nocases.json"), "--out", str(out)])
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    err = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("error: ") and mention in err[0], r.stderr
    assert not (out / "holdout.json").exists()


def test_cli_holdout_writes_table(tmp_path):
    prof = _write(tmp_path)
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["validate", "--profiles", str(prof), "--calibrate-on", "p=2,rates=50,1000",
                                 "--cases", str(tmp_path / "nocases.json"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "holdout.json").read_text())
    assert doc["calibrate_on"] == "p=2,rates=50,1000"
    assert doc["fit"]["alpha_us"] == pytest.approx(ALPHA * 1e6, rel=1e-6)
    assert doc["fit"]["efficiency"] == pytest.approx(EFF, rel=1e-6)
    held = [x for x in doc["rows"] if x["group"] == "collective held-out"]
    assert len(held) == len(doc["rows"]) - 20 and max(abs(x["rel_error"]) for x in doc["rows"]) < 1e-6
    assert "held-out" in r.output and "in-sample" in r.output


def _steps(*ps):
    return [{"p": p, "spec": s, "model": "wide-1400", "global_batch": 64, "seconds": 0.1 if s == "native" else 0.2}
            for p in ps for s in ("native", "quantize(bits=8)")]


def test_local_costs_come_from_a_p_that_has_independent_jobs():
    data = _data(burst=True) | {"steps": _steps(2, 4)}   # p = 3: collectives only
    subset = ho.parse_subset("p=2,3,rates=50,1000")
    assert ho.local_cost_workers(data, subset, 4, "calibration") == 2   # not 3, which has no jobs
    assert ho.local_cost_workers(data, subset, 4, "each-p") == 4
    with pytest.raises(ValueError, match=r"each-p: no independent-job steps at p=3 \(stored at p=\[2, 4\]"):
        ho.local_cost_workers(data, subset, 3, "each-p")
    with pytest.raises(ValueError, match=r"no independent-job steps at any calibration p=\[3\]"):
        ho.local_cost_workers(data, ho.parse_subset("p=3,rates=50"), 4, "calibration")


def test_cli_each_p_without_jobs_at_a_case_p_is_one_error_line(tmp_path):
    prof = _write(tmp_path)
    data = json.loads((prof / "testbed-measurements.json").read_text())
    (prof / "testbed-measurements.json").write_text(json.dumps(data | {"steps": _steps(2)}))
    cases = [{"kind": "none", "detail": "wide-1400", "rate_mbit": 50.0, "p": p, "predicted_s": 1.0, "measured_s": 1.0}
             for p in (2, 4)]
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["validate", "--profiles", str(prof), "--holdout", "--local-costs", "each-p",
                                 "--cases", str(tmp_path / "cases.json"), "--out", str(out)])
    err = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.exit_code != 0 and len(err) == 1 and "no independent-job steps at p=4" in err[0], r.output
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("p, pc, cores, want", [
    (4, 2, 2, 2.0), (2, 2, 2, 1.0), (3, 2, 2, 1.5), (4, 4, 2, 1.0), (2, 4, 2, 0.5), (8, 2, 16, 1.0),
    (4, 2, None, 1.0), (4, 2, 0, 1.0)])
def test_host_share_is_processor_sharing_of_the_host_s_cores(p, pc, cores, want):
    assert ho.host_share(p, pc, cores) == want


def test_profiles_for_more_workers_than_cores_run_their_local_costs_slower(tmp_path):
    """Local costs taken at p = 2 on a 2-core host, written for p = 4: compute, codec and memory 2x slower;
    without host.cores in the measurements (data before 2026-12-06's evening) they are taken as they are."""
    from kfsim.testbed.profile import read_profile
    stored = json.loads((ROOT / "profiles/testbed-measurements.json").read_text())
    assert stored["host"] == {"cores": 2}
    subset = ho.parse_subset("p=2,rates=50,1000")
    fit = ho.fit_physical(ho.calibration_cells(stored, subset))

    def written(data, d):
        paths = ho.holdout_profiles(data, subset, fit, [200.0], [2, 4], tmp_path / d)
        return {p: tomllib.loads(paths[200.0, p].read_text()) for p in (2, 4)}
    shared = written(stored, "shared")
    plain = written({k: v for k, v in stored.items() if k != "host"}, "plain")
    assert shared[2] == plain[2]
    s4, p4 = shared[4], plain[4]
    assert s4["compute_s"]["wide-1400"] == pytest.approx(2 * p4["compute_s"]["wide-1400"])
    assert s4["codec"]["elementwise_gbs"] == pytest.approx(p4["codec"]["elementwise_gbs"] / 2)
    assert s4["codec"]["op_overhead_us"] == pytest.approx(2 * p4["codec"]["op_overhead_us"])
    assert "x2 for 4 workers on 2 cores" in s4["source"] and "x2" not in p4["source"]
    dev_s, dev_p = s4["cluster"]["device"], p4["cluster"]["device"]
    assert dev_s["mem_bw_gbs"] == pytest.approx(dev_p["mem_bw_gbs"] / 2)
    net = ("bandwidth_gbps", "latency_us", "efficiency")              # the network is not the host's
    assert [s4["cluster"]["inter"][k] for k in net] == [p4["cluster"]["inter"][k] for k in net]
    assert s4["cluster"]["gamma_s_per_byte"] == p4["cluster"]["gamma_s_per_byte"]
    read_profile(tmp_path / "shared" / "holdout-200mbit-p4.toml")  # a valid profile


def test_calibrate_records_the_host_s_cores_with_local_costs():
    from kfsim.testbed.calibrate import load_measurements, merge
    import os
    empty = load_measurements(Path("/nonexistent/x.json"))
    assert "host" not in merge(dict(empty), [], [], {}, [])
    step = {"p": 2, "spec": "native", "model": "m", "global_batch": 64, "seconds": 0.1}
    assert merge(dict(empty), [], [], {}, [step])["host"] == {"cores": len(os.sched_getaffinity(0))}
    cell = microbench.Measured(50.0, "allreduce", 2, 4096, 0.01, 0)
    assert merge(dict(empty), [cell], [], {}, [])["host"] == {"cores": len(os.sched_getaffinity(0))}


def _shared_data(cores):
    """Cells whose per-message cost is ALPHA·max(1, p/cores): p ranks share the host's cores."""
    data = _data(burst=True)
    for c in data["collectives"]:
        x = ho.physical_design(c["op"], c["rate_mbit"], c["p"], c["nbytes"], True)
        c["seconds"] = float(x @ [ALPHA * ho.host_share(c["p"], 1, cores), 1 / EFF, GAMMA])
    return data | {"host": {"cores": cores}}


def test_messages_of_more_ranks_than_cores_cost_alpha_times_the_share():
    """Fitted on p = 2 and 4 with the host's cores, α is recovered and every cell predicted exactly;
    without them (one α for every p) the held-out p = 8 cells are mispredicted (the check can fail)."""
    data = _shared_data(2)
    subset = ho.parse_subset("p=2,4,rates=50,1000")
    fit = ho.fit_physical(ho.calibration_cells(data, subset), cores=ho.host_cores(data))
    assert fit.cores == 2 and (fit.alpha, fit.efficiency, fit.gamma) == pytest.approx((ALPHA, EFF, GAMMA), rel=1e-6)
    assert [fit.alpha_at(p) for p in (1, 2, 3, 4, 8)] == pytest.approx([ALPHA, ALPHA, 1.5 * ALPHA, 2 * ALPHA, 4 * ALPHA])
    assert fit.at(200.0, 8).alpha == pytest.approx(4 * ALPHA) and fit.at(200.0).alpha == pytest.approx(ALPHA)
    assert max(abs(r.rel_error) for r in ho.collective_rows(data, subset, fit)) < 1e-6
    flat = ho.fit_physical(ho.calibration_cells(data, subset))
    assert max(abs(r.rel_error) for r in ho.collective_rows(data, subset, flat) if r.p == 8) > 0.05


def test_design_takes_an_array_of_worker_counts():
    """As fit.design does: rows for every p at once, each equal to its scalar row."""
    import numpy as np
    ps = np.array([1, 2, 3, 4, 8])
    for cores in (None, 2):
        rows = ho.physical_design("allreduce", 200.0, ps, 1 << 20, True, cores)
        assert rows.shape == (5, 3)
        for p, row in zip(ps, rows):
            assert row == pytest.approx(ho.physical_design("allreduce", 200.0, int(p), 1 << 20, True, cores))
    assert list(ho.host_share(ps, 2, 2)) == [1.0, 1.0, 1.5, 2.0, 4.0]


def test_profiles_carry_alpha_at_their_p(tmp_path):
    stored = json.loads((ROOT / "profiles/testbed-measurements.json").read_text())
    data = _shared_data(2) | {"steps": _steps(2), "models": stored["models"]}
    subset = ho.parse_subset("p=2,rates=50,1000")
    fit = ho.fit_physical(ho.calibration_cells(data, subset), cores=2)
    paths = ho.holdout_profiles(data, subset, fit, [200.0], [2, 4], tmp_path)
    lat = {p: tomllib.loads(paths[200.0, p].read_text())["cluster"]["inter"]["latency_us"] for p in (2, 4)}
    assert lat[2] == pytest.approx(ALPHA * 1e6) and lat[4] == pytest.approx(2 * ALPHA * 1e6)


def test_cli_no_host_share_fits_one_alpha_for_every_p(tmp_path):
    prof = tmp_path / "prof"
    prof.mkdir()
    (prof / "testbed-measurements.json").write_text(json.dumps(_shared_data(2)))
    docs = {}
    for flag in ("--host-share", "--no-host-share"):
        out = tmp_path / flag
        r = CliRunner().invoke(app, ["validate", "--profiles", str(prof), "--calibrate-on", "p=2,4,rates=50,1000",
                                     "--cases", "none", "--out", str(out), flag])
        assert r.exit_code == 0, r.output
        docs[flag] = json.loads((out / "holdout.json").read_text())
    assert docs["--host-share"]["host_cores"] == 2 and docs["--no-host-share"]["host_cores"] is None
    assert docs["--host-share"]["fit"]["alpha_us"] == pytest.approx(ALPHA * 1e6, rel=1e-6)
    worst = {f: max(abs(x["rel_error"]) for x in d["rows"]) for f, d in docs.items()}
    assert worst["--host-share"] < 1e-6 < 0.05 < worst["--no-host-share"]
