"""Per-tensor plans: the plan file, the error measurement, the choice, and every reader of --plan."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from typer.testing import CliRunner

import compressors as C
from kfsim.cli import app
from kfsim.plans import choose as CH
from kfsim.plans import errors as E
from kfsim.plans import file as F
from kfsim.sim.exchange_cost import tensor_plan
from kfsim.sim.predict import predict_iteration
from kfsim.train import timing

NAMES = ("b1", "b2", "w1", "w2")  # the mlp's parameters, sorted


def _commands():
    import importlib

    from kfsim.cli import COMMAND_MODULES
    for m in COMMAND_MODULES:
        importlib.import_module(m)


def cli(*args):
    _commands()
    return CliRunner().invoke(app, list(args))


def write(tmp_path, text, name="p.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


GOOD = '[plan]\nmodel = "mlp"\ndefault = "fp16()"\n[plan.tensors]\nw1 = "ef(topk(ratio=0.01))"\n"b2" = "none()"\n'


# -- the file -------------------------------------------------------------------------------------

def test_plan_file_round_trips_and_is_a_compressor(tmp_path):
    plan = F.load(write(tmp_path, GOOD))
    assert plan.tensors == (("b2", "none()"), ("w1", "ef(topk(ratio=0.01))"))
    again = F.load(write(tmp_path, F.dumps(plan._replace(chosen={"budget": 0.1, "x": [1.0, "a"]})), "q.toml"))
    assert again.spec == plan.spec == C.parse(plan.spec).spec
    comp = plan.compressor()
    assert comp.at_path("w1").spec == "ef(topk(ratio=0.01))" and comp.at_path("b1").spec == "fp16()"
    js = write(tmp_path, json.dumps({"plan": {"model": "mlp", "tensors": {"w2": "int8()"}}}), "p.json")
    assert F.load(js).compressor().at_path("w2").spec == C.parse("int8()").spec


def test_indexed_plan_uses_sorted_positions(tmp_path):
    comp = F.load(write(tmp_path, GOOD)).compressor(indexed=True)
    assert [p for p, _ in comp.paths] == ["*", str(NAMES.index("b2")), str(NAMES.index("w1"))]


@pytest.mark.parametrize("text, message", [
    (GOOD.replace("w1 =", "w9 ="), "tensor 'w9' is not a parameter of model 'mlp'"),
    (GOOD.replace("ef(topk(ratio=0.01))", "topk(ratio=2)"), "tensor 'w1'"),
    (GOOD.replace("ef(topk(ratio=0.01))", "nosuch()"), "unknown compressor 'nosuch'"),
    (GOOD.replace('"none()"', "3"), "expected a compressor spec string"),
    (GOOD.replace('"none()"', "\"paths(none(), 'w', fp16())\""), "cannot itself be a per-tensor plan"),
    (GOOD.replace('model = "mlp"\n', ""), "plan.model is missing"),
    (GOOD.replace('"mlp"', '"resnet"'), "model must be one of"),
    (GOOD.replace('default = "fp16()"', 'defualt = "fp16()"'), "unknown key plan.defualt"),
    (GOOD.replace('default = "fp16()"', 'default = "fp16("'), "default"),
    ("[plan\n", "cannot parse"),
    ("", "exactly one table"),
    ('[plan]\nmodel = "mlp"\ntensors = 3\n', "plan.tensors must be a table"),
])
def test_bad_plan_files_name_the_problem(tmp_path, text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        F.load(write(tmp_path, text))


def test_plan_file_paths_and_models_are_checked(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        F.load(tmp_path / "none.toml")
    with pytest.raises(ValueError, match="ends in .toml or .json"):
        F.load(write(tmp_path, GOOD, "p.yaml"))
    with pytest.raises(ValueError, match="is for model 'mlp', not 'cnn'"):
        F.load(write(tmp_path, GOOD), model="cnn")
    with pytest.raises(ValueError, match="not both"):
        F.resolve("fp16()", write(tmp_path, GOOD))


@pytest.mark.parametrize("command", [["train", "--steps", "1"], ["launch"], ["scale"], ["advise"]])
def test_every_reader_reports_a_bad_plan_in_one_line(tmp_path, command):
    bad = write(tmp_path, GOOD.replace("w1 =", "w9 ="))
    res = cli(*command, "--plan", str(bad), "--out", str(tmp_path / "out"))
    assert res.exit_code == 2, res.output
    lines = [l for l in res.output.splitlines() if l.strip()]
    assert lines[-1].startswith("error: ") and "'w9'" in lines[-1] and "Traceback" not in res.output


# -- the simulator reads the plan per tensor ------------------------------------------------------

def test_simulator_prices_each_tensor_with_its_compressor():
    prof = timing.model_profile("mlp", 32)
    plan = C.parse("paths(none(), 'w1', topk(ratio=0.01), 'w2', fp16())")
    tp = tensor_plan(plan, prof.tensor_shapes, names=prof.tensor_names)
    for t, (name, shape) in enumerate(zip(prof.tensor_names, prof.tensor_shapes)):
        own = tensor_plan(plan.at_path(name), [shape])
        assert tp.sum_bytes[t].sum() == own.sum_bytes.sum() and tp.gather_bytes[t].sum() == own.gather_bytes.sum()
    cl = timing.cluster("nodes", 0.2, 4)
    for spec in ("fp16()", "ef(topk(ratio=0.01))"):
        same = "paths(none(), " + ", ".join(f"'{n}', {spec}" for n in NAMES) + ")"
        assert predict_iteration(prof, cl, same, 4).total_s == predict_iteration(prof, cl, spec, 4).total_s
    with pytest.raises(ValueError, match="3 tensor names for 4 tensors"):
        tensor_plan(plan, prof.tensor_shapes, names=("a", "b", "c"))


def test_unnamed_profiles_name_tensors_by_index():
    tp = tensor_plan(C.parse("paths(none(), '1', topk(ratio=0.5))"), [(8,), (8,)])
    assert tp.gather_bytes[1].sum() > 0 and tp.gather_bytes[0].sum() == 0


# -- errors and the choice -------------------------------------------------------------------------

def synthetic_grads(steps=2, workers=3, seed=0):
    rng = np.random.default_rng(seed)
    shapes = {"b1": (256,), "b2": (10,), "w1": (784, 256), "w2": (256, 10)}
    return [[{k: (rng.standard_normal(s) * (0.0 if k == "b2" else 1.0)).astype(np.float32)
              for k, s in shapes.items()} for _ in range(workers)] for _ in range(steps)]


def test_measured_errors_are_exact_where_they_must_be():
    errs = E.measure(["none()", "fp16()", "topk(ratio=0.01)"], synthetic_grads())
    rel = errs.relative()
    assert errs.names == NAMES
    assert np.all(rel[0] < 1e-6)                                     # none(): the mean, float32-rounded
    assert np.all(rel[1][[0, 2, 3]] < 1e-3) and rel[1][1] == 0.0      # fp16: tiny; a zero tensor stays 0
    assert np.all(rel[2][[0, 2, 3]] > 0.5)                           # 1 % top-k of Gaussian noise: most is lost
    assert errs.total((0, 0, 0, 0)) < 1e-6
    mixed = errs.total((2, 0, 0, 0))
    assert 0 < mixed < errs.total((2, 2, 2, 2))
    with pytest.raises(ValueError, match="at least one step"):
        E.measure(["none()"], [])


def fake_errors(candidates, rel_per_candidate):
    sq_norm = np.array([1.0, 0.0, 4.0, 2.0])
    sq_err = np.array([[r * r * max(n, 0.0) for n in sq_norm] for r in rel_per_candidate])
    return E.Errors(NAMES, tuple(C.parse(c).spec for c in candidates), sq_err, sq_norm)


CANDS = ["none()", "fp16()", "sumquant()", "ef(topk(ratio=0.01))"]
REL = [0.0, 1e-3, 0.25, 0.9]


@pytest.mark.parametrize("budget", [0.0, 1e-3, 0.2, 0.5, 0.95])
def test_exhaustive_choice_is_the_brute_force_optimum(budget):
    errs = fake_errors(CANDS, REL)
    prof, cl = timing.model_profile("mlp", 32), timing.cluster("nodes", 0.05, 4)
    got = CH.choose(errs, prof, cl, 4, budget)
    price = CH.Pricer(errs, prof, cl, 4)
    best = min(price(ch) for ch in itertools.product(range(len(CANDS)), repeat=4) if errs.total(ch) <= budget)
    assert got.method == "exhaustive" and got.predicted_s == best and got.error <= budget
    assert got.best_uniform is None or got.predicted_s <= got.best_uniform["predicted_s"]
    assert predict_iteration(prof, cl, got.spec, 4).total_s == got.predicted_s  # the spec is what was priced


def test_local_search_stays_in_budget_and_beats_uniform():
    errs = fake_errors(CANDS, REL)
    prof, cl = timing.model_profile("mlp", 32), timing.cluster("nodes", 0.2, 4)
    got = CH.choose(errs, prof, cl, 4, 0.5, exhaustive=1)
    assert got.method == "local search" and got.error <= 0.5
    assert got.predicted_s <= got.best_uniform["predicted_s"]


def test_no_feasible_plan_and_bad_budgets_are_errors():
    errs = fake_errors(["fp16()", "topk(ratio=0.01)"], [1e-3, 0.9])
    prof, cl = timing.model_profile("mlp", 32), timing.cluster("nodes", 0.2, 4)
    with pytest.raises(ValueError, match="no plan meets the error budget 0"):
        CH.choose(errs, prof, cl, 4, 0.0)
    with pytest.raises(ValueError, match="budget must be a number >= 0"):
        CH.choose(errs, prof, cl, 4, float("nan"))
    with pytest.raises(ValueError, match="not the model's"):
        CH.choose(errs, timing.model_profile("cnn", 32), cl, 4, 0.5)


def test_choice_is_priced_as_the_plan_will_run():
    errs = fake_errors(CANDS, REL)
    prof, cl = timing.model_profile("mlp", 32), timing.cluster("nodes", 0.05, 4)
    how = {"overlap": False, "bucket_mb": 1e-9}   # a testbed worker: after the backward, a collective per tensor
    got = CH.choose(errs, prof, cl, 4, 0.5, predict=how)
    assert got.predicted_s == predict_iteration(prof, cl, got.spec, 4, **how).total_s
    u = got.best_uniform
    assert u["predicted_s"] == predict_iteration(prof, cl, u["spec"], 4, **how).total_s >= got.predicted_s
    assert got.predicted_s > CH.choose(errs, prof, cl, 4, 0.5).predicted_s  # no overlap, latency per tensor

# -- end to end: kfsim plan, then kfsim train --plan ----------------------------------------------

def test_plan_command_then_train_reads_it(tmp_path, fmnist_small):
    out = tmp_path / "plan.toml"
    res = cli("plan", "-c", "none()", "-c", "ef(topk(ratio=0.01))", "--budget", "0.6", "--batches", "1",
              "--limit-train", "1024", "--bandwidth", "50Mbit/s", "--out", str(out))
    assert res.exit_code == 0, res.output
    plan = F.load(out)
    assert plan.chosen["error"] <= 0.6 and plan.chosen["predicted_s"] <= plan.chosen["best_uniform_s"]
    assert "ef(topk(ratio=0.01))" in dict(plan.tensors).values()  # 50 Mbit/s: something is worth compressing
    res = cli("train", "--plan", str(out), "--steps", "2", "--eval-every", "2", "--limit-train", "1024",
              "--limit-test", "256", "--bandwidth", "50Mbit/s", "--out", str(tmp_path / "tr"), "--quiet")
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "tr" / "summary.json").read_text())
    assert summary["compressor"] == plan.spec
    assert summary["time_per_iteration_s"] == pytest.approx(plan.chosen["predicted_s"], rel=1e-9)
    bad = cli("plan", "--budget", "-1", "--out", str(tmp_path / "x.toml"))
    assert bad.exit_code == 2 and bad.output.strip().splitlines()[-1].startswith("error: ")
