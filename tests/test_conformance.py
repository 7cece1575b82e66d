"""Cross-backend conformance: every example spec runs on every backend exactly
as on JAX (the reference binding).

For each spec in ``tests/specs.py:EXAMPLE_SPECS``, each backend in
``OPS_BACKENDS`` other than JAX and each dtype (float32, float16, bf16,
float64 with ``jax_enable_x64``), two workers run several steps of the full
protocol (the runner ``compressors.protocol.run``, recorded round by round) on a
pytree with a matrix, a 3-D tensor, a vector and a scalar, with the same
gradients and the same seeds (keys come from each backend's own ``ops.key``/
``fold_in``, which must agree). Compared after every step:

* every payload of every round and worker, and what every worker received;
* the decoded mean gradient;
* every worker's state (EF residuals, momentum, PowerSGD's Q, ...).

All must be bit-identical (same dtype, shape, bits; NaN == NaN), including
which of several tied values top-k keeps: the ops contract fixes tie order
(lowest index first), so tie sets need no special casing. Specs that multiply
matrices (PowerSGD) are compared with a tolerance instead: rtol 1e-5, widened
to two units in the last place of float16/bf16, since BLAS accumulation order
is not part of the contract. A spec that rejects a dtype must reject it
(``ValueError``) on every backend.
"""
from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest

import compressors as C
from compressors import protocol
from tests.backends.ops_backends import (OPS_BACKENDS, assert_same_bits, get_ops, is_float, maybe_x64,
                                         to_numpy)
from tests.specs import EXAMPLE_SPECS

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float64)]
OTHERS = [b for b in OPS_BACKENDS if b != "jax"]
WORKERS = 2
STEPS = 3
MATMUL_SPECS = ("powersgd",)


def gradients(step: int, worker: int, dtype) -> dict:
    """Gradients of one worker at one step; a few exact ties in the matrix."""
    rng = np.random.default_rng(1000 * step + worker)
    tree = {
        "w": rng.standard_normal((16, 12)),
        "k": rng.standard_normal((4, 3, 5)) * 0.1,
        "b": rng.standard_normal(12) * 3,
        "s": np.asarray(rng.standard_normal()),
    }
    tree["w"][0, :5] = 2.5  # ties among the largest magnitudes
    tree["w"][1, :3] = -2.5
    return {k: np.asarray(v).astype(dtype) for k, v in tree.items()}


def run_recorded(ops, spec: str, dtype, seed: int = 7) -> list[dict]:
    """The exchange protocol for WORKERS workers, STEPS steps, recording
    payloads, received values, the mean and the states of every step."""
    comp = C.parse(spec)
    put = lambda tree: jax.tree_util.tree_map(lambda a: ops.asarray(a), tree)
    grads0 = [put(gradients(0, w, dtype)) for w in range(WORKERS)]
    states = [comp.init(ops, g) for g in grads0]
    log = []
    for step in range(STEPS):
        active = comp.step(step)
        grads = [put(gradients(step, w, dtype)) for w in range(WORKERS)]
        keys = [C.make_keys(ops, seed, step, w) for w in range(WORKERS)]
        res = protocol.run(ops, active, grads, states, keys, record=True)
        states = list(res.states)
        means = [res.mean]
        log.append({"keys": keys, "sent": [r.sent for r in res.log], "received": [r.received for r in res.log],
                    "mean": means, "state": list(states)})
    return log


def compare(got, want, where: str, tolerance: float | None) -> None:
    g_leaves, g_def = jax.tree_util.tree_flatten(got)
    w_leaves, w_def = jax.tree_util.tree_flatten(want)
    assert g_def == w_def, f"{where}: structure {g_def} != {w_def}"
    for i, (g, w) in enumerate(zip(g_leaves, w_leaves)):
        g, w = to_numpy(g), to_numpy(w)
        what = f"{where} leaf {i}"
        if tolerance is None or not is_float(w.dtype):
            assert_same_bits(g, w, what)
            continue
        assert g.dtype == w.dtype and g.shape == w.shape, f"{what}: {g.dtype}{g.shape} != {w.dtype}{w.shape}"
        ulp = float(ml_dtypes.finfo(w.dtype).eps) * 2
        rtol = max(tolerance, ulp)
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        scale = float(np.max(np.abs(w64))) if w64.size else 0.0
        np.testing.assert_allclose(g64, w64, rtol=rtol, atol=rtol * scale + 1e-30, err_msg=what)


@pytest.mark.parametrize("backend", OTHERS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_backend_matches_jax(spec, dtype, backend):
    jops, ops = get_ops("jax"), get_ops(backend)
    tolerance = 1e-5 if any(name in spec for name in MATMUL_SPECS) else None
    with maybe_x64(dtype):
        try:
            want = run_recorded(jops, spec, dtype)
        except ValueError:
            with pytest.raises(ValueError):
                run_recorded(ops, spec, dtype)
            return  # the spec rejects this dtype, and does so on every backend
        got = run_recorded(ops, spec, dtype)
    assert len(got) == len(want)
    for step, (g, w) in enumerate(zip(got, want)):
        compare(g["keys"], w["keys"], f"step {step} keys", None)
        for r, (gs, ws) in enumerate(zip(g["sent"], w["sent"])):
            for worker, (gp, wp) in enumerate(zip(gs, ws)):
                compare(gp, wp, f"step {step} round {r} worker {worker} payload", tolerance)
        compare(g["received"], w["received"], f"step {step} received", tolerance)
        compare(g["mean"][0], w["mean"][0], f"step {step} mean", tolerance)
        for worker in range(WORKERS):
            compare(g["state"][worker], w["state"][worker], f"step {step} worker {worker} state", tolerance)


def test_every_example_spec_is_covered():
    """The suite runs what tests/specs.py lists; that list must parse."""
    for spec in EXAMPLE_SPECS:
        C.parse(spec)
    assert OTHERS, "no backend besides jax to check"
