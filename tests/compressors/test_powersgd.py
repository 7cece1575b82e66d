"""PowerSGD's numerics: exact on rank-deficient gradients, scale-invariant,
the same on every backend, and PyTorch's hook semantics (1-D as n x 1, EF
over every tensor, a dense start, the strict compression-rate test).

Scaling: powers of two scale every float exactly (no rounding), so 2**k
must scale the result bit for bit; 10**k rounds the scaled gradient itself,
so the result must match 10**k times the unscaled one to a few units in the
last place (64 float32 eps relative to the largest entry).
"""
from __future__ import annotations

import jax
import numpy as np
import pytest

import compressors as C
from compressors import protocol
from compressors.powersgd import compresses, orthogonalize, tolerance
from tests.backends.ops_backends import OPS_BACKENDS, get_ops, maybe_x64, to_numpy

NP = get_ops("numpy")


def low_rank(rng, shape, rank, scale=1.0):
    n, m = shape[0], int(np.prod(shape[1:]))
    return (rng.standard_normal((n, rank)) @ rng.standard_normal((rank, m)) * scale).reshape(shape)


def exchange(ops, spec, per_worker, steps=1, dtype=np.float32, start=(0, None)):
    """Means of ``steps`` exchanges of the same per-worker gradient lists
    (one list of gradient dicts per step, or one list reused); ``start``:
    (first step number, states before it, or None for fresh ones)."""
    comp = C.parse(spec)
    steps_grads = per_worker if isinstance(per_worker[0], list) else [per_worker] * steps
    put = lambda g: {k: ops.asarray(np.asarray(v, dtype)) for k, v in g.items()}  # noqa: E731
    states = start[1] if start[1] is not None else [comp.init(ops, put(g)) for g in steps_grads[0]]
    means = []
    for step, grads in enumerate(steps_grads, start[0]):
        keys = [C.make_keys(ops, 0, step, w) for w in range(len(grads))]
        res = protocol.run(ops, comp.step(step), [put(g) for g in grads], states, keys)
        states = list(res.states)
        means.append({k: to_numpy(v) for k, v in res.mean.items()})
    return means, states


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


# -- exactness ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", OPS_BACKENDS)
@pytest.mark.parametrize("rank,true_rank,workers", [(4, 2, 1), (4, 1, 2), (8, 3, 1), (16, 5, 3), (3, 3, 1)])
def test_rank_at_least_the_true_rank_reproduces_the_gradient(backend, rank, true_rank, workers):
    """Without EF the mean gradient (rank <= true_rank * workers <= rank)
    comes back to rounding, on the first step and on warm-started ones (a
    new random gradient each step). With EF it compresses p = g + e, whose
    residual e is full rank: what the kept columns miss stays in e (nothing
    is lost: mean + e_new - e_old is the mean gradient, to rounding), and e
    stays below the dependency tolerance (3.5e-4 of the gradient)."""
    ops = get_ops(backend)
    rng = np.random.default_rng(rank * 10 + true_rank)
    grads = [[{"w": low_rank(rng, (40, 30), true_rank), "k": low_rank(rng, (24, 4, 5), true_rank)}
              for _ in range(workers)] for _ in range(4)]
    means, _ = exchange(ops, f"powersgd(rank={rank}, ef=False)", grads)
    for step, mean in enumerate(means):
        for name in ("w", "k"):
            want = np.mean([g[name] for g in grads[step]], axis=0)
            assert rel(mean[name], want) < 2e-5, (step, name, rel(mean[name], want))
    old = [{"w": 0, "k": 0}] * workers
    for step in range(len(grads)):
        means, states = exchange(ops, f"powersgd(rank={rank})", grads[:step + 1])
        for name in ("w", "k"):
            new = [to_numpy(s[name].residual) for s in states]
            want = np.mean([g[name] for g in grads[step]], axis=0)
            sent = means[-1][name] + np.mean(new, axis=0) - np.mean([o[name] for o in old], axis=0)
            assert rel(sent, want) < 2e-5, (step, name, rel(sent, want))
            assert max(np.linalg.norm(e) for e in new) < tolerance(0.0, np.float32) * np.linalg.norm(want)
        old = [{k: to_numpy(s[k].residual) for k in ("w", "k")} for s in states]


def test_float64_is_exact_to_float64_rounding():
    rng = np.random.default_rng(3)
    grads = [{"w": low_rank(rng, (64, 48), 2)}]
    with maybe_x64(np.float64):
        means, _ = exchange(NP, "powersgd(rank=6, ef=False)", grads, steps=2, dtype=np.float64)
    assert all(rel(m["w"], grads[0]["w"]) < 1e-12 for m in means)


def test_orthogonalize_zeroes_dependent_columns_and_is_orthonormal():
    rng = np.random.default_rng(5)
    base = rng.standard_normal((50, 3))
    p = np.concatenate([base, base @ rng.standard_normal((3, 2)), np.zeros((50, 1))], axis=1).astype(np.float32)
    p_hat, dependent = orthogonalize(NP, NP.asarray(p), tolerance(0.0, np.float32))
    p_hat = np.asarray(p_hat)
    assert np.asarray(dependent).tolist() == [[False, False, False, True, True, True]]
    assert np.all(p_hat[:, 3:] == 0)
    np.testing.assert_allclose(p_hat[:, :3].T @ p_hat[:, :3], np.eye(3), atol=1e-6)
    # the kept columns span P's column space: P is its own projection
    np.testing.assert_allclose(p_hat @ (p_hat.T @ p), p, atol=2e-5 * np.abs(p).max())


def test_eps_raises_the_tolerance_only():
    assert tolerance(0.0, np.float32) == tolerance(1e-8, np.float32) == np.sqrt(np.finfo(np.float32).eps)
    assert tolerance(0.0, np.float64) == np.sqrt(np.finfo(np.float64).eps)
    assert tolerance(1e-2, np.float32) == 1e-2
    weak = np.stack([np.ones(20), np.r_[np.ones(19), 1.01]], axis=1).astype(np.float32)  # 2nd: 2e-3 new
    keep = lambda eps: ~np.asarray(orthogonalize(NP, NP.asarray(weak), tolerance(eps, np.float32))[1])  # noqa: E731
    assert keep(0.0).tolist() == [[True, True]] and keep(0.1).tolist() == [[True, False]]
    with pytest.raises(ValueError, match="eps"):
        C.parse("powersgd(eps=1.5)")


@pytest.mark.parametrize("backend", OPS_BACKENDS)
def test_zero_gradient_sends_zeros_and_keeps_the_warm_start(backend):
    """All columns dependent: the estimate is 0 (no NaN), and Q is carried on,
    so the next nonzero gradient is compressed as if the zero step had not been."""
    ops = get_ops(backend)
    rng = np.random.default_rng(9)
    g = {"w": rng.standard_normal((20, 16))}
    zero = {"w": np.zeros((20, 16))}
    spec = "powersgd(rank=2, ef=False)"
    with_gap, states_gap = exchange(ops, spec, [[g], [zero], [g]])
    without, states = exchange(ops, spec, [[g], [g]])
    assert np.all(with_gap[1]["w"] == 0)
    np.testing.assert_allclose(with_gap[2]["w"], without[1]["w"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_numpy(states_gap[0]["w"].q), to_numpy(states[0]["w"].q), rtol=1e-5, atol=1e-6)


# -- scale invariance --------------------------------------------------------------------------------------


def scaled_runs(ops, grads, spec, factors, dtype=np.float32):
    out = {}
    for c in factors:
        means, states = exchange(ops, spec, [[{k: v * c for k, v in g.items()} for g in step] for step in grads],
                                 dtype=dtype)
        out[c] = (means, states)
    return out


@pytest.mark.parametrize("backend", OPS_BACKENDS)
@pytest.mark.parametrize("true_rank", [2, 30])  # rank-deficient and full rank (rank 4 of 30)
def test_powers_of_two_scale_the_result_bit_for_bit(backend, true_rank):
    ops = get_ops(backend)
    rng = np.random.default_rng(true_rank)
    grads = [[{"w": low_rank(rng, (40, 30), true_rank)} for _ in range(2)] for _ in range(3)]
    factors = [2.0 ** k for k in (-60, -40, -7, 0, 1, 13, 60, 100)]
    runs = scaled_runs(ops, grads, "powersgd(rank=4)", factors)
    base_means, base_states = runs[1.0]
    for c, (means, states) in runs.items():
        for m, b in zip(means, base_means):
            assert np.array_equal(m["w"], (b["w"] * np.float32(c)).astype(np.float32)), c
        for s, b in zip(states, base_states):  # EF residuals scale; the warm-start Q is scale-free
            assert np.array_equal(to_numpy(s["w"].residual), to_numpy(b["w"].residual) * np.float32(c)), c
            assert np.array_equal(to_numpy(s["w"].inner.q), to_numpy(b["w"].inner.q)), c


@pytest.mark.parametrize("backend", OPS_BACKENDS)
@pytest.mark.parametrize("true_rank", [2, 30])
def test_powers_of_ten_scale_the_result_to_rounding(backend, true_rank):
    ops = get_ops(backend)
    rng = np.random.default_rng(100 + true_rank)
    grads = [[{"w": low_rank(rng, (40, 30), true_rank) * 1e-3} for _ in range(2)] for _ in range(3)]
    # without EF: with it, what is below the tolerance on rank-deficient p = g + e is amplified
    # round-off (see test_backends_agree), which 10**k rounds differently; 2**k does not round
    runs = scaled_runs(ops, grads, "powersgd(rank=4, ef=False)", [10.0 ** k for k in range(-12, 13)] + [1.0])
    base = runs[1.0][0]
    tol = 64 * np.finfo(np.float32).eps
    for c, (means, _) in runs.items():
        for m, b in zip(means, base):
            want = b["w"].astype(np.float64) * c
            err = np.abs(m["w"] - want).max() / np.abs(want).max()
            assert err < tol, (c, err)


def test_old_absolute_eps_specs_still_parse_and_are_scale_free():
    """A spec written for the absolute eps (eps=1e-8, the old default) parses;
    below the floor it changes nothing, at any scale."""
    rng = np.random.default_rng(4)
    g = [[{"w": low_rank(rng, (30, 20), 2) * 1e-10}]]
    a = exchange(NP, "powersgd(rank=4, eps=1e-8, ef=False)", g)[0][0]["w"]
    b = exchange(NP, "powersgd(rank=4, ef=False)", g)[0][0]["w"]
    assert np.array_equal(a, b) and rel(a, g[0][0]["w"]) < 2e-5


# -- backends agree ----------------------------------------------------------------------------------------


# Free-running EF runs on rank-deficient gradients drift apart (docs/powersgd.md): with r above the
# summed gradient's rank they stay within this many dependency tolerances of the largest gradient
# entry; benchmarks/bench_powersgd_agreement.py measured at most 5.0 (mean) and 11.2 (EF residual)
# over 40 steps x 6 seeds
EF_AGREEMENT = 32


def agreement_case(case, steps):
    rng = np.random.default_rng(11)
    make = {"rank-deficient": lambda: low_rank(rng, (48, 40), 2), "full-rank": lambda: low_rank(rng, (48, 40), 40),
            "near-zero": lambda: low_rank(rng, (48, 40), 3, 1e-20), "zero": lambda: np.zeros((48, 40))}[case]
    grads = [[{"w": make(), "b": rng.standard_normal(7)} for _ in range(2)] for _ in range(steps)]
    return grads, max(np.abs(g["w"]).max() for step in grads for g in step)


def moved(ops, states):
    return [jax.tree_util.tree_map(lambda a: ops.asarray(to_numpy(a)), s) for s in states]


@pytest.mark.parametrize("ef", [False, True])
@pytest.mark.parametrize("case", ["rank-deficient", "full-rank", "near-zero", "zero"])
def test_backends_agree_step_by_step(case, ef):
    """Every backend matches JAX to rtol 1e-5 of the gradient's scale (the
    conformance tolerance; an EF residual of a rank-deficient gradient is
    round-off, so it is compared at the scale of what is compressed, not at
    its own) on every warm-started step, each started from JAX's state
    before it: with EF on rank-deficient gradients over 12 steps, long
    enough for the residual to grow to the dependency tolerance and be sent
    (free-running runs drift apart: the next test)."""
    ef_deficient = ef and case in ("rank-deficient", "near-zero")
    grads, scale = agreement_case(case, 12 if ef_deficient else 3)
    comp = C.parse(f"powersgd(rank=6, ef={ef})")
    jx = get_ops("jax")
    ref, states = [], None
    for step in range(len(grads)):  # JAX's run: (mean, states after) per step
        (mean,), states = exchange(jx, comp.spec, grads[step:step + 1], start=(step, states))
        ref.append((mean, states))
    for backend in [b for b in OPS_BACKENDS if b != "jax"]:
        ops = get_ops(backend)
        for step, (w, ws) in enumerate(ref):
            prev = None if step == 0 else moved(ops, ref[step - 1][1])
            (m,), s = exchange(ops, comp.spec, grads[step:step + 1], start=(step, prev))
            msg = f"{backend} step {step}"
            assert np.all(np.isfinite(m["w"]))
            np.testing.assert_allclose(m["w"], w["w"], rtol=1e-5, atol=1e-5 * scale, err_msg=msg)
            for a, b in zip(s, ws):
                q, wq = (to_numpy(st["w"].inner.q if ef else st["w"].q) for st in (a, b))
                # columns beyond the summed gradient's rank (2 workers x rank 2) carry the EF residual,
                # itself round-off: Gram-Schmidt scales its last bits up by 1/|residual| (measured
                # <= 4.0e-5 over these 12 steps); the signal columns agree at the conformance tolerance
                strict = 4 if case == "rank-deficient" else q.shape[1]
                np.testing.assert_allclose(q[:, :strict], wq[:, :strict], rtol=1e-5, atol=1e-5, err_msg=msg)  # max 1
                np.testing.assert_allclose(q[:, strict:], wq[:, strict:], rtol=1e-3, atol=1e-3, err_msg=msg)
                if ef:
                    np.testing.assert_allclose(to_numpy(a["w"].residual), to_numpy(b["w"].residual), rtol=1e-5,
                                               atol=1e-5 * scale, err_msg=msg)


def test_free_running_ef_runs_agree_to_the_stated_tolerance():
    """EF over 16 steps on gradients of rank 4 (2 workers x rank 2) at rank
    6, each backend left to itself: the mean and the residual agree with
    JAX's to EF_AGREEMENT dependency tolerances of the largest gradient
    entry. Round-off in the residual is amplified step by step (about x10)
    until a spare column sends it, differently on each backend."""
    grads, scale = agreement_case("rank-deficient", 16)
    bound = EF_AGREEMENT * tolerance(0.0, np.float32) * scale
    want_means, want_states = exchange(get_ops("jax"), "powersgd(rank=6)", grads)
    for backend in [b for b in OPS_BACKENDS if b != "jax"]:
        means, states = exchange(get_ops(backend), "powersgd(rank=6)", grads)
        for step, (m, w) in enumerate(zip(means, want_means)):
            assert np.abs(m["w"] - w["w"]).max() <= bound, (backend, step)
        for s, w in zip(states, want_states):
            assert np.abs(to_numpy(s["w"].residual) - to_numpy(w["w"].residual)).max() <= bound, backend


# -- PyTorch's hook semantics ------------------------------------------------------------------------------


def torch_hook_reference(grads_per_step, q0, rank, min_compression, start):
    """A NumPy (float64) transcription of torch.distributed's powerSGD_hook
    for one bucket, all workers in one process: every tensor viewed as
    (shape[0], -1), compressed iff (n + m) * r * min_compression < n * m,
    vanilla all-reduce before iteration ``start``, error feedback as
    ``input - output`` over the whole bucket (compressed and dense tensors),
    warm-started Q orthogonalised before use, P orthogonalised by QR. ``q0``:
    the initial Q per tensor name (kfsim's, so both start alike)."""
    workers = len(grads_per_step[0])
    err = [None] * workers
    qs = dict(q0)
    means = []
    for it, grads in enumerate(grads_per_step):
        if it < start:
            means.append({k: np.mean([g[k] for g in grads], axis=0) for k in grads[0]})
            continue
        inp = [{k: v + (err[w][k] if err[w] else 0) for k, v in g.items()} for w, g in enumerate(grads)]
        out = {}
        for k, x0 in inp[0].items():
            n = x0.shape[0] if x0.ndim else 1
            mats = [x[k].reshape(n, -1) for x in inp]
            m = mats[0].shape[1]
            r = min(n, m, rank)
            if not (x0.ndim and (n + m) * r * min_compression < n * m):
                out[k] = np.mean([x[k] for x in inp], axis=0)
                continue
            q = np.linalg.qr(qs[k])[0]
            p = np.linalg.qr(sum(mat @ q for mat in mats))[0]
            qs[k] = sum(mat.T @ p for mat in mats) / workers
            out[k] = (p @ qs[k].T).reshape(x0.shape)
        err = [{k: x[k] - out[k] for k in x} for x in inp]
        means.append(out)
    return means


@pytest.mark.parametrize("true_rank", [2, None])  # rank-deficient (2 workers x rank 2 <= 4) and full rank
def test_matches_pytorch_hook_semantics(true_rank):
    """kfsim's EF keeps p - P_hat Q_i^T (dense tensors: 0), PyTorch's keeps
    input - output over the whole bucket; the mean estimates agree anyway
    (both rounds are linear in the summed residual), with PyTorch's start
    iteration, 1-D tensors as n x 1 and its compression-rate test."""
    rng = np.random.default_rng(21)
    shapes = {"w": (16, 12), "k": (8, 3, 2), "v": (10,), "s": (), "d": (6, 5)}
    make = lambda s: (low_rank(rng, s, true_rank) if true_rank and len(s) > 1 else rng.standard_normal(s))  # noqa: E731
    grads = [[{k: make(s) for k, s in shapes.items()} for _ in range(2)] for _ in range(5)]
    spec = "powersgd(rank=4, min_compression=0.9, start_step=1)"
    comp = C.parse(spec)
    with maybe_x64(np.float64):
        init = comp.init(NP, {k: np.zeros(s) for k, s in shapes.items()})
        q0 = {k: np.asarray(st.inner.q) for k, st in init.items() if hasattr(st.inner, "q")}
        assert set(q0) == {"w", "v"}  # v: 10 > 11 * 0.9, an n x 1 matrix; k (8 x 6): 48 < 14 * 4 * 0.9, dense
        got, _ = exchange(NP, spec, grads, dtype=np.float64)
    want = torch_hook_reference(grads, q0, 4, 0.9, 1)
    for step, (g, w) in enumerate(zip(got, want)):
        for k in shapes:
            np.testing.assert_allclose(g[k], w[k], rtol=1e-9, atol=1e-9 * np.abs(w[k]).max(), err_msg=f"{step} {k}")


def test_vectors_are_n_by_1_matrices_under_the_strict_rate_test():
    assert not compresses((10,), 4, 2.0)          # 10 / 11 below 2: dense, as in PyTorch
    assert compresses((10,), 4, 0.5) and not compresses((), 4, 0.0) and not compresses((0, 3), 4, 0.0)
    assert not compresses((16, 16), 4, 2.0)       # 256 == 2 * 32 * 4: PyTorch's test is strict
    assert compresses((17, 16), 4, 2.0)
    comp = C.parse("powersgd(rank=4, min_compression=0.5, ef=False)")
    assert [r.bits for r in comp.plan((10,))] == [10 * 32, 1 * 32]
    rng = np.random.default_rng(2)
    v = rng.standard_normal(10)
    mean = exchange(NP, "powersgd(rank=4, min_compression=0.5, ef=False)", [[{"v": v}]])[0][0]["v"]
    np.testing.assert_allclose(mean, v.astype(np.float32), rtol=1e-6)  # a rank-1 n x 1 matrix: exact


def test_start_step_sends_dense_first_and_keeps_the_state():
    comp = C.parse("powersgd(rank=2, start_step=3)")
    assert comp.spec == "powersgd(rank=2, warm_start=True, eps=0.0, min_compression=2.0, ef=True, start_step=3)"
    assert C.parse(comp.spec).spec == comp.spec
    assert comp.step(2).rounds((64, 64)) == 1 and comp.step(3).rounds((64, 64)) == 2
    later = C.parse("powersgd(rank=2)")
    rng = np.random.default_rng(6)
    grads = [[{"w": rng.standard_normal((32, 24))} for _ in range(2)] for _ in range(5)]
    means, _ = exchange(NP, "powersgd(rank=2, start_step=3)", grads)
    for step in range(3):
        want = np.mean([g["w"] for g in grads[step]], axis=0)
        np.testing.assert_allclose(means[step]["w"], want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
    # from step 3 on: PowerSGD from its initial state, as if started there
    fresh, _ = exchange(NP, later.spec, grads[3:])
    for a, b in zip(means[3:], fresh):
        np.testing.assert_array_equal(a["w"], b["w"])
    with pytest.raises(ValueError, match="start_step"):
        C.parse("powersgd(start_step=-1)")
