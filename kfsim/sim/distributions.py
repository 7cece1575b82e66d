"""Per-worker compute-time distributions for the event simulations.

A distribution is anything callable as ``d(rng) -> seconds`` (rng a
``numpy.random.Generator``); a plain number is a constant. Helpers:
``constant``, ``normal`` (truncated at 0), ``lognormal`` (given its mean),
``straggler`` (base time, slowed by ``factor`` with probability ``prob``).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

Dist = Callable[[np.random.Generator], float]


def constant(t: float) -> Dist:
    _check(t >= 0, f"compute time must be >= 0, got {t}")
    return lambda rng: float(t)


def normal(mean: float, std: float) -> Dist:
    _check(mean >= 0 and std >= 0, f"normal(mean={mean}, std={std}) needs mean, std >= 0")
    return lambda rng: max(0.0, float(rng.normal(mean, std)))


def lognormal(mean: float, sigma: float) -> Dist:
    """Log-normal with the given mean: exp(N(ln mean − σ²/2, σ))."""
    _check(mean > 0 and sigma >= 0, f"lognormal(mean={mean}, sigma={sigma}) needs mean > 0, sigma >= 0")
    mu = math.log(mean) - sigma**2 / 2
    return lambda rng: float(rng.lognormal(mu, sigma))


def straggler(base: float, prob: float, factor: float) -> Dist:
    _check(base >= 0 and 0 <= prob <= 1 and factor >= 1,
           f"straggler(base={base}, prob={prob}, factor={factor}) needs base>=0, 0<=prob<=1, factor>=1")
    return lambda rng: float(base * (factor if rng.random() < prob else 1.0))


def per_worker(compute, workers: int) -> list[Dist]:
    """Normalise ``compute`` (number, callable, or one per worker) to a list of callables."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if isinstance(compute, (list, tuple)):
        if len(compute) != workers:
            raise ValueError(f"compute: {len(compute)} distributions for {workers} workers")
        return [_one(c) for c in compute]
    return [_one(compute)] * workers


def _one(c) -> Dist:
    if callable(c):
        return c
    if isinstance(c, (int, float)):
        return constant(float(c))
    raise ValueError(f"compute time must be a number or a callable rng -> seconds, got {c!r}")


def worker_rngs(seed: int, workers: int) -> Sequence[np.random.Generator]:
    """Independent, reproducible streams: worker i's draws don't depend on event order."""
    return [np.random.default_rng([int(seed), i]) for i in range(workers)]


def _check(cond, msg):
    if not cond:
        raise ValueError(msg)
