"""Benchmark: simulated data-parallel training vs single-process training.

The reference is a plain single-process JAX loop (one jitted SGD step on the
whole global batch, no compression) of the same MLP, global batch and data
order on Fashion-MNIST. Three targets, printed side by side at the end:

(a) one simulated worker with ``none()`` vs the plain loop (target <= 1.2x);
(b) ``--workers`` (16) workers with ``--spec`` (ef(topk(ratio=0.01))) vs the
    lower bound at that many workers (target <= 1.5x);
(c) ``--wide`` (64) workers with the same spec vs the lower bound at 64
    workers (target <= 2x), over ``--wide-epochs`` (default 1/4 epoch).

The lower bound is the work any EF compressor's step contains: the n
per-worker gradients (the cheaper of grad_mode loop/vmap) and EF's sums
p_r = g_r + e_r, with no selection, exchange or update. It is timed in the
same process, interleaved with the measured runs, and every side (the
plain loop, the simulations, the bound) keeps the minimum of ``--repeats``
repeats (a lone timing under load once put the superset below its subset).
A per-phase breakdown follows each bound: its parts, the top-k selection of
every p_r, and what the whole step adds past them. Everything is timed after
compilation (compile time is printed apart). The 200k-entry top-k runs on the
host as an XLA custom call (``backends.jax.host_topk``, Numba).

    python benchmarks/bench_train.py [--workers 16] [--wide 64] [--batch 128] [--epochs 1] [--quick]
"""
from __future__ import annotations

import argparse
import re
import time


STRATEGIES = {
    "loop/loop/jax": dict(grad_mode="loop", exchange="loop", backend="jax"),
    "vmap/vmap/jax": dict(grad_mode="vmap", exchange="vmap", backend="jax"),
}
ONE_WORKER = "loop/loop/jax"   # n = 1: nothing to batch; the unbatched step is the cheaper
WIDE = "vmap/vmap/jax"         # 64 unrolled workers take far longer to compile than to run


def single_process(task, batch: int, lr: float, seed: int):
    """A timer ``(steps) -> (wall s, final loss)`` of plain one-process SGD on
    the same batches, and its compile s."""
    import jax
    import jax.numpy as jnp

    from kfsim.train import loop, models

    vg = jax.value_and_grad(lambda p, x, y: models.loss("mlp", p, x, y))

    @jax.jit
    def step(p, X, Y, idx):
        loss, g = vg(p, X[idx], Y[idx])
        return {k: p[k] - jnp.float32(lr) * g[k] for k in p}, loss

    X, Y = jnp.asarray(task.x_train), jnp.asarray(task.y_train)
    batches = loop.Batches(len(task.x_train), batch, seed)
    p0 = {k: jnp.asarray(v) for k, v in models.init_params("mlp", seed).items()}
    t0 = time.perf_counter()
    jax.block_until_ready(step(p0, X, Y, batches.indices(0)))
    compile_s = time.perf_counter() - t0

    def timed(steps: int):
        p = p0
        t0 = time.perf_counter()
        for t in range(steps):
            p, loss = step(p, X, Y, batches.indices(t))
        jax.block_until_ready(p)
        return time.perf_counter() - t0, float(loss)

    return timed, compile_s


GRADS, SUMS, SELECT = "per-worker gradients only", "+ EF sums g_r + e_r", "+ top-k of each p_r (breakdown)"


def floor_parts(task, workers: int, batch: int, seed: int, modes=("loop", "vmap"), ratio: float | None = None):
    """A timer ``(steps) -> {part: wall s}`` of the epoch's work no EF
    compressor can avoid: the n per-worker gradients alone, then those plus
    EF's sums p_r = g_r + e_r (each the faster of the grad modes given), and
    its compile s. No selection, exchange or update: a lower bound. With a
    top-k ``ratio`` also a third part for the per-phase breakdown (not part
    of the bound): those plus ``ops.top_k_abs`` of every p_r leaf."""
    import jax
    import jax.numpy as jnp

    import backends
    from compressors.topk import keep_count
    from kfsim.train import loop, models, step

    ops = backends.get("jax")

    X, Y = jnp.asarray(task.x_train), jnp.asarray(task.y_train)
    batches = loop.Batches(len(task.x_train), batch, seed)
    p = {k: jnp.asarray(v) for k, v in models.init_params("mlp", seed).items()}
    e = [jax.tree_util.tree_map(jnp.zeros_like, p) for _ in range(workers)]
    fns = {}
    t0 = time.perf_counter()
    for mode in modes:
        def grads(p, e, idx, mode=mode):
            return step.worker_grads("mlp", p, X[idx], Y[idx], workers, mode)[1]

        def ef_sums(p, e, idx, grads=grads):
            return [jax.tree_util.tree_map(jnp.add, g, r) for g, r in zip(grads(p, e, idx), e)]

        def selected(p, e, idx, ef_sums=ef_sums):
            return [[ops.top_k_abs(jnp.reshape(a, (-1,)), keep_count(ratio, a.size)) for a in q.values()]
                    for q in ef_sums(p, e, idx)]

        parts = ((GRADS, grads), (SUMS, ef_sums)) + (((SELECT, selected),) if ratio else ())
        for name, fn in parts:
            f = jax.jit(fn)
            jax.block_until_ready(f(p, e, batches.indices(0)))
            fns.setdefault(name, []).append(f)
    compile_s = time.perf_counter() - t0

    def timed(steps: int) -> dict:
        out = {}
        for name, fs in fns.items():
            best = None
            for f in fs:
                t0 = time.perf_counter()
                for t in range(steps):
                    r = f(p, e, batches.indices(t))
                jax.block_until_ready(r)
                wall = time.perf_counter() - t0
                best = wall if best is None else min(best, wall)
            out[name] = best
        return out

    return timed, compile_s


def simulated(task, strategy: dict, workers: int, batch: int, steps: int, spec: str, lr: float, seed: int):
    """(compile s, timer ``() -> (wall s, final train loss)``) of the N-worker
    simulation: each call times one fresh ``Trainer.run`` of ``steps``."""
    import jax

    from kfsim.train import loop
    from kfsim.train.config import RunConfig

    cfg = RunConfig(task="fmnist-mlp", compressor=spec, workers=workers, batch=batch, steps=steps, lr=lr,
                    seed=seed, eval_every=steps, **strategy)
    t0 = time.perf_counter()  # compiles the step and the evaluation (both cached across Trainers)
    jax.block_until_ready(loop.Trainer(cfg.replace(steps=1, eval_every=1), task).run().state.params)
    compile_s = time.perf_counter() - t0

    def timed():
        trainer = loop.Trainer(cfg, task)
        t0 = time.perf_counter()
        res = trainer.run()
        jax.block_until_ready(res.state.params)
        return time.perf_counter() - t0, res.steps[-1].loss

    return compile_s, timed


class Floor:
    """Interleaved lower-bound timings at one worker count: min over repeats."""

    def __init__(self, task, workers, batch, seed, steps, modes, ratio=None):
        self.timer, self.compile_s = floor_parts(task, workers, batch, seed, modes, ratio)
        self.steps, self.best = steps, {}

    def sample(self):
        for name, wall in self.timer(self.steps).items():
            self.best[name] = min(self.best.get(name, wall), wall)

    @property
    def bound(self) -> float:
        return max(self.best[GRADS], self.best[SUMS])  # the superset; never below its subset


def breakdown(floor: Floor, wall: float, steps: int, base: float | None = None) -> None:
    """The lower bound's parts, cumulative, then what the measured step adds
    past them (selection's exchange, decode, residual and update)."""
    last = 0.0
    for name, t in floor.best.items():
        extra = "" if base is None else f"  {t / base:6.2f}x plain"
        print(f"  {name:34s} wall {t:7.2f} s  ({t / steps * 1e3:7.2f} ms/step; +{(t - last) / steps * 1e3:7.2f})"
              f"{extra}")
        last = t
    print(f"  {'measured step (whole run)':34s} wall {wall:7.2f} s  ({wall / steps * 1e3:7.2f} ms/step; "
          f"+{(wall - last) / steps * 1e3:7.2f})")


def line(name, c, wall, steps, loss, ratio, against):
    print(f"{name:34s} compile {c:6.2f} s  wall {wall:7.2f} s  ({wall / steps * 1e3:7.2f} ms/step)  "
          f"loss {loss:.4f}  {ratio:6.2f}x {against}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--wide", type=int, default=64, help="worker count of target (c)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--wide-epochs", type=float, default=0.25, help="epochs timed at --wide workers")
    ap.add_argument("--spec", default="ef(topk(ratio=0.01))")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="repeats of the (a) timings and of the lower bounds "
                    "(the minimum is kept)")
    ap.add_argument("--strategy", action="append", choices=sorted(STRATEGIES),
                    help="execution strategy to time at --workers (repeatable; default all)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: a few steps, 8 and 16 workers, vmap only, one repeat")
    args = ap.parse_args()
    if args.quick:
        args.workers, args.wide, args.repeats = 8, 16, 1
        args.strategy = args.strategy or [WIDE]

    from kfsim.train import tasks

    task = tasks.load("fmnist-mlp", limit_test=1000)
    per_epoch = len(task.x_train) // args.batch
    steps = 8 if args.quick else max(1, int(args.epochs * per_epoch))
    wide_steps = 8 if args.quick else max(1, int(args.wide_epochs * per_epoch))
    print(f"Fashion-MNIST MLP, global batch {args.batch}, {args.spec}; {steps} steps at 1 and {args.workers} "
          f"workers, {wide_steps} at {args.wide}")

    plain, c = single_process(task, args.batch, args.lr, args.seed)
    base, l0 = plain(steps)
    print(f"{'single process (reference)':34s} compile {c:6.2f} s  wall {base:7.2f} s  "
          f"({base / steps * 1e3:7.2f} ms/step)  loss {l0:.4f}")

    # (a) one worker, identity compressor, vs the plain loop: min of interleaved repeats of both
    c1, one = simulated(task, STRATEGIES[ONE_WORKER], 1, args.batch, steps, "none()", args.lr, args.seed)
    w1, loss1 = one()
    for _ in range(max(1, args.repeats) - 1):
        base = min(base, plain(steps)[0])
        w1 = min(w1, one()[0])
    base = min(base, plain(steps)[0])
    ratio_a = w1 / base
    line(f"1 worker none() {ONE_WORKER}", c1, w1, steps, loss1, ratio_a, "plain")

    # (b) --workers with the spec, vs the lower bound there: every side the min of interleaved repeats
    m = re.search(r"topk\(ratio=([0-9.eE+-]+)\)", args.spec)
    ratio = float(m.group(1)) if m else None
    floor = Floor(task, args.workers, args.batch, args.seed, steps,
                  ("vmap",) if args.quick else ("loop", "vmap"), ratio)
    runs = {name: simulated(task, STRATEGIES[name], args.workers, args.batch, steps, args.spec, args.lr,
                            args.seed) for name in args.strategy or list(STRATEGIES)}
    best: dict = {}
    for _ in range(max(1, args.repeats)):
        floor.sample()
        for name, (c, timed) in runs.items():
            wall, loss = timed()
            best[name] = min(best.get(name, (wall, loss)), (wall, loss))
    rows = [(best[name][0], name, c, best[name][1]) for name, (c, _) in runs.items()]
    for wall, name, c, loss in rows:
        line(f"{args.workers} workers {name}", c, wall, steps, loss, wall / floor.bound, "lower bound")
    best_b = min(rows)
    print(f"lower bound at {args.workers} workers and per-phase breakdown (min of {max(1, args.repeats)} "
          f"interleaved repeats; compile {floor.compile_s:.2f} s):")
    breakdown(floor, best_b[0], steps, base)

    # (c) --wide workers, vmap/vmap, vs the lower bound there
    wide = Floor(task, args.wide, args.batch, args.seed, wide_steps, ("vmap",), ratio)
    cw, timed = simulated(task, STRATEGIES[WIDE], args.wide, args.batch, wide_steps, args.spec, args.lr,
                          args.seed)
    ww = lossw = None
    for _ in range(max(1, args.repeats)):
        wide.sample()
        wall, loss = timed()
        ww, lossw = min((ww, lossw), (wall, loss)) if ww is not None else (wall, loss)
    line(f"{args.wide} workers {WIDE}", cw, ww, wide_steps, lossw, ww / wide.bound, "lower bound")
    print(f"lower bound at {args.wide} workers and per-phase breakdown (min of {max(1, args.repeats)} "
          f"interleaved repeats; compile {wide.compile_s:.2f} s):")
    breakdown(wide, ww, wide_steps)

    print("targets (measured in this run):")
    print(f"  (a) 1 worker none() / plain JAX:                 {ratio_a:6.2f}x  (target <= 1.2x)")
    print(f"  (b) {args.workers} workers {args.spec} / lower bound:  {best_b[0] / floor.bound:6.2f}x  "
          f"(target <= 1.5x; {best_b[1]})")
    print(f"  (c) {args.wide} workers {args.spec} / lower bound:  {ww / wide.bound:6.2f}x  (target <= 2x; {WIDE})")


if __name__ == "__main__":
    main()
