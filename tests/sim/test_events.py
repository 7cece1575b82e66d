"""Event-level simulations against the analytical layer and hand-checked cases."""
import numpy as np
import pytest

from kfsim import catalog
from kfsim.sim import distributions as dist
from kfsim.sim.events import simulate_async, simulate_iteration, simulate_sync
from kfsim.sim.pipeline import schedule
from kfsim.sim.predict import as_model, model_arrays


def _buckets():
    rng = np.random.default_rng(1)
    B = 12
    frac = np.sort(rng.random(B))
    frac[-1] = 1.0
    return frac, rng.random(B) * 0.01, rng.random(B) * 0.05, rng.random(B) * 0.01


@pytest.mark.parametrize("lam", [1.0, 1.07])
def test_event_iteration_matches_pipeline(lam):
    frac, enc, comm, dec = _buckets()
    a = schedule(0.1, 0.3, 0.02, frac, enc, comm, dec, interference=lam)
    e = simulate_iteration([0.1] * 8, [0.3] * 8, 0.02, frac, enc, comm, dec, interference=lam)
    assert e.total_s == pytest.approx(a.total_s, rel=1e-3)
    assert e.idle_s == pytest.approx(0.0, abs=1e-12)


def test_event_iteration_on_a_catalog_model():
    m = as_model("bert-base")
    ids, ready = model_arrays(m, 25.0)
    B = len(ready)
    comm = np.linspace(0.01, 0.02, B)
    a = schedule(0.05, 0.1, 0.01, ready, np.zeros(B), comm, np.zeros(B))
    e = simulate_iteration(0.05, [0.1] * 4, 0.01, ready, np.zeros(B), comm, np.zeros(B))
    assert e.total_s == pytest.approx(a.total_s, rel=1e-3)


def test_straggler_sets_the_pace_of_bucketed_iteration():
    frac, enc, comm, dec = _buckets()
    bwd = [0.3, 0.3, 0.9]
    e = simulate_iteration(0.1, bwd, 0.0, frac, enc, np.zeros_like(comm), dec)
    alone = max(schedule(0.1, b, 0.0, frac, enc, np.zeros_like(comm), dec).total_s for b in bwd)
    assert e.total_s == pytest.approx(alone)
    assert e.idle_s > 0


def test_sync_iteration_follows_the_max():
    r = simulate_sync([1.0, 2.0, 3.0], 0.5, 3, iterations=5)
    assert np.allclose(r.iteration_s, 3.5)
    assert np.allclose(r.idle_s, np.mean([2.0, 1.0, 0.0]))
    r = simulate_sync(dist.lognormal(1.0, 0.5), 0.25, 16, iterations=50, seed=3)
    assert np.allclose(r.iteration_s, r.compute_s.max(axis=1) + 0.25)
    again = simulate_sync(dist.lognormal(1.0, 0.5), 0.25, 16, iterations=50, seed=3)
    assert np.array_equal(r.iteration_s, again.iteration_s)


def test_failures_cost_restart_and_rollback():
    r = simulate_sync(1.0, 0.0, 4, iterations=50, mtbf_s=40.0, restart_s=10.0, checkpoint_every=5, seed=0)
    assert r.failures > 0
    assert r.total_s > 50.0 + 10.0 * r.failures - 1e-9


def test_async_hand_checked():
    # worker 0 takes 1 s, worker 1 takes 2 s, no communication cost.
    # t=1: w0 (read v0) → applied to v0, staleness 0
    # t=2: w1 (read v0, started first) → applied to v1, staleness 1; w1 pulls v2 at once
    #      w0 (read v1 at t=1) → applied to v2, staleness 1; w0 pulls v3
    # t=3: w0 (read v3) → applied to v3, staleness 0; w0 pulls v4
    # t=4: w1 (read v2, started at t=2, before w0's t=3 start) → applied to v4, staleness 2
    #      w0 (read v4) → applied to v5, staleness 1
    log = simulate_async([1.0, 2.0], 0.0, 2, staleness=None, updates=6)
    got = [(u.worker, u.computed_on, u.applied_at, u.staleness, u.time) for u in log]
    assert got == [(0, 0, 0, 0, 1.0), (1, 0, 1, 1, 2.0), (0, 1, 2, 1, 2.0), (0, 3, 3, 0, 3.0),
                   (1, 2, 4, 2, 4.0), (0, 4, 5, 1, 4.0)]
    assert np.mean([u.staleness for u in log]) == pytest.approx(5 / 6)
    assert np.bincount([u.staleness for u in log]).tolist() == [2, 3, 1]


def test_ssp_bounds_how_far_ahead_a_worker_runs():
    for s in (1, 3):
        log = simulate_async([1.0, 10.0], 0.0, 2, staleness=s, updates=12)
        # before the slow worker's first gradient lands, the fast one did at most s + 1 iterations
        first_slow = next(i for i, u in enumerate(log) if u.worker == 1)
        assert sum(1 for u in log[:first_slow] if u.worker == 0) == s + 1
    free = simulate_async([1.0, 10.0], 0.0, 2, staleness=None, updates=12)
    assert sum(u.worker == 0 for u in free) >= 9


def test_sync_mode_is_rounds_with_zero_staleness():
    log = simulate_async(dist.normal(1.0, 0.2), 0.1, 4, staleness=0, updates=8, seed=5)
    assert len(log) == 8 and all(u.staleness == 0 for u in log)
    assert [u.batch for u in log] == [0] * 4 + [1] * 4
    assert log[4].time > log[0].time


def test_server_queue_serialises_updates():
    log = simulate_async(1.0, 0.0, 4, updates=4, server_time=0.5)
    assert [u.time for u in log] == pytest.approx([1.5, 2.0, 2.5, 3.0])


def test_async_is_reproducible_and_validates():
    a = simulate_async(dist.lognormal(1.0, 0.3), 0.1, 8, updates=50, seed=7)
    b = simulate_async(dist.lognormal(1.0, 0.3), 0.1, 8, updates=50, seed=7)
    assert a == b
    with pytest.raises(ValueError, match="staleness"):
        simulate_async(1.0, 0.0, 2, staleness=-1)
    with pytest.raises(ValueError, match="workers"):
        simulate_async(1.0, 0.0, 0)
    with pytest.raises(ValueError, match="3 workers"):
        simulate_async([1.0, 2.0], 0.0, 3)


@pytest.mark.parametrize("p", [2, 5, 16])
def test_step_level_ring_matches_closed_form(p):
    from kfsim.sim import collectives as cf
    from kfsim.sim.steplevel import ring_allreduce_steps
    args = (p, 3e6, 2e-5, 1e-9, 1e-10)
    assert ring_allreduce_steps(*args) == pytest.approx(float(cf.ring_allreduce(*args)), rel=1e-3)


def test_predict_stragglers_follows_the_slowest():
    from kfsim.sim.predict import predict_iteration, predict_stragglers
    cl = catalog.seed_cluster()
    m = as_model("resnet-50")
    from kfsim.sim.compute import compute_time
    t = compute_time(m, cl, m.batch)
    base = predict_iteration(m, cl, "ef(topk(ratio=0.01))", 8)
    even = predict_stragglers(m, cl, "ef(topk(ratio=0.01))", 8, t.fwd + t.bwd, iterations=2)
    assert even.total_s == pytest.approx(base.total_s, rel=1e-3)
    slow = predict_stragglers(m, cl, "ef(topk(ratio=0.01))", 8, [t.fwd + t.bwd] * 7 + [3 * (t.fwd + t.bwd)],
                              iterations=2)
    assert slow.total_s > base.total_s and slow.idle_s > 0
