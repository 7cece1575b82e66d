"""``kfsim plan`` end to end: measure the candidates on the task's gradients, choose, make the Plan."""
from __future__ import annotations

from typing import Sequence

from kfsim.plans import choose as choosing
from kfsim.plans import errors as measuring
from kfsim.plans.file import Plan, make
from kfsim.train import tasks, timing

DEFAULT_CANDIDATES = ("none()", "fp16()", "sumquant()", "ef(topk(ratio=0.01))", "powersgd(rank=4)")


def build(task: str = "fmnist-mlp", candidates: Sequence[str] = DEFAULT_CANDIDATES, budget: float = 0.1, *,
          workers: int = 4, batch: int = 128, batches: int = 3, cluster: str = "nodes",
          bandwidth_gbit: float | None = None, collective: str | None = None, seed: int = 0, lr: float = 0.1,
          limit_train: int | None = None, exhaustive: int = choosing.EXHAUSTIVE,
          grads: list | None = None) -> tuple[Plan, choosing.Choice]:
    """The plan for ``task`` on the cluster (as ``kfsim train`` prices it) and how it was chosen;
    ``grads``: per step, per worker, gradient dicts to measure on instead of the task's."""
    if task not in tasks.TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(tasks.TASKS)}")
    if not candidates:
        raise ValueError("give at least one candidate compressor")
    if not (isinstance(budget, (int, float)) and budget >= 0):
        raise ValueError(f"the error budget must be a number >= 0, got {budget!r}")
    if batch % workers:
        raise ValueError(f"global batch {batch} must be divisible by workers {workers} (equal shards)")
    model = tasks.TASKS[task]
    specs = list(dict.fromkeys(make(model, c, {}, where=f"candidate {c!r}").default for c in candidates))
    if grads is None:
        grads = measuring.gradients(task, workers, batch, batches, seed=seed, lr=lr, limit_train=limit_train)
    errs = measuring.measure(specs, grads, seed=seed)
    profile = timing.model_profile(model, batch // workers)
    cl = timing.cluster(cluster, bandwidth_gbit, workers)
    choice = choosing.choose(errs, profile, cl, workers, float(budget), collective=collective,
                             exhaustive=exhaustive)
    chosen = {"task": task, "budget": float(budget), "error": choice.error, "predicted_s": choice.predicted_s,
              "method": choice.method, "workers": workers, "cluster": cl.name,
              "bandwidth_gbit": float(cl.inter.bandwidth * 8 / 1e9),
              "best_uniform": choice.best_uniform["spec"] if choice.best_uniform else "",
              "best_uniform_s": choice.best_uniform["predicted_s"] if choice.best_uniform else float("nan"),
              "candidates": specs}
    return make(model, "none()", choice.tensors, chosen), choice
