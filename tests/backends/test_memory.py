"""backends.memory: with the glibc thresholds a large XLA:CPU result reuses
freed heap instead of faulting in fresh pages on every call; without them
(``KFSIM_KEEP_FREED_MEMORY=0``) it does not, which is what the check measures."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
N = 25_000_000  # a 100 MB float32 result: above a secondary arena's 64 MiB heap

PROBE = f"""
import json, resource, statistics
import backends, backends.memory as memory
import jax, jax.numpy as jnp
f = jax.jit(lambda x: x * 2.0 + 1.0)
x = jnp.ones({N}, jnp.float32)
for _ in range(15):  # freed results return to the heap a few calls late: reach the steady state
    jax.block_until_ready(f(x))
faults = []
for _ in range(7):
    r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    jax.block_until_ready(f(x))
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)
print(json.dumps({{"applied": memory.applied, "median": statistics.median(faults)}}))
"""


def probe(keep: str) -> dict:
    env = dict(os.environ, KFSIM_KEEP_FREED_MEMORY=keep, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_large_results_reuse_freed_memory():
    pages = N * 4 // os.sysconf("SC_PAGE_SIZE")
    kept, plain = probe("1"), probe("0")
    assert kept["applied"] is True and plain["applied"] is False
    assert plain["median"] > 0.75 * pages, plain  # the allocator as it was: a fresh mapping per call
    assert kept["median"] < 0.25 * pages, kept
