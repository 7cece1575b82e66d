"""Choosing a per-tensor plan: minimise the predicted iteration time under an error budget.

Given, per candidate c and tensor t, the measured squared error of the
decoded mean (:mod:`kfsim.plans.errors`), a plan ``choice`` (one candidate
per tensor) is *feasible* when its whole-gradient relative error

    E(choice) = sqrt(Σ_t sq_err[c_t, t] / Σ_t ‖ḡ_t‖²)  <=  budget.

Why this budget: it is the contraction the analyses of compressed SGD bound
(‖C(x) − x‖² ≤ (1 − δ)‖x‖², Stich et al. 2018; Karimireddy et al. 2019),
measured on the model's own gradients, and a uniform compressor meets it
exactly when its own relative error does — so the plan and the best uniform
compressor are compared at the same fidelity.

The objective is the timing simulator's iteration time
(``kfsim.sim.predict.predict_iteration``: DDP buckets, the pipeline of
backward, codec and collectives, codec cost from each tensor's op program)
of ``compressors.paths(...)`` — not a sum over tensors, since buckets
pipeline and pay latency once. With at most ``exhaustive`` combinations every
plan is priced (optimal); otherwise a local search (change one tensor's
compressor while the time falls and the budget holds), started from the
best feasible uniform compressor and from the most accurate plan. Uniform
plans are among the candidates, so the plan is never predicted slower than
the best feasible uniform compressor.
"""
from __future__ import annotations

import itertools
from typing import NamedTuple, Sequence

import numpy as np

import compressors
from kfsim.plans.errors import Errors

EXHAUSTIVE = 4096


class Choice(NamedTuple):
    tensors: dict                # tensor path -> candidate spec
    spec: str                    # the plan as one compressor spec
    predicted_s: float
    error: float                 # whole-gradient relative error
    uniform: list                # per candidate: {"spec", "predicted_s", "error", "feasible"}
    best_uniform: dict | None    # the fastest feasible uniform row (None: no candidate meets the budget)
    method: str                  # "exhaustive" or "local search"
    evaluated: int               # plans priced


class Pricer:
    """Predicted seconds of a plan (cached per choice)."""

    def __init__(self, errors: Errors, profile, cluster, workers: int, collective: str | None = None,
                 predict: dict | None = None):
        from kfsim.sim.predict import predict_iteration

        self._predict = predict_iteration
        self.errors, self.profile, self.cluster, self.workers = errors, profile, cluster, workers
        self.collective = collective
        self.predict = dict(predict or {})   # further predict_iteration options (overlap, bucket_mb)
        self.comps = [compressors.parse(c) for c in errors.candidates]
        self.default = compressors.parse("none()")
        self.cache: dict = {}

    def compressor(self, choice: Sequence[int]) -> compressors.Compressor:
        pairs = [v for t, c in enumerate(choice) for v in (self.errors.names[t], self.comps[c])]
        return compressors.paths(self.default, *pairs)

    def __call__(self, choice: Sequence[int]) -> float:
        key = tuple(int(c) for c in choice)
        if key not in self.cache:
            b = self._predict(self.profile, self.cluster, self.compressor(key), self.workers,
                              batch_per_worker=self.profile.batch, collective=self.collective, **self.predict)
            self.cache[key] = float(b.total_s)
        return self.cache[key]


def choose(errors: Errors, profile, cluster, workers: int, budget: float, *, collective: str | None = None,
           exhaustive: int = EXHAUSTIVE, predict: dict | None = None) -> Choice:
    """The fastest plan (predicted) whose whole-gradient relative error is within ``budget``;
    ``predict``: further ``predict_iteration`` options for how the plan will run (e.g. a testbed
    worker's ``overlap=False`` and one bucket per tensor)."""
    if not (budget >= 0):
        raise ValueError(f"the error budget must be a number >= 0, got {budget!r}")
    names = errors.names
    if set(names) != set(profile.tensor_names or ()):
        raise ValueError(f"the measured tensors {sorted(names)} are not the model's {sorted(profile.tensor_names or ())}")
    C, T = errors.sq_err.shape
    if C < 1:
        raise ValueError("give at least one candidate compressor")
    price = Pricer(errors, profile, cluster, workers, collective, predict)
    ok = lambda ch: errors.total(ch) <= budget  # noqa: E731
    uniform = []
    for c in range(C):
        ch = (c,) * T
        uniform.append({"spec": errors.candidates[c], "predicted_s": price(ch), "error": errors.total(ch),
                        "feasible": ok(ch)})
    feasible_u = [(u["predicted_s"], c) for c, u in enumerate(uniform) if u["feasible"]]
    best_u = uniform[min(feasible_u)[1]] if feasible_u else None
    starts = [(c,) * T for _, c in sorted(feasible_u)[:1]]
    accurate = tuple(int(np.argmin(errors.sq_err[:, t])) for t in range(T))
    if not ok(accurate):
        raise ValueError(f"no plan meets the error budget {budget:g}: the most accurate candidates per tensor "
                         f"reach {errors.total(accurate):.4g} (add a more accurate candidate, e.g. none(), "
                         f"or raise --budget)")
    starts.append(accurate)
    if C ** T <= exhaustive:
        method = "exhaustive"
        best = min(((price(ch), ch) for ch in itertools.product(range(C), repeat=T) if ok(ch)),
                   key=lambda x: (x[0], errors.total(x[1])))
    else:
        method = "local search"
        best = min((_descend(start, price, ok, C) for start in starts), key=lambda x: (x[0], errors.total(x[1])))
    t_best, ch = best
    tensors = {names[t]: errors.candidates[c] for t, c in enumerate(ch)}
    return Choice(tensors, price.compressor(ch).spec, t_best, errors.total(ch), uniform, best_u, method,
                  len(price.cache))


def _descend(start: tuple, price, ok, C: int) -> tuple[float, tuple]:
    """Best single-tensor changes while they lower the predicted time within the budget."""
    cur, t_cur = tuple(start), price(start)
    while True:
        moves = [cur[:t] + (c,) + cur[t + 1:] for t in range(len(cur)) for c in range(C) if c != cur[t]]
        priced = [(price(m), m) for m in moves if ok(m)]
        if not priced:
            return t_cur, cur
        t_new, new = min(priced)
        if t_new >= t_cur:
            return t_cur, cur
        cur, t_cur = new, t_new
