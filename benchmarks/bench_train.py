"""Benchmark: simulated data-parallel training vs single-process training.

16 simulated workers train one epoch of Fashion-MNIST with the MLP using
ef(topk(ratio=0.01)); the reference is single-process training (one jitted
SGD step on the whole global batch, no compression) of the same epoch with the
same global batch and data order. Both are timed after compilation (compile
time is printed apart). Prints wall times and the ratio for each execution
strategy of the simulator (per-worker gradients: loop/vmap; exchange:
compressors.exchange loop or vectorised; the 200k-entry top-k goes to the
NumPy backend's Numba selection through a host callback). Target: ratio <= 2. It ends with a lower bound: the per-worker
gradients and error feedback's sums alone, timed over the same epoch.

    python benchmarks/bench_train.py [--workers 16] [--batch 128] [--epochs 1]
"""
from __future__ import annotations

import argparse
import time


STRATEGIES = {
    "loop/loop/jax": dict(grad_mode="loop", exchange="loop", backend="jax"),
    "vmap/vmap/jax": dict(grad_mode="vmap", exchange="vmap", backend="jax"),
}


def single_process(task, batch: int, steps: int, lr: float, seed: int) -> tuple[float, float, float]:
    """(compile s, wall s, final train loss) of plain one-process SGD on the same batches."""
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
    p = p0
    t0 = time.perf_counter()
    for t in range(steps):
        p, loss = step(p, X, Y, batches.indices(t))
    jax.block_until_ready(p)
    return compile_s, time.perf_counter() - t0, float(loss)


def floor_parts(task, workers: int, batch: int, steps: int, seed: int) -> dict[str, float]:
    """Wall s of the epoch's work that no EF compressor can avoid: the n
    per-worker gradients alone (grad_mode "loop"), then those plus EF's sums
    p_r = g_r + e_r. No selection, exchange or update: a lower bound."""
    import jax
    import jax.numpy as jnp

    from kfsim.train import loop, models, step

    X, Y = jnp.asarray(task.x_train), jnp.asarray(task.y_train)
    batches = loop.Batches(len(task.x_train), batch, seed)
    p = {k: jnp.asarray(v) for k, v in models.init_params("mlp", seed).items()}
    e = [jax.tree_util.tree_map(jnp.zeros_like, p) for _ in range(workers)]

    def grads(p, e, idx):
        return step.worker_grads("mlp", p, X[idx], Y[idx], workers, "loop")[1]

    def ef_sums(p, e, idx):
        return [jax.tree_util.tree_map(jnp.add, g, r) for g, r in zip(grads(p, e, idx), e)]

    out = {}
    for name, fn in (("per-worker gradients only", grads), ("+ EF sums g_r + e_r", ef_sums)):
        f = jax.jit(fn)
        jax.block_until_ready(f(p, e, batches.indices(0)))
        t0 = time.perf_counter()
        for t in range(steps):
            r = f(p, e, batches.indices(t))
        jax.block_until_ready(r)
        out[name] = time.perf_counter() - t0
    return out


def simulated(task, strategy: dict, workers: int, batch: int, steps: int, spec: str, lr: float, seed: int):
    """(compile s, wall s, final train loss) of the N-worker simulation."""
    import jax

    from kfsim.train import loop
    from kfsim.train.config import RunConfig

    cfg = RunConfig(task="fmnist-mlp", compressor=spec, workers=workers, batch=batch, steps=steps, lr=lr,
                    seed=seed, eval_every=steps, **strategy)
    trainer = loop.Trainer(cfg, task)
    t0 = time.perf_counter()
    jax.block_until_ready(trainer.run(until=1).state.params)  # compiles the step (shared cache)
    compile_s = time.perf_counter() - t0
    trainer = loop.Trainer(cfg, task)
    t0 = time.perf_counter()
    res = trainer.run()
    jax.block_until_ready(res.state.params)
    return compile_s, time.perf_counter() - t0, res.steps[-1].loss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--spec", default="ef(topk(ratio=0.01))")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--strategy", action="append", choices=sorted(STRATEGIES),
                    help="execution strategy to time (repeatable; default all)")
    args = ap.parse_args()

    from kfsim.train import tasks

    task = tasks.load("fmnist-mlp", limit_test=1000)
    steps = max(1, int(args.epochs * (len(task.x_train) // args.batch)))
    print(f"Fashion-MNIST MLP, {steps} steps ({args.epochs:g} epoch), global batch {args.batch}, "
          f"{args.workers} simulated workers, {args.spec}")
    c, base, l0 = single_process(task, args.batch, steps, args.lr, args.seed)
    print(f"{'single process (reference)':28s} compile {c:6.2f} s  wall {base:7.2f} s  "
          f"({base / steps * 1e3:6.2f} ms/step)  loss {l0:.4f}")
    best = None
    for name in args.strategy or list(STRATEGIES):
        c, wall, loss = simulated(task, STRATEGIES[name], args.workers, args.batch, steps, args.spec,
                                  args.lr, args.seed)
        ratio = wall / base
        best = min(best or (ratio, name), (ratio, name))
        print(f"{name:28s} compile {c:6.2f} s  wall {wall:7.2f} s  ({wall / steps * 1e3:6.2f} ms/step)  "
              f"loss {loss:.4f}  ratio {ratio:5.2f}x")
    print(f"best: {best[1]}  ratio {best[0]:.2f}x (target <= 2x)")
    print("lower bound (work any EF compressor's step contains, same epoch):")
    for name, wall in floor_parts(task, args.workers, args.batch, steps, args.seed).items():
        print(f"  {name:26s} wall {wall:7.2f} s  ({wall / steps * 1e3:6.2f} ms/step)  ratio {wall / base:5.2f}x")


if __name__ == "__main__":
    main()
