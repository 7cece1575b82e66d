"""Lowered MindSpore: integer ``//`` and ``%``, uint32 wrap-around, the
kit's hash and medians, and the fixed key under ``rng="fast"``.

Each program is compiled to a GRAPH_MODE cell and checked op by op against
the JAX reference (``first_mismatch``), and its outputs against Python
integer oracles; ``tests/backends/test_ops_integers.py`` holds the same
semantics for the other backends."""
from __future__ import annotations

import numpy as np

import compressors
from backends.mindspore.lower import LoopbackExchange, first_mismatch
from backends.mindspore.trace import Program, TracingOps
from compressors import kit

U32 = np.array([0, 1, 7, 2**24 + 1, 2**31 - 1, 2**31, 3_000_000_000, 2**32 - 1], dtype=np.uint64).astype(np.uint32)
I32 = np.array([0, -1, 7, -7, 2**31 - 1, -2**31 + 1, 2**24 + 1, -(2**24 + 3)], np.int32)
MASK = 2**32 - 1


def _lowered_agrees(build, inputs):
    prog = Program("integers")
    ops = TracingOps(prog)
    args = [prog.input(x.shape, x.dtype) for x in inputs]
    build(ops, *args)
    assert first_mismatch(prog, inputs) is None


def test_integer_division_remainder_and_wraparound():
    big = np.uint32(0x85EBCA6B)

    def build(ops, u, v, i, j):
        c = ops.asarray(big)
        for a, b in ((u, v), (i, j)):
            a // b, a % b, a // 7, a % 7, a // 65537, a % 65537
        u + v, u - v, u * v, -u, u * c, u - 1, i // -3, i % -3

    divisors_u = np.array([3, 5, 2**31 + 1, 7, 2**32 - 1, 13, 2, 1], dtype=np.uint64).astype(np.uint32)
    divisors_i = np.array([3, -3, 2, 5, -5, 7, 1000, -1000], np.int32)
    _lowered_agrees(build, [U32, divisors_u, I32, divisors_i])


def test_kit_hash_and_medians_lower_exactly():
    def build(ops, u, a, b, c):
        kit.hash32(ops, u, ops.asarray(np.uint32(0x9E3779B9)))
        kit.median_of(ops, [a, b, c])
        kit.median_of(ops, [a, b])
        kit.median(ops, a)
        kit.sort(ops, b)

    rng = np.random.default_rng(0)
    floats = [np.round(rng.standard_normal(8), 1).astype(np.float32) for _ in range(3)]
    _lowered_agrees(build, [U32] + floats)


def test_fixed_key_draws_are_exact_under_fast_rng():
    """countsketch draws only from keys.fixed: under rng="fast" its hashes
    are still threefry's, so fast and exact lowerings agree bit for bit,
    step after step (a fast-mode generator would give new hashes each step)."""
    comp = compressors.parse("countsketch(ratio=0.1, rows=3, width=2.0)")
    shapes = [(40,), (6, 5)]
    rng = np.random.default_rng(4)
    exact = LoopbackExchange(comp, [(s, np.float32) for s in shapes], n=2, seed=3, rng="exact")
    fast = LoopbackExchange(comp, [(s, np.float32) for s in shapes], n=2, seed=3, rng="fast")
    per = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(2)]
    se, sf = exact.init(per), fast.init(per)
    for step in range(2):
        per = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(2)]
        me, se = exact(per, se, step)
        mf, sf = fast(per, sf, step)
        for a, b in zip(me + [x for w in se for x in w], mf + [x for w in sf for x in w]):
            assert np.array_equal(np.asarray(a), np.asarray(b))
