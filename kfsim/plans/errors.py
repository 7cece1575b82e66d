"""How far each candidate compressor moves each tensor's mean gradient, on real gradients.

For a task's model (``kfsim.train``), ``batches`` steps of plain SGD from the
initial parameters (the run's seed, the training data's first batches in the
training order) give, at every step, n workers' gradients ``g_r`` (samples
``[r::n]`` of the global batch, as every kfsim driver shards). Each candidate
runs the exchange through the runner (``compressors.protocol.run``, its state
carried across the steps, so error feedback and warm starts act as they do in
training) and, per tensor t, its squared error against the true mean
``ḡ = (1/n) Σ_r g_r`` is summed over the steps:

    sq_err[c, t] = Σ_s ‖Ĉ_s(g)_t − ḡ_{s,t}‖²,    sq_norm[t] = Σ_s ‖ḡ_{s,t}‖²

so ``sqrt(sq_err / sq_norm)`` is tensor t's relative error under candidate c
and a plan's whole-gradient relative error is
``sqrt(Σ_t sq_err[c_t, t] / Σ_t sq_norm[t])`` (tensors are independent under
a per-tensor plan: each is encoded and decoded by its own compressor, with
keys folded from its own index).
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

import compressors
from compressors import protocol
from kfsim.train import models, tasks


class Errors(NamedTuple):
    names: tuple[str, ...]       # tensor paths (sorted: the pytree's order)
    candidates: tuple[str, ...]  # canonical specs
    sq_err: np.ndarray           # (C, T) summed squared error of the decoded mean
    sq_norm: np.ndarray          # (T,) summed squared norm of the true mean

    def relative(self) -> np.ndarray:
        """(C, T) per-tensor relative error (0 for a tensor whose gradient is 0 and stays 0)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.sqrt(self.sq_err / self.sq_norm)
        return np.where(self.sq_norm > 0, rel, np.where(self.sq_err > 0, np.inf, 0.0))

    def total(self, choice: Sequence[int]) -> float:
        """Whole-gradient relative error of the plan choosing candidate ``choice[t]`` for tensor t."""
        err = float(sum(self.sq_err[c, t] for t, c in enumerate(choice)))
        norm = float(self.sq_norm.sum())
        return float(np.sqrt(err / norm)) if norm > 0 else (0.0 if err == 0 else float("inf"))


def gradients(task: str, workers: int, batch: int, batches: int, *, seed: int = 0, lr: float = 0.1,
              limit_train: int | None = None) -> list[list[dict]]:
    """Per step, per worker, the gradient dict (NumPy float32) along ``batches`` steps of plain SGD."""
    import jax
    import jax.numpy as jnp

    from kfsim.train.step import worker_grads
    from kfsim.train.sync import Batches

    for name, v in (("workers", workers), ("batch", batch), ("batches", batches)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if batch % workers:
        raise ValueError(f"global batch {batch} must be divisible by workers {workers} (equal shards)")
    t = tasks.load(task, limit_train=limit_train, limit_test=1)
    model = t.model
    order = Batches(len(t.x_train), batch, seed)
    params = {k: jnp.asarray(v) for k, v in models.init_params(model, seed).items()}
    grad_fn = jax.jit(lambda p, x, y: worker_grads(model, p, x, y, workers)[1])
    out = []
    for s in range(batches):
        idx = order.indices(s)
        gs = grad_fn(params, jnp.asarray(t.x_train[idx]), jnp.asarray(t.y_train[idx]))
        out.append([{k: np.asarray(v, np.float32) for k, v in g.items()} for g in gs])
        mean = jax.tree_util.tree_map(lambda *a: sum(a) / workers, *gs)
        params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, mean)
    return out


def measure(candidates: Sequence[str], grads: list[list[dict]], *, backend: str = "numpy",
            seed: int = 0) -> Errors:
    """Per candidate and tensor, the summed squared error of the decoded mean over the steps."""
    import backends

    if not grads or not grads[0]:
        raise ValueError("measure needs at least one step of gradients from at least one worker")
    ops = backends.get(backend)
    names = tuple(sorted(grads[0][0]))
    n = len(grads[0])
    comps = [compressors.parse(c) for c in candidates]
    sq_err = np.zeros((len(comps), len(names)))
    sq_norm = np.zeros(len(names))
    trues = [{k: np.sum([np.asarray(g[k], np.float64) for g in step], axis=0) / n for k in names}
             for step in grads]
    for true in trues:
        for t, k in enumerate(names):
            sq_norm[t] += float(np.sum(true[k] * true[k]))
    for c, comp in enumerate(comps):
        states = [comp.init(ops, {k: ops.asarray(v) for k, v in g.items()}) for g in grads[0]]
        for s, step in enumerate(grads):
            active = comp.step(s)
            per = [{k: ops.asarray(v) for k, v in g.items()} for g in step]
            keys = [compressors.make_keys(ops, seed, s, r) for r in range(n)]
            res = protocol.run(ops, active, per, states, keys)
            states = list(res.states)
            for t, k in enumerate(names):
                d = np.asarray(res.mean[k], np.float64) - trues[s][k]
                sq_err[c, t] += float(np.sum(d * d))
    return Errors(names, tuple(c.spec for c in comps), sq_err, sq_norm)
