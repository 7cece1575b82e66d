"""Importing kfsim (or the JAX binding) before JAX runs anything sets XLA:CPU's region-based copy
insertion, so error feedback around top-k updates its residuals in place: the compiled vmapped
step of 8 simulated workers holds no copy of a whole residual. A caller's own setting wins."""
from __future__ import annotations

import os
import subprocess
import sys

PROBE = r"""
import kfsim, jax, jax.numpy as jnp, os
import backends, compressors
ops = backends.get("jax")
comp = compressors.parse("ef(topk(ratio=0.01))")
W, shape = 8, (300, 200)
from compressors import protocol
def run(states, grads):
    keys = jax.vmap(lambda r: compressors.make_keys(ops, 0, 0, 0))(jnp.arange(W))
    res = protocol.run(ops, comp, {"w": grads}, states, keys, workers=protocol.VMAP)
    return res.states, res.mean
g = jnp.ones((W,) + shape)
st = jax.vmap(lambda x: comp.init(ops, {"w": x}))(g)
txt = jax.jit(run, donate_argnums=(0,)).lower(st, g).compile().as_text()
big = [l for l in txt.splitlines() if " copy(" in l and f"[{W},{shape[0]},{shape[1]}]" in l]
print(os.environ.get("XLA_FLAGS", ""), "|", len(big))
"""


def probe(env_flags=None):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if env_flags is not None:
        env["XLA_FLAGS"] = env_flags
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    flags, copies = out.stdout.strip().splitlines()[-1].split("|")
    return flags.strip(), int(copies)


def test_importing_kfsim_keeps_the_residual_update_in_place():
    flags, copies = probe()
    assert "--xla_cpu_copy_insertion_use_region_analysis=true" in flags
    assert copies == 0


def test_a_callers_own_setting_wins_and_then_the_residual_is_copied():
    flags, copies = probe("--xla_cpu_copy_insertion_use_region_analysis=false")
    assert flags == "--xla_cpu_copy_insertion_use_region_analysis=false"
    assert copies >= 1  # the check can fail: the default analysis copies the residual
