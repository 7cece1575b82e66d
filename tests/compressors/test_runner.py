"""The exchange runner (compressors.protocol): buckets, communicators, fusion.

* fuse/split round-trip bit for bit (several dtypes, empty and scalar arrays);
* a communicator that fuses each call into flat buffers (as the MindSpore one
  does) gives the same bits as the in-process loopback, for every example spec;
* the bucket cap changes the collectives, never the numbers;
* the runner issues exactly the plan's collectives, in the plan's order;
* DDP bucketing: backward order, cap, oversized tensors alone.
"""
from __future__ import annotations

import jax
import numpy as np
import pytest

import backends
import compressors as C
from compressors import protocol
from compressors.buckets import assign_buckets, bucket_members
from tests.backends.ops_backends import assert_same_bits
from tests.specs import EXAMPLE_SPECS

OPS = backends.get("numpy")


def grads_for(worker: int) -> dict:
    rng = np.random.default_rng(worker)
    tree = {"a": rng.standard_normal((16, 12)), "b": rng.standard_normal(12), "c": rng.standard_normal((3, 5, 4)),
            "s": np.asarray(rng.standard_normal()), "e": np.zeros((0,))}
    return {k: OPS.asarray(np.asarray(v, np.float32)) for k, v in tree.items()}


class FusingLoopback(protocol.Loopback):
    """Loopback that really fuses: one flat buffer per dtype per call, then splits."""

    def __init__(self, n):
        super().__init__(n)
        self.calls = []

    def _fused(self, ops, arrays, law):
        per_worker = [protocol.fuse(ops, [a[w] for a in arrays]) for w in range(self.n)]
        segs = per_worker[0][1]
        assert all(p[1] == segs for p in per_worker), "every worker fuses the same layout"
        bufs = [[p[0][b] for p in per_worker] for b in range(len(per_worker[0][0]))]
        self.calls.append((law, len(bufs), len(arrays)))
        if law == "sum":
            return protocol.split(ops, super().sum(ops, bufs), segs)
        return protocol.split(ops, super().gather(ops, bufs), segs, (self.n,))

    def sum(self, ops, arrays):
        return self._fused(ops, arrays, "sum")

    def gather(self, ops, arrays):
        return self._fused(ops, arrays, "gather")


def run_steps(spec, comm_factory, n=3, steps=2, bucket_bytes=protocol.DEFAULT_BUCKET_BYTES):
    comp = C.parse(spec)
    states = [comp.init(OPS, grads_for(w)) for w in range(n)]
    out = []
    for t in range(steps):
        grads = [grads_for(10 * t + w) for w in range(n)]
        keys = [C.make_keys(OPS, 3, t, w) for w in range(n)]
        res = protocol.run(OPS, comp.step(t), grads, states, keys, comm_factory(n), bucket_bytes=bucket_bytes)
        states = res.states
        out.append((res.mean, states))
    return out


def assert_trees_equal(got, want, where):
    g, gd = jax.tree_util.tree_flatten(got)
    w, wd = jax.tree_util.tree_flatten(want)
    assert gd == wd, where
    for i, (a, b) in enumerate(zip(g, w)):
        assert_same_bits(np.asarray(a), np.asarray(b), f"{where} leaf {i}")


def test_fuse_split_roundtrip_is_exact():
    arrays = [OPS.asarray(np.arange(6, dtype=np.float32).reshape(2, 3)), OPS.asarray(np.zeros((0, 4), np.float32)),
              OPS.asarray(np.array([7, -1], np.int32)), OPS.asarray(np.float32(2.5)),
              OPS.asarray(np.array([np.nan, -0.0], np.float32)), OPS.asarray(np.zeros((0,), np.uint32))]
    bufs, segs = protocol.fuse(OPS, arrays)
    assert [np.dtype(b.dtype) for b in bufs] == [np.float32, np.int32, np.uint32]
    assert [b.shape for b in bufs] == [(9,), (2,), (0,)]
    for a, b in zip(protocol.split(OPS, bufs, segs), arrays):
        assert_same_bits(np.asarray(a), np.asarray(b), "split")
    stacked = [OPS.stack([b, b]) for b in bufs]
    for a, b in zip(protocol.split(OPS, stacked, segs, (2,)), arrays):
        assert a.shape == (2,) + tuple(b.shape)
        assert_same_bits(np.asarray(a)[1], np.asarray(b), "split after gather")


@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_fused_buffers_give_the_same_bits(spec):
    want = run_steps(spec, protocol.Loopback)
    got = run_steps(spec, FusingLoopback)
    for t, (g, w) in enumerate(zip(got, want)):
        assert_trees_equal(g, w, f"{spec} step {t}")


@pytest.mark.parametrize("spec", ["ef(topk(ratio=0.1))", "powersgd(rank=2)", "int8()", "none()"])
def test_bucket_cap_changes_collectives_not_numbers(spec):
    want = run_steps(spec, protocol.Loopback)
    got = run_steps(spec, protocol.Loopback, bucket_bytes=64)
    for t, (g, w) in enumerate(zip(got, want)):
        assert_trees_equal(g, w, f"{spec} step {t}")
    tree = grads_for(0)
    one, many = C.parse(spec).exchange_plan(tree), C.parse(spec).exchange_plan(tree, bucket_bytes=64)
    assert len(one.buckets) == 1 and len(many.buckets) > 1
    assert len(many.collectives) > len(one.collectives)
    assert one.payload_bits == many.payload_bits
    assert one.bits_per_round() == many.bits_per_round()


@pytest.mark.parametrize("spec", ["ef(topk(ratio=0.1))", "powersgd(rank=2)", "qsgd(levels=4, bucket=0)",
                                  "filter(topk(ratio=0.1), min_size=50, min_ndim=2)"])
def test_runner_issues_exactly_the_plans_collectives(spec):
    comm = FusingLoopback(2)
    comp = C.parse(spec)
    grads = [grads_for(w) for w in range(2)]
    res = protocol.run(OPS, comp, grads, [comp.init(OPS, g) for g in grads],
                       [C.make_keys(OPS, 0, 0, w) for w in range(2)], comm, bucket_bytes=300)
    assert [c[0] for c in comm.calls] == [c.law.value for c in res.plan.collectives]
    for c in res.plan.collectives:
        assert all(c.round < len(res.plan.leaf_rounds[i]) and res.plan.leaf_rounds[i][c.round].law is c.law
                   for i in c.leaves)
    covered = sorted(i for c in res.plan.collectives if c.round == 0 for i in c.leaves)
    with_rounds = [i for i, rounds in enumerate(res.plan.leaf_rounds) if rounds]
    assert covered == with_rounds
    assert len(with_rounds) == len(res.plan.leaf_rounds) - 1       # only the empty leaf "e" sends nothing
    assert res.plan.leaf_rounds[sorted(grads[0]).index("e")] == ()


def test_state_mirrors_the_gradient_tree():
    g = grads_for(0)
    state = C.parse("ef(topk(ratio=0.1))").init(OPS, g)
    assert isinstance(state, dict) and sorted(state) == sorted(g)
    assert state["a"].residual.shape == g["a"].shape


def test_ddp_buckets():
    # forward order sizes; backward walk: 40 | 30+20 | 100 (alone, above cap) | 10+10
    ids = assign_buckets([10, 10, 100, 20, 30, 40], cap_bytes=50)
    assert ids.tolist() == [3, 3, 2, 1, 1, 0]
    assert bucket_members(ids) == ((5,), (4, 3), (2,), (1, 0))
    assert assign_buckets([], 10).tolist() == []
    with pytest.raises(ValueError, match="bucket cap"):
        assign_buckets([1.0], 0)


def test_empty_tree_and_scalar_only_tree():
    comp = C.parse("ef(topk(ratio=0.5))")
    for tree in ({}, {"s": OPS.asarray(np.float32(3.0))}):
        res = protocol.run(OPS, comp, [tree, tree], [comp.init(OPS, tree)] * 2,
                           [C.make_keys(OPS, 0, 0, w) for w in range(2)])
        assert jax.tree_util.tree_structure(res.mean) == jax.tree_util.tree_structure(tree)
        for k in tree:
            np.testing.assert_array_equal(np.asarray(res.mean[k]), np.asarray(tree[k]))
