"""Subprocess worker of ``test_lowered_edges``: lower specs on edge inputs, compare with JAX.

``python -m tests.mindspore.edge_worker OUT.jsonl SPEC [SPEC ...]`` lowers
each spec to one compiled LoopbackExchange graph (two workers) over
``LEAVES`` — every edge kind of ``tests/edges.py`` in float32 plus length-1
leaves in float16, bf16 and float64 (and a float64 scalar and empty tensor) — with JAX's x64 flag
*off* (the lowering must not depend on it), runs two steps and compares the
mean and every state with ``compressors.exchange`` on the JAX binding (x64
on: its float64 arrays need it). One JSON line per spec: ``{"spec", "event":
"start"}`` before, ``{"spec", "problems": [...]}`` after, so a crash (a
SIGFPE in a kernel) is pinned on the spec that caused it.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

from tests import edges

F32, F16, F64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)
LEAVES = [(kind, F32) for kind in edges.KINDS] + [("one", d) for d in (F16, edges.BF16, F64)] + \
    [("scalar", F64), ("empty", F64)]
SEED, N, STEPS = 3, 2, 2


def leaves(step: int, worker: int) -> list:
    per = {d: edges.gradients(step, worker, d) for d in {d for _, d in LEAVES}}
    return [per[d][kind] for kind, d in LEAVES]


def compare(spec: str) -> list[str]:
    import jax
    import jax.numpy as jnp
    import jax.tree_util as jtu

    import compressors
    from backends import get
    from backends.mindspore.lower import LoopbackExchange

    J = get("jax")
    comp = compressors.parse(spec)
    tol = 1e-5 if spec.startswith("powersgd") else 0.0
    avals = [(edges.KINDS[kind], d) for kind, d in LEAVES]
    lowered = {}

    def at(step):
        if comp.phase_of(step) not in lowered:
            lowered[comp.phase_of(step)] = LoopbackExchange(comp.step(step), avals, n=N, seed=SEED)
        return lowered[comp.phase_of(step)]

    problems = []
    ms_states = at(0).init([leaves(0, w) for w in range(N)])
    with jax.enable_x64(True):
        j_states = [comp.init(J, tuple(jnp.asarray(x) for x in leaves(0, w))) for w in range(N)]
    for step in range(STEPS):
        per = [leaves(step + 1, w) for w in range(N)]
        mean, ms_states = at(step)(per, ms_states, step)
        with jax.enable_x64(True):
            jm, j_states, _ = compressors.exchange(J, comp.step(step), [tuple(jnp.asarray(x) for x in g) for g in per],
                                                   j_states, [compressors.make_keys(J, SEED, step, w) for w in range(N)])
            want = [np.asarray(x) for x in jm] + [np.asarray(x) for s in j_states for x in jtu.tree_leaves(s)]
        got = list(mean) + [x for s in ms_states for x in s]
        if len(got) != len(want):
            return [f"step {step}: {len(got)} outputs vs {len(want)}"]
        for i, (a, b) in enumerate(zip(got, want)):
            what = f"step {step} output {i} ({'mean ' + '/'.join(map(str, LEAVES[i])) if i < len(LEAVES) else 'state'})"
            if a.shape != b.shape or a.dtype != b.dtype:
                problems.append(f"{what}: {a.dtype}{a.shape} vs jax {b.dtype}{b.shape}")
                continue
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            if tol:
                ok = np.allclose(a64, b64, rtol=tol, atol=tol * float(np.max(np.abs(b64), initial=0.0)) + 1e-30,
                                 equal_nan=True)
            else:
                ok = np.array_equal(a64, b64, equal_nan=True)
            if not ok:
                problems.append(f"{what}: differs from jax, max |diff| "
                                f"{np.nanmax(np.abs(a64 - b64), initial=0.0):.3g}")
    return problems


def main(out: str, specs: list[str]) -> None:
    os.environ.setdefault("GLOG_v", "3")
    import jax
    jax.config.update("jax_enable_x64", False)
    from backends.mindspore.runtime import setup
    setup("CPU")
    import mindspore as ms
    ms.set_context(mode=ms.GRAPH_MODE)
    with open(out, "a") as f:
        for spec in specs:
            f.write(json.dumps({"spec": spec, "event": "start"}) + "\n")
            f.flush()
            try:
                problems = compare(spec)
            except Exception as exc:  # reported to the test, which fails on it
                problems = [f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"]
            f.write(json.dumps({"spec": spec, "problems": problems}) + "\n")
            f.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
