"""Shared fixtures-as-functions for compressor tests (JAX backend)."""
from __future__ import annotations

import jax
import numpy as np

import backends
import compressors as C
from compressors import protocol

OPS = backends.get("jax")


def gradient_tree(seed: int = 0, dtype=np.float32, scale: float = 1.0) -> dict:
    """A pytree with a matrix, a vector, a scalar and an empty tensor."""
    rng = np.random.default_rng(seed)
    shapes = {"w": (12, 10), "b": (10,), "s": (), "e": (0,)}
    return {k: OPS.asarray((rng.normal(size=s) * scale).astype(dtype)) for k, s in shapes.items()}


def run(spec: str | C.Compressor, grads_per_worker: list, steps: int = 1, seed: int = 0):
    """Run ``steps`` exchanges; returns (last mean estimate, states, bits)."""
    comp = C.parse(spec)
    states = [comp.init(OPS, g) for g in grads_per_worker]
    out = bits = None
    for step in range(steps):
        active = comp.step(step)
        keys = [C.make_keys(OPS, seed, step, r) for r in range(len(grads_per_worker))]
        out, states, bits = C.exchange(OPS, active, grads_per_worker, states, keys)
    return out, states, bits


def payload_bits(payload) -> int:
    return sum(int(np.asarray(a).nbytes) * 8 for a in jax.tree_util.tree_leaves(payload))


def check_plan_bits(spec: str, shapes: dict) -> None:
    """On one worker, every round of every leaf sends exactly the plan's bits, and the
    mean keeps each leaf's shape and dtype — for float32, float16, bfloat16 and float64."""
    import ml_dtypes

    with jax.enable_x64(True):
        for dt in (np.float32, np.float16, ml_dtypes.bfloat16, np.float64):
            rng = np.random.default_rng(0)
            g = {n: OPS.asarray(rng.normal(size=s).astype(dt)) for n, s in shapes.items()}
            comp = C.parse(spec)
            res = protocol.run(OPS, comp, [g], [comp.init(OPS, g)], [C.make_keys(OPS, 0, 0)], record=True)
            for i, ((name, x), plan) in enumerate(zip(sorted(g.items()), comp.tree_plan(g))):
                sent = [payload_bits(log.sent[0][i]) for log in res.log[:len(plan)]]
                assert sent == [r.bits for r in plan], (name, dt)
                assert res.mean[name].shape == x.shape and res.mean[name].dtype == x.dtype


def leaf_state(state, grads, name: str):
    """The per-leaf state of the gradient leaf at path ``name`` (``"x"``, ``"w"``)
    in a whole-tree state, whether that mirrors the gradient pytree or is a
    flat tuple in the gradients' flattening order."""
    from compressors.state import path_name

    paths, treedef = jax.tree_util.tree_flatten_with_path(grads)
    i = [path_name(p) for p, _ in paths].index(name)
    try:
        per_leaf = treedef.flatten_up_to(state)
    except (ValueError, TypeError):
        per_leaf = list(state)
    return per_leaf[i]
