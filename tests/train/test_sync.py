"""Synchronous simulated training: equivalences and determinism.

Tolerance for "N workers on 1/N of the batch == one worker on the full
batch" with the identity compressor: the two differ only by float32
reassociation (a mean of N shard means vs one mean), so after 20 SGD steps
with momentum every parameter agrees to 1e-6 absolute (measured ~8e-8) and
every step's loss to 1e-5.
"""
from __future__ import annotations

import jax
import numpy as np
import pytest

import backends
import compressors
from compressors.core import make_keys
from compressors.exchange import exchange
from kfsim import records
from kfsim.train import loop, models, step
from kfsim.train.config import RunConfig

PARAM_ATOL = 1e-6
LOSS_ATOL = 1e-5
BASE = dict(batch=64, steps=20, eval_every=10, lr=0.05, momentum=0.9)


def _leaves(state):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves((state.params, state.opt, state.states))]


@pytest.mark.parametrize("n", [4, 8])
def test_identity_n_workers_equals_single_worker_full_batch(fmnist_small, n):
    one = loop.run(RunConfig(compressor="none()", workers=1, **BASE), task=fmnist_small)
    many = loop.run(RunConfig(compressor="none()", workers=n, **BASE), task=fmnist_small)
    for k in one.state.params:
        np.testing.assert_allclose(np.asarray(many.state.params[k]), np.asarray(one.state.params[k]),
                                   rtol=0, atol=PARAM_ATOL)
    assert max(abs(a.loss - b.loss) for a, b in zip(one.steps, many.steps)) <= LOSS_ATOL


def test_same_seed_bit_identical_and_seed_matters(fmnist_small):
    cfg = RunConfig(compressor="ef(topk(ratio=0.01))", workers=4, **BASE)
    a, b = loop.run(cfg, task=fmnist_small), loop.run(cfg, task=fmnist_small)
    assert [s.loss for s in a.steps] == [s.loss for s in b.steps]
    assert all(np.array_equal(x, y) for x, y in zip(_leaves(a.state), _leaves(b.state)))
    c = loop.run(cfg.replace(seed=1), task=fmnist_small)
    assert [s.loss for s in a.steps] != [s.loss for s in c.steps]


def test_step_matches_reference_exchange_by_hand(fmnist_small):
    """One jitted step == grads on shards [r::n] + compressors.exchange + SGD, done by hand."""
    ops = backends.get("jax")
    comp = compressors.parse("ef(topk(ratio=0.05))")
    n, lr = 4, 0.1
    p = {k: jax.numpy.asarray(v) for k, v in models.init_params("mlp", 0).items()}
    x, y = fmnist_small.x_train[:32], fmnist_small.y_train[:32]
    states = tuple(comp.init(ops, p) for _ in range(n))
    fn = step.make_sync_step("mlp", comp, n, ops, lr=lr, momentum=0.0, seed=7)
    p1, _, s1, _, _ = fn(p, {k: jax.numpy.zeros_like(v) for k, v in p.items()}, states, (), x, y, np.int32(3))
    grads = [jax.grad(lambda q, r=r: models.loss("mlp", q, x[r::n], y[r::n]))(p) for r in range(n)]
    mean, s2 = jax.jit(lambda g, s: exchange(ops, comp, g, s, [make_keys(ops, 7, 3, r) for r in range(n)])[:2])(
        grads, list(states))
    for k in p:
        np.testing.assert_allclose(np.asarray(p1[k]), np.asarray(p[k] - lr * mean[k]), rtol=0, atol=1e-6)
    # error-feedback residuals are per worker and differ between workers
    r0, r1 = (np.asarray(jax.tree_util.tree_leaves(s1[i])[-1]) for i in (0, 1))
    assert not np.array_equal(r0, r1)
    for a, b in zip(jax.tree_util.tree_leaves(s1), jax.tree_util.tree_leaves(s2)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-6)


def test_grad_modes_agree(fmnist_small):
    kw = dict(compressor="none()", workers=4, batch=64, steps=5, eval_every=5)
    a = loop.run(RunConfig(grad_mode="loop", **kw), task=fmnist_small)
    b = loop.run(RunConfig(grad_mode="vmap", **kw), task=fmnist_small)
    for k in a.state.params:
        np.testing.assert_allclose(np.asarray(a.state.params[k]), np.asarray(b.state.params[k]), atol=1e-6, rtol=0)


def test_records_clock_bytes_and_time_to_accuracy(fmnist_small, tmp_path):
    cfg = RunConfig(compressor="topk(ratio=0.01)", workers=4, batch=64, steps=6, eval_every=3,
                    target_accuracy=0.05, bandwidth_gbit=1.0)
    out = tmp_path / "run.jsonl"
    res = loop.run(cfg, task=fmnist_small, record=str(out))
    rec = records.read(out)
    assert rec.source == "simulated" and rec.meta["compressor"] == cfg.compressor and len(rec.steps) == 6
    per = compressors.parse(cfg.compressor).wire_bits((784, 256)) // 8
    assert all(s.bytes_sent > per for s in rec.steps)
    clock = np.cumsum([s.time_s for s in rec.steps])
    np.testing.assert_allclose([s.extra["sim_clock_s"] for s in rec.steps], clock, rtol=1e-12)
    assert [s.accuracy is not None for s in rec.steps] == [False, False, True, False, False, True]
    assert res.summary["time_to_accuracy_step"] == 2
    assert res.summary["time_to_accuracy_s"] == pytest.approx(clock[2])


def test_slower_network_gives_longer_iterations(fmnist_small):
    kw = dict(compressor="none()", workers=8, batch=64, steps=2, eval_every=2)
    slow = loop.run(RunConfig(bandwidth_gbit=1.0, **kw), task=fmnist_small)
    fast = loop.run(RunConfig(bandwidth_gbit=10.0, **kw), task=fmnist_small)
    assert slow.state.clock > fast.state.clock > 0
    assert [s.loss for s in slow.steps] == [s.loss for s in fast.steps]


def test_parameter_server_with_server_compression(fmnist_small):
    kw = dict(compressor="topk(ratio=0.1)", workers=4, batch=64, steps=4, eval_every=4)
    plain = loop.run(RunConfig(**kw), task=fmnist_small)
    ps = loop.run(RunConfig(server_compressor="ef(topk(ratio=0.1))", **kw), task=fmnist_small)
    assert np.isfinite(ps.steps[-1].loss)
    assert jax.tree_util.tree_leaves(ps.state.server_state)  # the server keeps its own EF residual
    assert [s.loss for s in plain.steps][:1] == [s.loss for s in ps.steps][:1]
    assert [s.loss for s in plain.steps] != [s.loss for s in ps.steps]


@pytest.mark.parametrize("bad, match", [
    (dict(batch=10, workers=4), "divisible"),
    (dict(workers=0), "workers"),
    (dict(lr=-1.0), "learning rate"),
    (dict(mode="hogwild"), "mode"),
    (dict(staleness=2), "async"),
    (dict(task="imagenet"), "unknown task"),
])
def test_config_validation(bad, match):
    with pytest.raises(ValueError, match=match):
        RunConfig(**bad)
