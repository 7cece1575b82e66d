"""The edge-input conformance matrix: compressor × input kind × backend.

For every example spec (``tests/specs.py``) in float32 and one other dtype in
turn (``edges.matrix``; ``KFSIM_EDGE_FULL=1``: every dtype), two workers run two
steps of the runner (``compressors.protocol.run``) on every backend with one
pytree holding every input kind of ``tests/edges.py`` (empty, empty 2-D,
scalar, length-1, ordinary, near-overflow). Asserted:

* every backend agrees with JAX after every step — mean and every worker's
  state, bit for bit (PowerSGD, which multiplies matrices: rtol 1e-5, as in
  ``tests/test_conformance.py``); a spec that rejects a dtype rejects it on
  every backend;
* empty tensors: no rounds, no wire bits, no state, and an empty mean of the
  tensor's shape and dtype (``compressors.core.EMPTY``);
* every other kind decodes to its shape and dtype, finite — ``huge`` included,
  except where the wire format saturates by design (fp16 casts,
  ``edges.SATURATING_WIRE``), where it is ±inf/NaN (fp16()) or clipped to
  ±65504 (lptopk), as documented;
* positively homogeneous compressors give, on ``huge`` = 2^E · ``down``,
  exactly 2^E times their result on ``down`` (NumPy): an overflow inside a
  codec cannot pass as a finite, wrong value.

float64 runs with ``jax_enable_x64`` (the JAX binding's own arrays need it);
the MindSpore lowering does not (``tests/mindspore/test_lowered_edges.py``).
"""
from __future__ import annotations

import jax.tree_util as jtu
import ml_dtypes
import numpy as np
import pytest

import compressors as C
from compressors import protocol
from tests import edges
from tests.backends.ops_backends import OPS_BACKENDS, assert_same_bits, get_ops, is_float, maybe_x64, to_numpy
from tests.specs import EXAMPLE_SPECS

WORKERS, STEPS, SEED = 2, 2, 5
MATMUL = ("powersgd",)
# Not positively homogeneous: a sign vote is scale-invariant (compared equal
# instead); threshold's tau is an absolute magnitude.
INVARIANT = ("signsgd", "signum")
NOT_HOMOGENEOUS = ("threshold",)


def run(ops, spec: str, dtype, scaled: bool = True) -> list:
    """Per step: (mean, states) as NumPy pytrees."""
    comp = C.parse(spec)
    put = lambda tree: jtu.tree_map(ops.asarray, tree)
    states = [comp.init(ops, put(edges.gradients(0, w, dtype, scaled))) for w in range(WORKERS)]
    out = []
    for step in range(STEPS):
        grads = [put(edges.gradients(step + 1, w, dtype, scaled)) for w in range(WORKERS)]
        keys = [C.make_keys(ops, SEED, step, w) for w in range(WORKERS)]
        res = protocol.run(ops, comp.step(step), grads, states, keys)
        states = list(res.states)
        out.append(jtu.tree_map(to_numpy, (res.mean, states)))
    return out


def run_all(spec: str, dtype) -> dict:
    """{backend: run(...)}, or {backend: ValueError} where the spec rejects the dtype."""
    got = {}
    with maybe_x64(dtype):
        for name in OPS_BACKENDS:
            try:
                got[name] = run(get_ops(name), spec, dtype)
            except ValueError as exc:
                got[name] = exc
    return got


def close(got, want, what: str, tol: float) -> None:
    g_leaves, g_def = jtu.tree_flatten(got)
    w_leaves, w_def = jtu.tree_flatten(want)
    assert g_def == w_def, f"{what}: structure {g_def} != {w_def}"
    for i, (g, w) in enumerate(zip(g_leaves, w_leaves)):
        if not tol or not is_float(w.dtype):
            assert_same_bits(g, w, f"{what} leaf {i}")
            continue
        assert g.dtype == w.dtype and g.shape == w.shape, f"{what} leaf {i}: {g.dtype}{g.shape} != {w.dtype}{w.shape}"
        rtol = max(tol, 2 * float(ml_dtypes.finfo(w.dtype).eps))
        w64 = w.astype(np.float64)
        scale = float(np.max(np.abs(w64), initial=0.0))
        np.testing.assert_allclose(g.astype(np.float64), w64, rtol=rtol, atol=rtol * scale + 1e-30, err_msg=what)


MATRIX = edges.matrix(EXAMPLE_SPECS)


@pytest.mark.parametrize("spec, dtype", MATRIX, ids=[f"{s}-{d.name}" for s, d in MATRIX])
def test_edge_matrix(spec, dtype):
    results = run_all(spec, dtype)
    ref = results["jax"]
    if isinstance(ref, ValueError):
        bad = [b for b, r in results.items() if not isinstance(r, ValueError)]
        assert not bad, f"{spec} rejects {dtype.name} on jax ({ref}) but not on {bad}"
        return
    tol = 1e-5 if spec.startswith(MATMUL) else 0.0
    for name, got in results.items():
        assert not isinstance(got, ValueError), f"{name} rejects what jax runs: {got}"
        for step, (g, w) in enumerate(zip(got, ref)):
            close(g, w, f"{spec} {dtype.name} {name} vs jax, step {step}", tol)

    comp = C.parse(spec)
    for step, (mean, states) in enumerate(ref):
        for kind, shape in edges.KINDS.items():
            m = mean[kind]
            where = f"{spec} {dtype.name} step {step} {kind}"
            assert m.shape == shape and m.dtype == dtype, f"{where}: mean {m.dtype}{m.shape}"
            if kind in edges.EMPTY_KINDS:
                assert comp.step(step).plan(shape, dtype) == (), where
                assert all(s[kind] == () for s in states), f"{where}: state {states[0][kind]!r}"
                continue
            m64 = m.astype(np.float64)
            if kind == "huge" and edges.saturates(spec, dtype):
                # fp16() sends ±inf (NaN where workers' signs differ); lptopk clips to ±65504: either way,
                # nothing beyond what an fp16 wire carries
                fits = ~np.isfinite(m64) | (np.abs(m64) <= 2.0**16)  # 65504, rounded to bf16: 65536
                assert fits.all(), f"{where}: finite values beyond the fp16 wire's range"
                continue
            assert np.isfinite(m64).all(), f"{where}: non-finite mean {m}"
            for leaf in jtu.tree_leaves([s[kind] for s in states]):
                if is_float(leaf.dtype):
                    assert np.isfinite(leaf.astype(np.float64)).all(), f"{where}: non-finite state"


HOMOGENEOUS = [(s, d) for s, d in MATRIX if not s.startswith(NOT_HOMOGENEOUS) and not edges.saturates(s, d)]


@pytest.mark.parametrize("spec, dtype", HOMOGENEOUS, ids=[f"{s}-{d.name}" for s, d in HOMOGENEOUS])
def test_huge_is_scaled_down(spec, dtype):
    """C(2^E x) = 2^E C(x) on the near-overflow leaf (sign votes: = C(x));
    saturating wires (checked for ±inf in test_edge_matrix) are left out."""
    ops = get_ops("numpy")
    try:
        big, down = run(ops, spec, dtype), run(ops, spec, dtype, scaled=False)
    except ValueError:
        return  # rejects the dtype (test_edge_matrix checks every backend agrees)
    factor = 1.0 if spec.startswith(INVARIANT) else 2.0 ** edges.huge_exp(dtype)
    for step, ((mb, _), (md, _)) in enumerate(zip(big, down)):
        want = (md["huge"].astype(np.float64) * factor).astype(dtype)
        what = f"{spec} {dtype.name} step {step}: huge vs 2^E · down"
        if spec.startswith(MATMUL):
            np.testing.assert_allclose(mb["huge"].astype(np.float64), want.astype(np.float64), rtol=1e-3,
                                       atol=1e-3 * factor, err_msg=what)
        else:
            assert_same_bits(mb["huge"], want, what)


NEAR_MAX = 1.5e38  # float32, the magnitude of issue reports: beyond every sum of two


@pytest.mark.parametrize("backend", OPS_BACKENDS)
def test_near_max_float32_is_finite_or_saturates_as_documented(backend):
    """Entries of 1.5e38 (float32), one worker: the scaled signs stay finite
    (means of pre-scaled entries); a QSGD norm beyond the range decodes to
    NaN and random-k's d/k · x to ±inf, as their docstrings say."""
    ops = get_ops(backend)
    rng = np.random.default_rng(0)
    x = (np.where(rng.random(1000) < 0.5, -1.0, 1.0) * NEAR_MAX * rng.uniform(0.5, 1, 1000)).astype(np.float32)

    def roundtrip(spec):
        comp = C.parse(spec)
        grads = {"x": ops.asarray(x)}
        out, _ = C.roundtrip(ops, comp, grads, comp.init(ops, grads), C.make_keys(ops, 0, 0))
        return to_numpy(out["x"]).astype(np.float64)

    mean_abs = np.mean(np.abs(x.astype(np.float64)))
    for spec in ("scaledsign()", "efsignsgd()"):
        y = roundtrip(spec)
        np.testing.assert_allclose(np.abs(y), mean_abs, rtol=1e-6, err_msg=spec)
        assert np.array_equal(np.sign(y), np.sign(x)), spec
    y = roundtrip("onebit()")
    pos = x >= 0
    np.testing.assert_allclose(y[pos], np.mean(x[pos].astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(y[~pos], np.mean(x[~pos].astype(np.float64)), rtol=1e-6)
    assert np.isnan(roundtrip("qsgd(levels=4, bucket=0)")).all()  # ||x|| ~ 3.6e39: not representable
    assert np.isfinite(roundtrip("qsgd(levels=4, bucket=4)")).all()  # 2 · 1.5e38 fits
    y = roundtrip("randomk(ratio=0.2)")
    assert not np.isnan(y).any() and np.array_equal(np.isinf(y), y != 0), "random-k: ±inf on S, 0 elsewhere"
