"""How closely PowerSGD's backends agree, one step vs many steps with error feedback.

Side by side, per case and seed: the largest NumPy-vs-JAX (and, with
``--mindspore``, lowered-MindSpore-vs-JAX) difference of the mean gradient on
the first step and over ``--steps`` warm-started EF steps, in units of the
dependency tolerance ``tol`` (``compressors.powersgd.tolerance``, 3.5e-4 in
float32) times the largest gradient entry of the run; the EF residual's
difference at the end; the largest warm-start Q difference (Q's entries are
at most 1: a value near 1 means a column was judged dependent on one backend
and not on the other); and the step at which the difference first exceeded
``tol``. Setting: ``tests/compressors/test_powersgd.py::test_backends_agree``
(48 x 40 gradients, 2 workers, rank 6; rank-deficient: rank 2 per worker).

    .venv/bin/python benchmarks/bench_powersgd_agreement.py [--steps 40] [--seeds 4] [--mindspore]
"""
from __future__ import annotations

import argparse

import numpy as np

import backends
import compressors as C
from compressors import protocol
from compressors.powersgd import tolerance

TOL = tolerance(0.0, np.float32)
SPEC = "powersgd(rank=6)"


def low_rank(rng, shape, rank, scale=1.0):
    return rng.standard_normal((shape[0], rank)) @ rng.standard_normal((rank, shape[1])) * scale


def gradients(case: str, seed: int, steps: int) -> list:
    rng = np.random.default_rng(seed)
    make = {"rank-deficient": lambda: low_rank(rng, (48, 40), 2), "full-rank": lambda: low_rank(rng, (48, 40), 40),
            "near-zero": lambda: low_rank(rng, (48, 40), 3, 1e-20)}[case]
    return [[(make().astype(np.float32), rng.standard_normal(7).astype(np.float32)) for _ in range(2)]
            for _ in range(steps)]


def run(ops, grads) -> tuple[list, list, list]:
    """(mean of "w" per step, Q of worker 0 per step, EF residual of worker 0 per step)."""
    comp = C.parse(SPEC)
    put = lambda g: tuple(ops.asarray(x) for x in g)  # noqa: E731
    states = [comp.init(ops, put(g)) for g in grads[0]]
    means, qs, res = [], [], []
    for step, per in enumerate(grads):
        keys = [C.make_keys(ops, 0, step, w) for w in range(len(per))]
        out = protocol.run(ops, comp.step(step), [put(g) for g in per], states, keys)
        states = list(out.states)
        means.append(np.asarray(out.mean[0], np.float64))
        qs.append(np.asarray(states[0][0].inner.q, np.float64))
        res.append(np.asarray(states[0][0].residual, np.float64))
    return means, qs, res


LOWERED = []


def run_mindspore(grads) -> list:
    """Means of "w" from the lowered MindSpore graph (LoopbackExchange, seed 0 as above; compiled once)."""
    if not LOWERED:
        from backends.mindspore.lower import LoopbackExchange
        LOWERED.append(LoopbackExchange(C.parse(SPEC), [((48, 40), np.float32), ((7,), np.float32)], n=2, seed=0))
    lx = LOWERED[0]
    states = lx.init([list(g) for g in grads[0]])
    means = []
    for step, per in enumerate(grads):
        mean, states = lx([list(g) for g in per], states, step)
        means.append(np.asarray(mean[0], np.float64))
    return means


def compare(ref, other, scale) -> tuple[float, float, int | None]:
    d = [float(np.abs(a - b).max()) / scale / TOL for a, b in zip(ref, other)]
    first = next((i for i, v in enumerate(d) if v > 1.0), None)
    return d[0], max(d), first


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--mindspore", action="store_true", help="also the lowered MindSpore graph (compiles ~1 min)")
    a = ap.parse_args()
    jx, nps = backends.get("jax"), backends.get("numpy")
    print(f"{SPEC}, {a.steps} EF steps; differences in tol = {TOL:.2e} x the run's largest gradient entry")
    print(f"{'case':15s} {'seed':>4s} {'pair':>9s} {'step 0':>9s} {'max':>7s} {'first>tol':>9s} "
          f"{'resid':>7s} {'max|dQ|':>8s}")
    worst = {}
    for case in ("rank-deficient", "near-zero", "full-rank"):
        for seed in range(a.seeds):
            grads = gradients(case, seed, a.steps)
            scale = max(float(np.abs(g[0]).max()) for per in grads for g in per)
            jm, jq, jr = run(jx, grads)
            nm, nq, nr = run(nps, grads)
            first0, most, first = compare(jm, nm, scale)
            dres = max(float(np.abs(x - y).max()) for x, y in zip(jr, nr)) / scale / TOL
            dq = max(float(np.abs(x - y).max()) for x, y in zip(jq, nq))
            print(f"{case:15s} {seed:4d} {'numpy-jax':>9s} {first0:9.1e} {most:7.2f} {first!s:>9s} "
                  f"{dres:7.2f} {dq:8.1e}", flush=True)
            worst[case, "numpy"] = max(worst.get((case, "numpy"), 0.0), most)
            if a.mindspore:
                first0, most, first = compare(jm, run_mindspore(grads), scale)
                print(f"{case:15s} {seed:4d} {'ms-jax':>9s} {first0:9.1e} {most:7.2f} {first!s:>9s}", flush=True)
                worst[case, "mindspore"] = max(worst.get((case, "mindspore"), 0.0), most)
    for (case, pair), v in worst.items():
        print(f"worst {case:15s} {pair:9s}: {v:.2f} tol = {v * TOL:.2e} of the largest gradient entry")


if __name__ == "__main__":
    main()
