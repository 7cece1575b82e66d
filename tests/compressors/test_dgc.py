"""Deep Gradient Compression: equations vs a NumPy reference, masking,
conservation, clipping, warm-up schedule and payload sizes."""
from __future__ import annotations

import math

import numpy as np
import pytest

import compressors as C
from compressors import protocol
from compressors.dgc import WARMUP_RATIOS
from tests.compressors.helpers import OPS, leaf_state
from tests.compressors.mc import run


def reference(gs, ratio, momentum, clip=0.0):
    """Algorithm 1 of Lin et al. with an exact threshold (sample = 1)."""
    u = np.zeros(gs[0].size, np.float64)
    v = np.zeros_like(u)
    sent_all = []
    for g in gs:
        g = g.astype(np.float64).ravel()
        if clip > 0 and np.linalg.norm(g) > clip:
            g = g * clip / np.linalg.norm(g)
        u = momentum * u + g
        v = v + u
        k = math.ceil(ratio * v.size)
        idx = np.argsort(-np.abs(v), kind="stable")[:k]
        sent = np.zeros_like(v)
        sent[idx] = v[idx]
        u[idx] = 0
        v[idx] = 0
        sent_all.append(sent)
    return sent_all, u, v


def steps(spec, gs):
    comp = C.parse(spec)
    state = comp.init(OPS, {"x": OPS.asarray(gs[0])})
    outs = []
    for t, g in enumerate(gs):
        out, state = C.roundtrip(OPS, comp.step(t), {"x": OPS.asarray(g)}, state, C.make_keys(OPS, 0, t))
        outs.append(np.asarray(out["x"], np.float64))
    return outs, leaf_state(state, {"x": gs[0]}, "x")


@pytest.mark.parametrize("momentum,clip", [(0.9, 0.0), (0.5, 3.0)])
def test_matches_the_papers_algorithm_with_an_exact_threshold(momentum, clip):
    rng = np.random.default_rng(0)
    gs = [rng.normal(size=(8, 8)).astype(np.float32) for _ in range(4)]
    outs, st = steps(f"dgc(ratio=0.1, momentum={momentum}, clip={clip}, sample=1.0, warmup_epochs=0)", gs)
    u, v = st.momentum, st.residual
    ref, u_ref, v_ref = reference(gs, 0.1, momentum, clip)
    for o, r in zip(outs, ref):
        np.testing.assert_allclose(o.ravel(), r, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(u), u_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(v), v_ref, rtol=1e-5, atol=1e-6)


def test_momentum_factor_masking_and_conservation_without_momentum():
    rng = np.random.default_rng(1)
    gs = [rng.normal(size=300).astype(np.float32) for _ in range(5)]
    outs, st = steps("dgc(ratio=0.02, momentum=0.0, sample=0.2, warmup_epochs=0)", gs)
    u, v = st.momentum, st.residual
    for o in outs:
        assert 0 < np.count_nonzero(o) <= 6  # at most k = ceil(0.02 * 300)
    sent = np.asarray(outs[-1]) != 0
    assert np.all(np.asarray(u)[sent] == 0) and np.all(np.asarray(v)[sent] == 0)
    np.testing.assert_allclose(sum(outs) + np.asarray(v, np.float64), sum(g.astype(np.float64) for g in gs),
                               atol=1e-5)


def test_sampled_threshold_sends_large_entries():
    x = np.random.default_rng(2).normal(size=2000).astype(np.float32)
    out, _, _ = run("dgc(ratio=0.01, sample=0.1, warmup_epochs=0)", [{"x": OPS.asarray(x)}])
    y = np.asarray(out["x"])
    idx = np.flatnonzero(y)
    assert 5 <= idx.size <= 20
    np.testing.assert_array_equal(y[idx], x[idx])
    assert np.abs(x[idx]).min() >= np.quantile(np.abs(x), 0.95)  # well inside the top few percent


def test_warmup_schedule_changes_at_epoch_boundaries():
    comp = C.parse("dgc(ratio=0.001, warmup_epochs=4, steps_per_epoch=3)")
    phases = [comp.phase_of(t) for t in range(16)]
    assert phases == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 4]
    d = 10_000
    expect = [math.ceil(r * d) for r in WARMUP_RATIOS] + [math.ceil(0.001 * d)]
    for t in range(16):
        k = expect[phases[t]]
        assert comp.step(t).plan((d,)) == (C.Round(C.Law.GATHER, k * 64),)
        assert C.parse(comp.step(t).spec).plan((d,)) == comp.step(t).plan((d,))
    assert comp.plan((d,)) == comp.step(0).plan((d,))  # the factory gives the step-0 compressor
    assert C.parse(comp.spec).spec == comp.spec and C.parse(comp.spec).phase_of(7) == 2


def test_warmup_never_sparser_than_the_target_and_can_be_disabled():
    comp = C.parse("dgc(ratio=0.1, warmup_epochs=6, steps_per_epoch=1)")
    ks = [comp.step(t).plan((1000,))[0].bits // 64 for t in range(8)]
    assert ks == [250, 100, 100, 100, 100, 100, 100, 100]
    assert C.parse("dgc(ratio=0.1, steps_per_epoch=0)").at is None
    assert C.parse("dgc(ratio=0.1, warmup_epochs=0, steps_per_epoch=5)").phase_of(100) == 0


def test_payload_size_follows_the_schedule_in_a_run():
    comp = C.parse("dgc(ratio=0.05, sample=0.5, warmup_epochs=2, steps_per_epoch=1)")
    g = {"x": OPS.asarray(np.random.default_rng(3).normal(size=100).astype(np.float32))}
    state = comp.init(OPS, g)
    sizes = []
    for t in range(3):
        active = comp.step(t)
        res = protocol.run(OPS, active, [g], [state], [C.make_keys(OPS, 0, t)], record=True)
        payloads, state = res.log[0].sent[0], res.states[0]
        sizes.append(payloads[0][1].shape[0])
        assert payloads[0][0].shape[0] * 32 + sizes[-1] * 32 == active.wire_bits((100,))
    assert sizes == [25, 7, 5]


def test_nan_is_sent_and_poisons_the_payload():
    x = np.random.default_rng(4).normal(size=50).astype(np.float32)
    x[10] = np.nan
    out, _, _ = run("dgc(ratio=0.1, sample=0.5, warmup_epochs=0)", [{"x": OPS.asarray(x)}])
    y = np.asarray(out["x"])
    assert np.isnan(y[10]) and np.all((y == 0) | np.isnan(y))  # every sent value is NaN
