"""Reference semantics of a compressed exchange among n workers, in process.

This is what a real communicator must compute, written without any
communication: SUM rounds add the workers' payloads (in rank order), GATHER
rounds stack them. The simulator's numerics and the tests use it directly;
the MindSpore reducer does the same with AllReduce/AllGather.
"""
from __future__ import annotations

from typing import Any, Sequence

from compressors.core import Compressor, Keys, Law
from compressors.ops import Ops


def combine(ops: Ops, law: Law, payloads: Sequence[Any]) -> Any:
    """What every worker receives for one leaf's payload in one round."""
    import jax.tree_util as jtu

    if law is Law.SUM:
        total = payloads[0]
        for p in payloads[1:]:
            total = jtu.tree_map(lambda a, b: a + b, total, p)
        return total
    if len(payloads) == 1:  # a leading axis of one: a view, not a copy
        return jtu.tree_map(lambda a: ops.reshape(a, (1,) + tuple(a.shape)), payloads[0])
    return jtu.tree_map(lambda *xs: ops.stack(xs), *payloads)


def exchange(ops: Ops, comp: Compressor, grads: Sequence[Any], states: Sequence[Any],
             keys: Sequence[Keys]) -> tuple[Any, list, list[int]]:
    """Run the whole protocol for n workers.

    Returns (mean estimate, as seen by worker 0 — every worker gets the same;
    the new states per worker; bits each worker sent per round).
    """
    n = len(grads)
    plans = comp.tree_plan(grads[0])
    states = list(states)
    received: list[list] = []
    own: list[list] = [[] for _ in range(n)]
    bits_per_round: list[int] = []
    for r in range(comp.n_rounds(grads[0])):
        sent = []
        for w in range(n):
            pay, states[w] = comp.encode(ops, grads[w], states[w], keys[w], received, r)
            sent.append(pay)
            own[w].append(pay)
        rec = []
        for i, plan in enumerate(plans):
            rec.append(combine(ops, plan[r].law, [s[i] for s in sent]) if r < len(plan) else None)
        received.append(rec)
        bits_per_round.append(sum(p[r].bits for p in plans if r < len(p)))
    outs = []
    for w in range(n):
        out, states[w] = comp.decode(ops, grads[w], states[w], own[w], received, n)
        outs.append(out)
    return outs[0], states, bits_per_round


def roundtrip(ops: Ops, comp: Compressor, grads: Any, state: Any, keys: Keys) -> tuple[Any, Any]:
    """Compress and decompress on a single worker (n = 1)."""
    out, states, _ = exchange(ops, comp, [grads], [state], [keys])
    return out, states[0]
