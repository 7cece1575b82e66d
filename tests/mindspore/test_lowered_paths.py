"""A per-tensor plan lowered to a compiled MindSpore graph matches JAX bit for bit.

The MindSpore reducer holds the gradients as a sequence, so its paths are
positions ("0", "1", ...): ``kfsim launch --plan`` writes the plan that way
(``kfsim.plans.file.Plan.compressor(indexed=True)``)."""
from __future__ import annotations

import numpy as np

import compressors
from backends.mindspore.lower import LoopbackExchange
from tests.mindspore.test_lowered_conformance import SHAPES, run_both

PLAN = "paths(quantize(bits=4, bucket=64), '0', ef(topk(ratio=0.1)), '2', none())"


def test_lowered_plan_matches_jax():
    run_both(PLAN)


def test_lowered_plan_gives_each_leaf_its_own_rounds():
    comp = compressors.parse(PLAN)
    lx = LoopbackExchange(comp, [(s, np.float32) for s in SHAPES], n=2, seed=3)
    rng = np.random.default_rng(0)
    per = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(2)]
    states = lx.init(per)
    mean, _ = lx(per, states, 0)
    np.testing.assert_array_equal(mean[2], (per[0][2] + per[1][2]) * np.float32(0.5))  # '2': dense
    assert np.count_nonzero(mean[0]) <= 2 * 12  # '0': top-k 10 % of 120 per worker
    assert len(states[0]) == 1 and states[0][0].shape == SHAPES[0]  # only '0' keeps state (EF residual)


def test_resident_runs_the_same_graph_on_mindspore_tensors():
    """``LoopbackExchange.resident`` (what bench_codec_cost times: no NumPy copies in or out)
    gives the outputs of a plain call, mean and every worker's new state, as MindSpore tensors."""
    lx = LoopbackExchange(compressors.parse(PLAN), [(s, np.float32) for s in SHAPES], n=2, seed=3)
    rng = np.random.default_rng(1)
    per = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(2)]
    states = lx.init(per)
    _, states = lx(per, states, 4)   # an EF residual that is not zero
    mean, new = lx(per, states, 5)
    out = lx.resident(per, states, 5)()
    got = [o.asnumpy() for o in out]
    assert len(got) == len(mean) + sum(len(s) for s in new)
    for g, w in zip(got, mean + [v for s in new for v in s]):
        np.testing.assert_array_equal(g, w)
    assert np.count_nonzero(new[0][0]) > 0
