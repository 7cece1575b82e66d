"""Reference only: a ring all-reduce simulated step by step in simpy.

Every rank runs 2(p−1) steps; at step s it needs the chunk its predecessor
sent at step s−1, then spends α + (n/p)β sending (plus (n/p)γ reducing in
the p−1 reduce-scatter steps). This costs ≈ 4p(p−1) events — about 4 M at
p = 1024 — which is why the simulator itself never works per ring step; it
exists to check the closed form (and to measure that ratio in
``benchmarks/bench_sim.py``).
"""
from __future__ import annotations

import simpy


def ring_allreduce_steps(p: int, n: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Simulated seconds of one ring all-reduce of n bytes per rank over p ranks."""
    if p < 1:
        raise ValueError(f"p must be >= 1, got {p}")
    if p == 1:
        return 0.0
    env = simpy.Environment()
    chunk = n / p
    steps = 2 * (p - 1)
    arrived: dict[tuple[int, int], simpy.Event] = {}  # (step, sender) -> chunk arrived, created lazily

    def slot(key):
        ev = arrived.get(key)
        if ev is None:
            ev = arrived[key] = env.event()
        return ev

    def rank(i):
        for s in range(steps):
            if s > 0:
                yield slot((s - 1, (i - 1) % p))
                del arrived[(s - 1, (i - 1) % p)]
            dt = alpha + chunk * beta + (chunk * gamma if s < p - 1 else 0.0)
            yield env.timeout(dt)
            slot((s, i)).succeed()

    procs = [env.process(rank(i)) for i in range(p)]
    env.run(simpy.AllOf(env, procs))
    return float(env.now)
