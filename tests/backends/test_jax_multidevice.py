"""kfsim compressors across JAX devices (``backends.jax.collective``, ``transform``, ``data_parallel``).

On 4 host CPU devices, in a child process (the device count is fixed when JAX
initialises, and this process has JAX running already):

* ``kfsim_compress(comp, axis_name="dp")`` under ``shard_map`` gives every
  device the mean and per-worker state of the simulated 4-worker exchange
  (``compressors.exchange`` with the loopback, same gradients and keys), bit
  for bit, for SUM, GATHER, two-round, stateful and stochastic compressors;
  the same under ``pmap``;
* ``axis_name=None`` is one worker's ``compressors.roundtrip``;
* empty pytrees, scalar and empty leaves;
* ``optax.chain(kfsim_compress(...), optax.sgd(...))`` in
  ``data_parallel_step`` trains a tiny model with the simulated run's
  parameters after every step.

Checks that need no devices (a scheduled compressor is refused) run here.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import compressors as C
from backends.jax.transform import kfsim_compress
from tests.backends.jax_multidevice_checks import CHECKS, N

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 1500


@pytest.fixture(scope="module")
def results() -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={N}").strip()
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run([sys.executable, "-m", "tests.backends.jax_multidevice_checks"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        pytest.fail(f"multi-device checks exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CHECKS))
def test_multidevice(results, name):
    assert results.get(name) == "ok", results.get(name, f"check {name!r} did not run")


def test_scheduled_compressors_are_refused():
    with pytest.raises(ValueError, match="scheduled"):
        kfsim_compress("warmup(ef(topk(ratio=0.1)), steps=2)")


def test_spec_strings_and_compressor_values():
    """A spec is parsed when the transformation is made (a bad one fails there);
    a Compressor value passes through; the state starts at step 0."""
    import jax.numpy as jnp

    with pytest.raises(ValueError, match="unknown compressor"):
        kfsim_compress("nosuch()")
    grads = {"w": jnp.ones((4, 3)), "s": jnp.float32(2.0)}
    for comp in ("ef(topk(ratio=0.5))", C.parse("ef(topk(ratio=0.5))")):
        state = kfsim_compress(comp).init(grads)
        assert int(state.step) == 0
        assert set(state.compressor) == {"w", "s"} and type(state.compressor["w"]).__name__ == "EFState"
