"""Flow-level max-min fair bandwidth sharing (Numba).

Flows are given as link lists in CSR form (``ptr``, ``idx``: flow f uses
links idx[ptr[f]:ptr[f+1]]). Progressive filling (Bertsekas & Gallager,
*Data Networks*, §6.5.2): raise every unfrozen flow's rate together until a
link saturates; freeze the flows crossing it; repeat. The result is the
max-min fair allocation: no flow can get more without taking from a flow
with a smaller or equal rate.

:func:`completion_times` then runs the fluid model: all flows start at 0,
rates are recomputed whenever one finishes (events per flow completion).
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _maxmin(ptr, idx, cap, active):
    nf = len(ptr) - 1
    nl = len(cap)
    rate = np.zeros(nf)
    frozen = ~active.copy()
    remaining = cap.astype(np.float64).copy()
    count = np.zeros(nl, dtype=np.int64)
    for f in range(nf):
        if not frozen[f]:
            for k in range(ptr[f], ptr[f + 1]):
                count[idx[k]] += 1
    left = 0
    for f in range(nf):
        if not frozen[f]:
            left += 1
    while left > 0:
        share = np.inf
        for l in range(nl):
            if count[l] > 0:
                s = remaining[l] / count[l]
                if s < share:
                    share = s
        if share == np.inf:  # flows crossing no link: unbounded (should not happen)
            for f in range(nf):
                if not frozen[f]:
                    rate[f] = np.inf
            break
        # raise all unfrozen flows by `share`
        for f in range(nf):
            if not frozen[f]:
                rate[f] += share
                for k in range(ptr[f], ptr[f + 1]):
                    remaining[idx[k]] -= share
        # freeze flows on saturated links
        tol = 1e-12
        for f in range(nf):
            if frozen[f]:
                continue
            sat = False
            for k in range(ptr[f], ptr[f + 1]):
                l = idx[k]
                if remaining[l] <= tol * cap[l]:
                    sat = True
                    break
            if sat:
                frozen[f] = True
                left -= 1
                for k in range(ptr[f], ptr[f + 1]):
                    count[idx[k]] -= 1
    return rate


def maxmin_rates(ptr, idx, cap, active=None) -> np.ndarray:
    """Max-min fair rate of every flow (bytes/s; inactive flows get 0)."""
    ptr = np.asarray(ptr, dtype=np.int64)
    idx = np.asarray(idx, dtype=np.int64)
    cap = np.asarray(cap, dtype=np.float64)
    if np.any(cap <= 0):
        raise ValueError("link capacities must be > 0")
    nf = len(ptr) - 1
    act = np.ones(nf, dtype=np.bool_) if active is None else np.asarray(active, dtype=np.bool_)
    return _maxmin(ptr, idx, cap, act)


@njit(cache=True)
def _completion(ptr, idx, cap, sizes):
    nf = len(ptr) - 1
    left = sizes.astype(np.float64).copy()
    active = left > 0
    done = np.zeros(nf)
    t = 0.0
    while active.any():
        rate = _maxmin(ptr, idx, cap, active)
        dt = np.inf
        for f in range(nf):
            if active[f] and rate[f] > 0:
                d = left[f] / rate[f]
                if d < dt:
                    dt = d
        t += dt
        for f in range(nf):
            if active[f]:
                left[f] -= rate[f] * dt
                if left[f] <= 1e-9 * sizes[f]:
                    active[f] = False
                    done[f] = t
    return done


def completion_times(ptr, idx, cap, sizes) -> np.ndarray:
    """Finish time of every flow when all start at t=0 (fluid max-min model)."""
    ptr = np.asarray(ptr, dtype=np.int64)
    idx = np.asarray(idx, dtype=np.int64)
    cap = np.asarray(cap, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.float64)
    if np.any(cap <= 0):
        raise ValueError("link capacities must be > 0")
    if len(sizes) != len(ptr) - 1:
        raise ValueError(f"{len(sizes)} sizes for {len(ptr) - 1} flows")
    return _completion(ptr, idx, cap, sizes)
