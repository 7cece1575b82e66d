"""Reference semantics of a compressed exchange among n workers, in process.

What a real communicator must compute, written without communication: SUM
rounds add the workers' payloads in rank order, GATHER rounds stack them.
Both functions are the runner (:func:`compressors.protocol.run`) with the
in-process loopback; the simulator's numerics and the tests use them.
"""
from __future__ import annotations

from typing import Any, Sequence

from compressors.core import Compressor, Keys
from compressors.ops import Ops
from compressors.protocol import run


def exchange(ops: Ops, comp: Compressor, grads: Sequence[Any], states: Sequence[Any],
             keys: Sequence[Keys]) -> tuple[Any, list, list[int]]:
    """Run the whole protocol for n = len(grads) workers.

    Returns (mean estimate, as seen by worker 0 — every worker gets the same;
    the new states per worker; bits each worker sent per round).
    """
    res = run(ops, comp, list(grads), list(states), list(keys))
    return res.mean, res.states, res.plan.bits_per_round()


def roundtrip(ops: Ops, comp: Compressor, grads: Any, state: Any, keys: Keys) -> tuple[Any, Any]:
    """Compress and decompress on a single worker (n = 1)."""
    res = run(ops, comp, [grads], [state], [keys])
    return res.mean, res.states[0]
