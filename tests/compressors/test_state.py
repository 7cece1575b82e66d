"""Named compressor state: every per-leaf state is () or NamedTuples all the way
down, and compressors.state names, flattens and rebuilds state pytrees by path."""
from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
import pytest

import compressors as C
from compressors.dgc import DGCState
from compressors.ef import EF21State, EFState
from compressors.momentum import MomentumState
from compressors.powersgd import PowerSGDState
from compressors.randomk import RandomKState
from compressors.state import load_named, named_leaves
from tests.compressors.helpers import OPS, gradient_tree, leaf_state
from tests.specs import EXAMPLE_SPECS


def unnamed(s, where: str = "state") -> list[str]:
    """Paths inside a per-leaf state that are neither (), a NamedTuple nor an
    array inside a NamedTuple."""
    if isinstance(s, tuple) and hasattr(s, "_fields"):
        return [p for f in s._fields for p in unnamed_field(getattr(s, f), f"{where}.{f}")]
    if isinstance(s, tuple) and len(s) == 0:
        return []
    return [f"{where}: {type(s).__name__}"]


def unnamed_field(v, where: str) -> list[str]:
    return [] if hasattr(v, "shape") and hasattr(v, "dtype") else unnamed(v, where)


@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_every_per_leaf_state_is_empty_or_named_all_the_way_down(spec):
    grads = gradient_tree(0)
    comp = C.parse(spec)
    state = comp.init(OPS, grads)
    for t in range(3):  # warm-up and schedules change the compressor in force
        active = comp.step(t)
        for name, x in grads.items():
            fresh = active.for_leaf(tuple(x.shape), np.dtype(x.dtype)).init(OPS, x)
            assert unnamed(fresh) == [], (spec, t, name)
        _, new = C.roundtrip(OPS, active, grads, state, C.make_keys(OPS, 0, t))
        assert jax.tree_util.tree_structure(new) == jax.tree_util.tree_structure(state), (spec, t)
        for name in grads:
            assert unnamed(leaf_state(new, grads, name)) == [], (spec, t, name)
        state = new


def test_the_documented_state_types():
    x = {"x": OPS.asarray(np.ones((16, 12), np.float32))}
    cases = {
        "ef(topk(ratio=0.1))": (EFState, ("inner", "residual")),
        "ef21(topk(ratio=0.2))": (EF21State, ("inner", "local", "shared")),
        "dgc(ratio=0.1)": (DGCState, ("momentum", "residual")),
        "momentum(topk(ratio=0.1), beta=0.5)": (MomentumState, ("inner", "momentum")),
        "signum(beta=0.9)": (MomentumState, ("inner", "momentum")),
        "randomk(ratio=0.2)": (RandomKState, ("indices",)),
        "powersgd(rank=2, ef=False)": (PowerSGDState, ("q",)),
        "topk(ratio=0.1)": (tuple, ()),
    }
    for spec, (cls, fields) in cases.items():
        s = leaf_state(C.parse(spec).init(OPS, x), x, "x")
        assert type(s) is cls and getattr(s, "_fields", ()) == fields, spec
    s = leaf_state(C.parse("powersgd(rank=2)").init(OPS, x), x, "x")
    assert type(s) is EFState and type(s.inner) is PowerSGDState and s.inner.q.shape == (12, 2)


def test_named_leaves_join_keys_indices_and_fields():
    e, q = np.zeros(3, np.float32), np.ones((4, 2), np.float32)
    state = {"w1": EFState(PowerSGDState(q), e), "b1": EFState((), e)}
    assert [n for n, _ in named_leaves(state)] == ["b1/residual", "w1/inner/q", "w1/residual"]
    assert [n for n, _ in named_leaves((EFState(PowerSGDState(q), e), ()))] == ["0/inner/q", "0/residual"]
    assert named_leaves(()) == []


def test_load_named_rebuilds_the_template_structure_in_any_order():
    x = {"w": OPS.asarray(np.ones((16, 12), np.float32)), "b": OPS.asarray(np.ones(12, np.float32))}
    comp = C.parse("powersgd(rank=2)")
    template = comp.init(OPS, x)
    _, state = C.roundtrip(OPS, comp, x, template, C.make_keys(OPS, 0, 0))
    named = {k: np.asarray(v) for k, v in reversed(named_leaves(state))}
    assert {"w/inner/q", "w/residual", "b/residual"} <= set(named)
    back = load_named(template, named)
    assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(state)
    for a, b in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(state)):
        assert np.array_equal(np.asarray(a), np.asarray(b))


class Two(NamedTuple):
    a: object
    b: object


@pytest.mark.parametrize("change,message", [
    (lambda d: d.pop("w/b"), "state leaf 'w/b' is missing"),
    (lambda d: d.update({"w/c": np.zeros(2, np.float32)}), "state leaf 'w/c' is unexpected"),
    (lambda d: d.update({"w/a": np.zeros((3, 2), np.float32)}), r"state leaf 'w/a': shape \(3, 2\) vs \(2, 3\)"),
    (lambda d: d.update({"w/b": np.zeros(4, np.float64)}), "state leaf 'w/b': dtype float64 vs float32"),
])
def test_load_named_names_the_mismatched_path(change, message):
    template = {"w": Two(np.zeros((2, 3), np.float32), np.zeros(4, np.float32))}
    named = dict(named_leaves(template))
    change(named)
    with pytest.raises(ValueError, match=message) as info:
        load_named(template, named)
    assert "\n" not in str(info.value)
