"""Least-squares fit of the mccl echo-ring cost model to measured collective times.

MindSpore's CPU collectives ("mccl", measured on this testbed, see
``kfsim calibrate``) run a point-to-point TCP ring in which every message is
echoed back to its sender as the acknowledgement, so each of the ring's
steps moves the chunk twice over a link and costs a round trip. With p
ranks, n bytes per rank (all-reduce) or m bytes contributed per rank
(all-gather), α per message, β seconds per byte on the wire and γ the
reduction cost per byte (the same closed forms as
:func:`kfsim.sim.collectives.mccl_allreduce` / ``mccl_allgather``)::

    T_AR(p, n) = 2(p−1)·(2α + 2(n/p)β) + (p−1)/p·nγ
    T_AG(p, m) = (p−1)·(2α + 2mβ)

Both are linear in θ = (α, β, γ): T = x·θ with
x_AR = (4(p−1), 4(p−1)n/p, (p−1)n/p) and x_AG = (2(p−1), 2(p−1)m, 0).
The fit minimises the weighted squared error Σ w²(x·θ − t)² subject to
θ ≥ 0, by solving every subset of free coordinates and keeping the best
feasible one (exact NNLS for 3 unknowns). Weights: ``sqrt`` (default,
w = 1/√t: timing noise on this shared host grows with the duration, and
training steps are dominated by the large messages), ``relative`` (w = 1/t,
every size counts equally) or ``absolute`` (w = 1). The link efficiency reported is e = 1/(rate·β): the fraction of
the shaped rate the echo ring actually reaches per byte sent.

A codec cost is fitted as t = t0 + n·c (seconds per dense byte c, fixed
cost t0) by the same weighted least squares with two unknowns.
"""
from __future__ import annotations

import itertools
from typing import NamedTuple, Sequence

import numpy as np

OPS = ("allreduce", "allgather")


class Sample(NamedTuple):
    """One measured collective: op, ranks, bytes per rank (AR) or contributed (AG), seconds."""

    op: str
    p: int
    nbytes: float
    seconds: float


class CollectiveFit(NamedTuple):
    alpha: float              # s per message
    beta: float               # s per byte on the wire
    gamma: float              # s per byte reduced
    rel_errors: np.ndarray    # (prediction − measured) / measured, per sample
    samples: int

    @property
    def efficiency(self) -> float:  # needs the rate: see efficiency_at
        raise AttributeError("use efficiency_at(rate_bytes_per_s)")

    def efficiency_at(self, rate_bytes_per_s: float) -> float:
        return 1.0 / (rate_bytes_per_s * self.beta) if self.beta > 0 else float("inf")

    def predict(self, op: str, p, nbytes) -> np.ndarray:
        return design(op, p, nbytes) @ np.array([self.alpha, self.beta, self.gamma])

    @property
    def median_abs_error(self) -> float:
        return float(np.median(np.abs(self.rel_errors))) if len(self.rel_errors) else float("nan")

    @property
    def max_abs_error(self) -> float:
        return float(np.max(np.abs(self.rel_errors))) if len(self.rel_errors) else float("nan")


def design(op: str, p, nbytes) -> np.ndarray:
    """Rows x with T = x·(α, β, γ) for the mccl echo ring (shape (..., 3))."""
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    p = np.asarray(p, dtype=np.float64)
    n = np.asarray(nbytes, dtype=np.float64)
    if np.any(p < 1) or np.any(n < 0):
        raise ValueError("p must be >= 1 and nbytes >= 0")
    p, n = np.broadcast_arrays(p, n)
    if op == "allreduce":
        cols = (4 * (p - 1), 4 * (p - 1) * n / p, (p - 1) * n / p)
    else:
        cols = (2 * (p - 1), 2 * (p - 1) * n, np.zeros_like(n))
    return np.stack(cols, axis=-1)


WEIGHTINGS = ("sqrt", "relative", "absolute")


def weights(t: np.ndarray, weighting: str) -> np.ndarray:
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    t = np.asarray(t, dtype=np.float64)
    return {"sqrt": 1 / np.sqrt(t), "relative": 1 / t, "absolute": np.ones_like(t)}[weighting]


def nnls_relative(X: np.ndarray, t: np.ndarray, weighting: str = "relative") -> np.ndarray:
    """argmin_{θ ≥ 0} Σ w²(Xθ − t)² (w from ``weighting``; default relative: w = 1/t),
    exactly, by enumerating active sets (few unknowns)."""
    X = np.asarray(X, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    if X.ndim != 2 or t.shape != (X.shape[0],):
        raise ValueError(f"X must be (m, k) and t (m,), got {X.shape} and {t.shape}")
    if X.shape[0] == 0:
        raise ValueError("no samples to fit")
    if np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise ValueError("measured times must be finite and > 0")
    k = X.shape[1]
    w = weights(t, weighting)
    W = X * w[:, None]
    ones = t * w
    best, best_loss = np.zeros(k), float(np.sum(ones ** 2))
    for r in range(1, k + 1):
        for cols in itertools.combinations(range(k), r):
            sub = W[:, cols]
            if not np.any(sub):
                continue
            sol, *_ = np.linalg.lstsq(sub, ones, rcond=None)
            if np.any(sol < 0):
                continue
            theta = np.zeros(k)
            theta[list(cols)] = sol
            loss = float(np.sum((W @ theta - ones) ** 2))
            if loss < best_loss - 1e-15:
                best, best_loss = theta, loss
    return best


def fit_collectives(samples: Sequence[Sample], fit_gamma: bool = True, weighting: str = "sqrt") -> CollectiveFit:
    """Fit (α, β, γ) of the mccl model to samples measured at one link rate."""
    samples = list(samples)
    if not samples:
        raise ValueError("no samples to fit")
    X = np.concatenate([design(s.op, s.p, s.nbytes)[None] for s in samples])
    t = np.array([s.seconds for s in samples])
    if not fit_gamma:
        X = X.copy()
        X[:, 2] = 0.0
    theta = nnls_relative(X, t, weighting)
    err = (X @ theta - t) / t
    return CollectiveFit(float(theta[0]), float(theta[1]), float(theta[2]), err, len(samples))


class CodecFit(NamedTuple):
    fixed_s: float
    s_per_byte: float
    rel_errors: np.ndarray

    @property
    def bytes_per_s(self) -> float:
        return 1.0 / self.s_per_byte if self.s_per_byte > 0 else float("inf")


def fit_linear_cost(nbytes: Sequence[float], seconds: Sequence[float]) -> CodecFit:
    """t = t0 + n·c with t0, c ≥ 0 (relative least squares)."""
    n = np.asarray(nbytes, dtype=np.float64)
    t = np.asarray(seconds, dtype=np.float64)
    if n.shape != t.shape or n.ndim != 1:
        raise ValueError("nbytes and seconds must be 1-d of equal length")
    X = np.stack([np.ones_like(n), n], axis=1)
    theta = nnls_relative(X, t)
    return CodecFit(float(theta[0]), float(theta[1]), (X @ theta - t) / t)


def echo_factor(tx_bytes: float, op: str, p: int, nbytes: float) -> float:
    """Measured bytes sent per rank ÷ the textbook ring's: 2(p−1)/p·n (AR), (p−1)·m (AG)."""
    if p < 2:
        raise ValueError("echo factor needs p >= 2")
    textbook = 2 * (p - 1) / p * nbytes if op == "allreduce" else (p - 1) * nbytes
    return tx_bytes / textbook
