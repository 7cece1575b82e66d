"""Contracts every compressor must keep, checked over tests/specs.py."""
from __future__ import annotations

import math

import jax
import numpy as np
import pytest
import ml_dtypes

import backends
import compressors as C
from compressors import protocol
from compressors.registry import entries
from tests.compressors.helpers import OPS, gradient_tree, leaf_state, payload_bits, run
from tests.specs import EXAMPLE_SPECS

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]


def test_every_registered_compressor_has_an_example():
    used = set()
    for spec in EXAMPLE_SPECS:
        used |= {e.name for e in entries() if f"{e.name}(" in spec}
    missing = sorted({e.name for e in entries()} - used)
    assert not missing, f"add examples to tests/specs.py for: {missing}"


@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_spec_string_round_trips(spec):
    comp = C.parse(spec)
    assert C.parse(comp.spec).spec == comp.spec
    assert comp.doc


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_output_keeps_structure_shape_and_dtype(spec, dtype):
    grads = [gradient_tree(w, dtype) for w in range(2)]
    out, states, _ = run(spec, grads, steps=2)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(grads[0])
    for k in grads[0]:
        assert out[k].shape == grads[0][k].shape, k
        assert out[k].dtype == grads[0][k].dtype, k
        assert np.all(np.isfinite(np.asarray(out[k], np.float64))), k


@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_float64_is_preserved(spec):
    """On NumPy (float64 needs no mode there; eager JAX under x64 recompiles every
    op, minutes for this list): JAX and lowered MindSpore meet float64 in the edge
    matrix (tests/test_edge_matrix.py, a third of the specs, every family)."""
    ops = backends.get("numpy")
    rng = np.random.default_rng(0)
    grads = [{k: rng.normal(size=v.shape) for k, v in gradient_tree(w).items()} for w in range(2)]
    comp = C.parse(spec)
    states = [comp.init(ops, g) for g in grads]
    for step in range(2):
        keys = [C.make_keys(ops, 0, step, r) for r in range(2)]
        out, states, _ = C.exchange(ops, comp.step(step), grads, states, keys)
        assert all(out[k].dtype == np.float64 and out[k].shape == grads[0][k].shape for k in out), spec


@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_plan_bits_equal_actual_payload_bits(spec):
    comp = C.parse(spec).step(0)
    for dtype in DTYPES:
        g = gradient_tree(0, dtype)
        res = protocol.run(OPS, comp, [g], [comp.init(OPS, g)], [C.make_keys(OPS, 1, 0)], record=True)
        plans = res.plan.leaf_rounds
        assert len(res.log) == res.plan.n_rounds
        for r, rnd in enumerate(res.log):
            for i, (plan, pay) in enumerate(zip(plans, rnd.sent[0])):
                if r < len(plan):
                    assert payload_bits(pay) == plan[r].bits, (spec, r, plan)
                else:
                    assert pay is None and rnd.received[i] is None
        assert res.plan.payload_bits == sum(r.bits for p in plans for r in p)


@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_zero_gradients_give_zeros(spec):
    grads = [{k: v * 0 for k, v in gradient_tree(w).items()} for w in range(3)]
    out, _, _ = run(spec, grads, steps=2)
    for k in out:
        np.testing.assert_array_equal(np.asarray(out[k]), 0.0)


@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_nonfinite_input_is_not_hidden(spec):
    """A NaN or inf in a worker's gradient never decodes to an all-finite tensor."""
    for bad in (np.nan, np.inf):
        grads = [gradient_tree(w) for w in range(2)]
        w = np.asarray(grads[1]["w"]).copy()
        w[3, 4] = bad
        grads[1]["w"] = OPS.asarray(w)
        out, _, _ = run(spec, grads)
        assert not np.all(np.isfinite(np.asarray(out["w"], np.float64))), (spec, bad)


@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_jit_gives_the_same_result(spec):
    comp = C.parse(spec).step(0)
    g = gradient_tree(3)
    state = comp.init(OPS, g)
    keys = C.make_keys(OPS, 5, 0)
    eager, _ = C.roundtrip(OPS, comp, g, state, keys)
    jitted, _ = jax.jit(lambda g, s, k: C.roundtrip(OPS, comp, g, s, k))(g, state, keys)
    for k in g:
        np.testing.assert_allclose(np.asarray(jitted[k], np.float64), np.asarray(eager[k], np.float64), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("spec", [s for s in EXAMPLE_SPECS if s.startswith(("ef(", "efsignsgd", "powersgd(rank=2"))])
def test_error_feedback_conserves_the_gradient_sum(spec):
    """sum_t sent_t + e_T = sum_t g_t for a single worker."""
    comp = C.parse(spec)
    state = comp.init(OPS, gradient_tree(0))
    total_g = total_sent = 0.0
    for t in range(4):
        g = gradient_tree(10 + t)
        active = comp.step(t)
        out, state = C.roundtrip(OPS, active, g, state, C.make_keys(OPS, 0, t))
        total_g = total_g + np.asarray(g["w"], np.float64)
        total_sent = total_sent + np.asarray(out["w"], np.float64)
    residual = np.asarray(leaf_state(state, gradient_tree(0), "w").residual, np.float64)
    np.testing.assert_allclose(total_sent + residual, total_g, rtol=1e-5, atol=1e-5)


# one SUM round and a linear decode; countsketch's payload sums but its decode (top-k of the
# summed sketch) is not linear: tests/compressors/test_countsketch.py checks the sketches add up
SUMMABLE = [s for s in EXAMPLE_SPECS
            if all(r.law is C.Law.SUM for r in C.parse(s).step(0).plan((12, 10))) and C.parse(s).rounds((12, 10)) == 1
            and not s.startswith("countsketch")]


@pytest.mark.parametrize("spec", SUMMABLE)
def test_summed_payloads_decode_to_the_mean_of_decompressed(spec):
    n = 4
    grads = [gradient_tree(w) for w in range(n)]
    joint, _, _ = run(spec, grads)
    comp = C.parse(spec)
    singles = []
    for w in range(n):
        out, _ = C.roundtrip(OPS, comp, grads[w], comp.init(OPS, grads[w]), C.make_keys(OPS, 0, 0, w))
        singles.append(np.asarray(out["w"], np.float64))
    tol = 2e-3 if spec.startswith(("fp16", "bf16")) else 1e-6
    np.testing.assert_allclose(np.asarray(joint["w"], np.float64), np.mean(singles, axis=0), rtol=tol, atol=tol * 4)


def _delta_contraction(spec, x):
    out, _ = C.roundtrip(OPS, C.parse(spec), {"x": OPS.asarray(x)}, C.parse(spec).init(OPS, {"x": OPS.asarray(x)}),
                         C.make_keys(OPS, 0, 0))
    err = np.sum((np.asarray(out["x"], np.float64) - x) ** 2)
    return err, np.sum(x.astype(np.float64) ** 2)


@pytest.mark.parametrize("seed", range(5))
def test_topk_is_a_k_over_d_contraction(seed):
    x = np.random.default_rng(seed).standard_cauchy(size=500).astype(np.float32)
    err, norm = _delta_contraction("topk(ratio=0.03)", x)
    assert err <= (1 - 15 / 500) * norm * (1 + 1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_scaled_sign_is_a_contraction(seed):
    x = np.random.default_rng(seed).normal(size=300).astype(np.float32)
    err, norm = _delta_contraction("scaledsign()", x)
    delta = np.sum(np.abs(x.astype(np.float64))) ** 2 / (x.size * norm)
    assert err <= (1 - delta) * norm * (1 + 1e-5)


# Unbiasedness is checked against analytic variance bounds in test_contracts.py.


@pytest.mark.parametrize("bad", [
    "topk(ratio=0)", "topk(ratio=1.5)", "topk(ratio=-0.1)", "quantize(bits=0)", "quantize(bits=17)",
    "powersgd(rank=0)", "nosuch()", "topk(ratio=", "topk(0.1, 0.2)", "ef(3)", "topk(ratio=__import__('os'))",
    "momentum(topk(), beta=1.5)", "warmup(topk(), steps=-1)", "",
])
def test_bad_specs_raise_value_error(bad):
    with pytest.raises(ValueError):
        C.parse(bad)


def test_registry_lists_every_compressor_with_docs():
    text = C.describe()
    for e in entries():
        assert e.name in text and e.doc
