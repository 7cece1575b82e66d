"""The deployed reducer for one rank (n = 1) runs in any process, without msrun.

Its collectives lower to the identity (an AllGather adds the worker axis), so
the public ``kfsim_reducer(spec, params, n=1, rank=0)`` is the Cell a 1-rank job runs, with its state
in Parameters — what ``benchmarks/bench_ms_codecs.py`` times against the
hand-written Cells. It must give what the loopback exchange gives for n = 1
(GATHER, MAX and SUM rounds, EF state carried across steps), bit for bit.
"""
from __future__ import annotations

import numpy as np
import pytest

from backends.mindspore import kfsim_reducer
from backends.mindspore.lower import LoopbackExchange, to_ms, to_np
from backends.mindspore.reducer import reducer_state

SHAPES = [(6, 20), (7,), (3, 4, 5)]
SPECS = ["ef(topk(ratio=0.1))",          # a GATHER round (indices, values), EF residual
         "sumquant(bits=4, workers=16)"]  # a MAX round, then an int8 SUM round, randomness per step


@pytest.mark.parametrize("spec", SPECS)
def test_one_rank_reducer_runs_in_process_and_equals_loopback(spec):
    rng = np.random.default_rng(7)
    steps = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(3)]
    cell = kfsim_reducer(spec, steps[0], n=1, rank=0, seed=5)
    src = open(cell.source_path).read()
    assert "AllReduce" not in src and "AllGather" not in src, "n = 1 needs no communication"
    lx = LoopbackExchange(spec, [(s, np.float32) for s in SHAPES], n=1, seed=5)
    state = lx.init([steps[0]])
    for t, grads in enumerate(steps):
        got = [to_np(o) for o in cell(tuple(to_ms(g) for g in grads))]
        want, state = lx([grads], state, t)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and np.array_equal(a, b), (spec, t)
    kept, step = reducer_state(cell)
    assert step == len(steps) and len(kept) == len(state[0])
    assert all(np.array_equal(k, s) for k, s in zip(kept, state[0])), "the state lives in Parameters"


@pytest.mark.parametrize("spec", SPECS + ["powersgd(rank=2)"])
def test_the_bucket_cap_groups_collectives_and_changes_no_number(spec):
    """A 1-byte cap gives every tensor its own bucket; outputs and state stay bit-identical to
    one 25 MiB bucket (why a resume may change ``--bucket-mb``)."""
    rng = np.random.default_rng(3)
    steps = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(3)]
    one, each = (kfsim_reducer(spec, steps[0], n=1, rank=0, seed=2, bucket_bytes=cap) for cap in (25 * 2**20, 1))
    assert (one.buckets, each.buckets) == (1, len(SHAPES))
    assert each.collectives > one.collectives
    for grads in steps:
        a, b = ([to_np(o) for o in cell(tuple(to_ms(g) for g in grads))] for cell in (one, each))
        assert all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b)), spec
    assert all(np.array_equal(x, y) for x, y in zip(reducer_state(one)[0], reducer_state(each)[0]))
