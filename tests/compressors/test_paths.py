"""Per-tensor plans (compressors.paths): each named leaf runs its own compressor, through the runner."""
from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest

import compressors as C
from compressors import protocol
from compressors.state import named_leaves
from tests.backends.ops_backends import OPS_BACKENDS, assert_same_bits, get_ops, to_numpy

SHAPES = {"w": (12, 10), "b": (10,), "s": (), "one": (1,), "e": (0,), "deep": {"layer": [(6, 4), (3,)]}}


def tree(seed: int, dtype=np.float32, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    return jax.tree_util.tree_map(lambda s: (rng.standard_normal(s) * scale).astype(dtype), SHAPES,
                                  is_leaf=lambda s: isinstance(s, tuple))


PLAN = ("paths(quantize(bits=4, bucket=64), 'b', none(), 'deep/layer/0', topk(ratio=0.25), "
        "'e', ef(topk(ratio=0.5)), 'one', fp16(), 's', ef(topk(ratio=0.5)), 'w', ef(topk(ratio=0.1)))")


def run(ops, spec, grads, steps=2, seed=3):
    comp = C.parse(spec)
    put = lambda t: jax.tree_util.tree_map(ops.asarray, t)  # noqa: E731
    states = [comp.init(ops, put(g)) for g in grads]
    out = None
    for step in range(steps):
        keys = [C.make_keys(ops, seed, step, r) for r in range(len(grads))]
        out = protocol.run(ops, comp.step(step), [put(g) for g in grads], states, keys, record=True)
        states = list(out.states)
    return out, states


def test_each_leaf_gets_its_own_compressors_rounds():
    comp = C.parse(PLAN)
    g = tree(0)
    plan = comp.exchange_plan(g)
    names = [n for n, _ in named_leaves(g)]
    for name, x, rounds in zip(names, jax.tree_util.tree_leaves(g), plan.leaf_rounds):
        own = comp.at_path(name)
        assert rounds == own.plan(x.shape, x.dtype), name
    assert comp.at_path("deep/layer/1").spec == "quantize(bits=4, bucket=64)"  # not named: the default
    assert comp.paths[0] == ("*", comp.at_path("deep/layer/1"))
    assert plan.leaf_rounds[names.index("deep/layer/1")] == C.parse("quantize(bits=4, bucket=64)").plan((3,))
    assert plan.leaf_rounds[names.index("e")] == ()  # empty tensor: no rounds whatever its compressor


def test_mean_and_state_per_leaf_equal_that_compressor_alone():
    """Deterministic entries: each leaf's mean and state are what its compressor gives on it alone."""
    ops = get_ops("numpy")
    grads = [tree(w) for w in range(3)]
    res, states = run(ops, PLAN, grads)
    comp = C.parse(PLAN)
    for name in ("w", "b", "one", "deep/layer/0", "s"):
        part = [{"x": _at(g, name)} for g in grads]
        alone, alone_states = run(ops, comp.at_path(name).spec, part)
        np.testing.assert_array_equal(to_numpy(_at(res.mean, name)), to_numpy(alone.mean["x"]), err_msg=name)
        mine = [(n, a) for n, a in named_leaves(states[1]) if n.startswith(name + "/")]
        ref = [(n.replace("x/", name + "/", 1), a) for n, a in named_leaves(alone_states[1])]
        assert [n for n, _ in mine] == [n for n, _ in ref], name
        for (n, a), (_, b) in zip(mine, ref):
            assert_same_bits(to_numpy(a), to_numpy(b), n)


def _at(t, name):
    for part in name.split("/"):
        t = t[int(part)] if isinstance(t, (list, tuple)) else t[part]
    return t


def test_state_is_named_per_path():
    comp = C.parse(PLAN)
    names = [n for n, _ in named_leaves(comp.init(get_ops("numpy"), tree(0)))]
    assert "w/residual" in names and "s/residual" in names and "e/residual" not in names  # e: empty, no state
    assert not any(n.startswith(("b/", "one/", "deep/")) for n in names), names


@pytest.mark.parametrize("backend", [b for b in OPS_BACKENDS if b != "jax"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_every_backend_agrees_bit_for_bit(backend, dtype):
    grads = [tree(w, dtype) for w in range(2)]
    want, wst = run(get_ops("jax"), PLAN, grads)
    got, gst = run(get_ops(backend), PLAN, grads)
    for a, b in zip(jax.tree_util.tree_leaves(got.mean), jax.tree_util.tree_leaves(want.mean)):
        assert_same_bits(to_numpy(a), to_numpy(b), f"{backend} mean")
    for (n, a), (_, b) in zip(named_leaves(gst[0]), named_leaves(wst[0])):
        assert_same_bits(to_numpy(a), to_numpy(b), f"{backend} state {n}")


@pytest.mark.parametrize("scale", [1e-38, 1e30, 0.0])
def test_extreme_and_zero_magnitudes_stay_finite(scale):
    grads = [tree(w, scale=scale) for w in range(2)]
    res, _ = run(get_ops("numpy"), PLAN.replace("fp16()", "none()"), grads)
    for x in jax.tree_util.tree_leaves(res.mean):
        assert np.all(np.isfinite(to_numpy(x).astype(np.float64)))
        if scale == 0.0:
            assert not np.any(to_numpy(x))


def test_rank_deficient_gradient_through_powersgd_entry():
    g = np.outer(np.arange(1, 13), np.ones(10)).astype(np.float32)  # rank 1
    grads = [{"w": g, "b": np.ones(10, np.float32)} for _ in range(2)]
    res, _ = run(get_ops("numpy"), "paths(none(), 'w', powersgd(rank=2))", grads, steps=3)
    np.testing.assert_allclose(to_numpy(res.mean["w"]), g, rtol=1e-4, atol=1e-4)  # rank 1 fits in rank 2
    np.testing.assert_array_equal(to_numpy(res.mean["b"]), 1.0)


def test_schedules_of_entries_are_followed():
    comp = C.parse("paths(none(), 'w', warmup(ef(topk(ratio=0.1)), steps=2))")
    g = tree(0)
    dense = comp.step(0).exchange_plan(g).leaf_rounds
    later = comp.step(2).exchange_plan(g).leaf_rounds
    assert comp.phase_of(0) == comp.phase_of(1) != comp.phase_of(2)
    i = [n for n, _ in named_leaves(g)].index("w")
    assert dense[i] == C.parse("none()").plan((12, 10)) and later[i] == C.parse("topk(ratio=0.1)").plan((12, 10))
    assert C.parse("paths(none(), 'w', fp16())").at is None  # nothing scheduled: no re-planning


def test_spec_round_trips_and_is_canonical():
    a = C.parse("paths(none(), 'w', fp16(), 'b', topk(ratio=0.5))")
    b = C.parse("paths(none(), 'b', topk(ratio=0.5), 'w', fp16())")
    assert a.spec == b.spec == C.parse(a.spec).spec
    assert not a.unbiased and not a.contractive  # fp16/none are neither; the plan promises what all do


@pytest.mark.parametrize("spec, message", [
    ("paths(none(), 'w')", "odd count"),
    ("paths(none(), 'w', fp16(), 'w', none())", "named twice"),
    ("paths(none(), 3, fp16())", "non-empty string"),
    ("paths(none(), '', fp16())", "non-empty string"),
    ("paths(none(), '*', fp16())", "other than"),
    ("paths(none(), 'w', 0.5)", "needs a compressor"),
    ("paths(none(), 'w', paths(none(), 'x', fp16()))", "cannot contain another plan"),
    ("paths(paths(none(), 'x', fp16()), 'w', none())", "cannot contain another plan"),
    ("ef(paths(none(), 'w', topk(ratio=0.1)))", "outermost"),
    ("warmup(paths(none(), 'w', fp16()), steps=2)", "outermost"),
])
def test_bad_plans_are_rejected(spec, message):
    with pytest.raises(ValueError, match=message):
        C.parse(spec)


def test_python_level_wrapping_of_a_plan_is_rejected():
    with pytest.raises(ValueError, match="per-tensor plan"):
        C.ef(C.paths(C.none(), "w", C.topk(0.1)))
