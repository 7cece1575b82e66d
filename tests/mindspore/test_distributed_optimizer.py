"""``DistributedOptimizer(opt, compression=spec)``: the public reducer as an optimizer wrapper.

In one process (n = 1: the collectives lower to the identity) the three ways a
script can use kfsim — ``TrainOneStepCell.grad_reducer = kfsim_reducer(...)``,
``TrainOneStepCell(net, DistributedOptimizer(...))`` and a functional
``value_and_grad`` step under ``@ms.jit`` calling ``opt(grads)`` — give the same
parameters and losses bit for bit, with the compressor's state carried in the
wrapper's Parameters. The 2-rank msrun run is ``examples/mindspore_distributed_optimizer.py``
(``tests/test_examples.py``).
"""
from __future__ import annotations

import numpy as np
import pytest

from backends.mindspore import DistributedOptimizer, kfsim_reducer
from backends.mindspore.reducer import reducer_state

SPECS = ["ef(topk(ratio=0.2))", "warmup(ef(topk(ratio=0.2)), steps=2)", "powersgd(rank=2)"]


def _setup():
    import mindspore as ms
    from mindspore import nn

    ms.set_context(mode=ms.GRAPH_MODE)
    rng = np.random.default_rng(0)
    x = ms.Tensor(rng.standard_normal((32, 8)).astype(np.float32))
    y = ms.Tensor(rng.integers(0, 3, 32).astype(np.int32))
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")

    def net():
        ms.set_seed(0)
        return nn.SequentialCell(nn.Dense(8, 16), nn.Tanh(), nn.Dense(16, 3))
    return ms, nn, x, y, loss, net


@pytest.mark.parametrize("spec", SPECS)
def test_three_spellings_are_one_graph(spec):
    ms, nn, x, y, loss, make = _setup()
    na = make()
    oa = nn.Momentum(na.trainable_params(), 0.1, 0.9)
    ta = nn.TrainOneStepCell(nn.WithLossCell(na, loss), oa)
    ta.grad_reducer = kfsim_reducer(spec, oa.parameters, n=1, rank=0, seed=4)
    nb = make()
    ob = DistributedOptimizer(nn.Momentum(nb.trainable_params(), 0.1, 0.9), spec, n=1, rank=0, seed=4)
    tb = nn.TrainOneStepCell(nn.WithLossCell(nb, loss), ob)
    nc = make()
    oc = DistributedOptimizer(nn.Momentum(nc.trainable_params(), 0.1, 0.9), compression=spec, n=1, rank=0, seed=4)
    grad_fn = ms.value_and_grad(nn.WithLossCell(nc, loss), None, oc.parameters)

    @ms.jit
    def step(a, b):
        value, grads = grad_fn(a, b)
        oc(grads)
        return value

    for t in range(4):
        la, lb, lc = (float(f(x, y).asnumpy()) for f in (ta, tb, step))
        assert la == lb == lc, (spec, t, la, lb, lc)
    for a, b, c in zip(na.trainable_params(), nb.trainable_params(), nc.trainable_params()):
        assert a.name == b.name == c.name
        assert np.array_equal(a.asnumpy(), b.asnumpy()) and np.array_equal(a.asnumpy(), c.asnumpy())
    moved = na.trainable_params()[0].asnumpy()
    assert not np.array_equal(moved, make().trainable_params()[0].asnumpy()), "training moved the weights"
    sa, sb, sc = (reducer_state(r) for r in (ta.grad_reducer, ob.reducer, oc.reducer))
    assert sa[1] == sb[1] == sc[1] == 4
    assert all(np.array_equal(p, q) and np.array_equal(p, r) for p, q, r in zip(sa[0], sb[0], sc[0]))
    names = {p.name for p in tb.get_parameters()}
    states = [k for k in names if k.startswith("kfsim.state.")]
    assert "kfsim.step" in names and len(states) == ob.reducer.n_state > 0
    # named by tensor and field, also for a schedule's phases (a sub-Cell must not rename them "p1.s0")
    assert all(any(k.startswith(f"kfsim.state.{p.name}.") for p in nb.trainable_params()) for k in states), states
    assert {p.name for p in ob.parameters} == {p.name for p in nb.trainable_params()}
    assert ob.accounting(3)["payload_bytes"] > 0


def test_refused_before_anything_compiles():
    ms, nn, x, y, loss, make = _setup()
    net = make()
    opt = nn.SGD(net.trainable_params(), 0.1)
    with pytest.raises(ValueError, match="wraps a mindspore.nn.Optimizer, got list"):
        DistributedOptimizer(net.trainable_params(), "none()")
    with pytest.raises(ValueError, match="unknown compressor 'nosuch'"):
        DistributedOptimizer(opt, "nosuch(ratio=1)", n=1, rank=0)
    with pytest.raises(ValueError, match="rng must be one of"):
        DistributedOptimizer(opt, "none()", n=1, rank=0, rng="sloppy")
    ms.set_auto_parallel_context(parallel_mode="data_parallel")
    try:
        with pytest.raises(ValueError, match="parallel_mode is 'data_parallel'.*a second time"):
            DistributedOptimizer(opt, "none()", n=1, rank=0)
    finally:
        ms.reset_auto_parallel_context()
    assert DistributedOptimizer(opt, "none()", n=1, rank=0).learning_rate is opt.learning_rate
