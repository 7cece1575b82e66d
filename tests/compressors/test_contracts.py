"""Contracts of the quantizers and sparsifiers (quantize, qsgd, terngrad,
natural, randomk, threshold, dgc): exact wire bits, dtypes, shapes, zeros,
non-finite input, parameter errors, unbiasedness. JAX backend."""
from __future__ import annotations

import math

import jax
import ml_dtypes
import numpy as np
import pytest

import compressors as C
from compressors import protocol
from tests.compressors.helpers import OPS
from tests.compressors.mc import assert_unbiased, draws, run, z_for

SPECS = [
    "quantize(bits=3, bucket=16)", "quantize(bits=16, bucket=0)", "qsgd(levels=300, bucket=5)",
    "terngrad(bucket=6)", "natural()", "randomk(ratio=0.3)", "randomk(ratio=0.05, scale=False)",
    "threshold(tau=0.5, capacity=0.2)", "dgc(ratio=0.1, sample=0.5)",
    "dgc(ratio=0.05, clip=1.0, sample=1.0, warmup_epochs=2, steps_per_epoch=1)",
]
SHAPES = {"empty": (0,), "empty2": (3, 0), "scalar": (), "one": (1,), "odd": (7,), "cube": (2, 3, 40)}
DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def tree(seed=0, dtypes=DTYPES, scale=1.0):
    """One pytree with every shape in every dtype (one compile per compressor)."""
    rng = np.random.default_rng(seed)
    return {f"{n}-{t}": OPS.asarray((rng.normal(size=s) * scale).astype(dt))
            for t, dt in dtypes.items() for n, s in SHAPES.items()}


def shape_bits(payload) -> int:
    return sum(math.prod(a.shape) * np.dtype(a.dtype).itemsize * 8 for a in jax.tree_util.tree_leaves(payload))


@pytest.mark.parametrize("spec", SPECS)
def test_plan_bits_equal_payload_bits_for_every_shape_and_dtype(spec):
    with jax.enable_x64(True):  # float64 included
        g = tree(dtypes={**DTYPES, "f64": np.float64})
        for step in (0, 1, 5):
            comp = C.parse(spec).step(step)
            payloads = jax.eval_shape(
                lambda g: protocol.run(OPS, comp, [g], [comp.init(OPS, g)], [C.make_keys(OPS, 0, 0)],
                                       record=True).log[0].sent[0], g)
            for (name, x), plan, pay in zip(sorted(g.items()), comp.tree_plan(g), payloads):
                if x.size == 0:  # compressors.core.EMPTY: no round, nothing on the wire
                    assert plan == () and pay is None and comp.wire_bits(x.shape, x.dtype) == 0, name
                    continue
                assert len(plan) == 1
                assert shape_bits(pay) == plan[0].bits, (name, plan, jax.tree_util.tree_map(np.shape, pay))
                assert comp.wire_bits(x.shape, x.dtype) == plan[0].bits


@pytest.mark.parametrize("spec", SPECS)
def test_output_keeps_shape_and_dtype_and_is_finite(spec):
    grads = [tree(seed=w) for w in range(2)]
    out, _, _ = run(spec, grads, steps=3)
    for k, x in grads[0].items():
        assert out[k].shape == x.shape and out[k].dtype == x.dtype, k
        assert np.all(np.isfinite(np.asarray(out[k], np.float64))), k


@pytest.mark.parametrize("spec", SPECS)
def test_float64_is_kept(spec):
    with jax.enable_x64(True):
        grads = [tree(seed=w, dtypes={"f64": np.float64}) for w in range(2)]
        out, _, _ = run(spec, grads, steps=2)
        for k, x in grads[0].items():
            assert out[k].dtype == np.float64 and out[k].shape == x.shape, k
            assert np.all(np.isfinite(np.asarray(out[k]))), k


@pytest.mark.parametrize("spec", SPECS)
def test_zero_gradients_decode_to_exact_zeros(spec):
    grads = [tree(seed=w, scale=0.0) for w in range(2)]
    out, _, _ = run(spec, grads, steps=3)
    for k in out:
        assert np.all(np.asarray(out[k], np.float64) == 0.0), k


@pytest.mark.parametrize("spec", SPECS)
def test_a_nonfinite_entry_never_decodes_to_an_all_finite_tensor(spec):
    for bad in (np.nan, np.inf, -np.inf):
        grads = [tree(seed=w) for w in range(2)]
        for t in DTYPES:
            m = np.asarray(grads[1][f"cube-{t}"]).copy()
            m[1, 2, 17] = bad
            grads[1][f"cube-{t}"] = OPS.asarray(m)
        out, _, _ = run(spec, grads, steps=1)
        for k in out:
            finite = np.all(np.isfinite(np.asarray(out[k], np.float64)))
            assert finite == (not k.startswith("cube")), (k, bad)


@pytest.mark.parametrize("bad", [
    "quantize(bits=0)", "quantize(bits=17)", "quantize(bits=2.5)", "quantize(bits=True)",
    "quantize(bucket=-1)", "quantize(bucket=1.5)", "int8(bucket=-2)", "int4(bits=4)",
    "qsgd(levels=0)", "qsgd(levels=-3)", "qsgd(levels=16777216)", "qsgd(bucket=-1)",
    "qsgd(levels=1.5)", "terngrad(bucket=-1)", "terngrad(bucket='x')", "natural(1)",
    "randomk(ratio=0)", "randomk(ratio=1.01)", "randomk(ratio=-0.5)", "randomk(scale=1)", "randomk(ratio='a')",
    "threshold(tau=0)", "threshold(tau=-1)", "threshold(tau=float)", "threshold(capacity=0)",
    "threshold(capacity=2)", "dgc(ratio=0)", "dgc(ratio=1.5)", "dgc(momentum=1.0)", "dgc(momentum=-0.1)",
    "dgc(clip=-1)", "dgc(sample=0)", "dgc(sample=1.1)", "dgc(warmup_epochs=-1)", "dgc(warmup_epochs=1.5)",
    "dgc(steps_per_epoch=-5)", "dgc(steps_per_epoch=2.0)",
])
def test_bad_parameters_raise_value_error(bad):
    with pytest.raises(ValueError):
        C.parse(bad)


@pytest.mark.parametrize("spec", SPECS)
def test_spec_round_trips_and_flags(spec):
    comp = C.parse(spec)
    assert C.parse(comp.spec).spec == comp.spec and comp.doc
    expected_unbiased = not spec.startswith(("threshold", "dgc")) and "scale=False" not in spec
    assert comp.unbiased == expected_unbiased


# ---------------------------------------------------------------- unbiasedness
# Per-entry variance (or an upper bound on it) of each unbiased compressor of x.

def _buckets(x, bucket):
    b = bucket or x.size
    nb = -(-x.size // b)
    padded = np.concatenate([x, np.full(nb * b - x.size, x[-1])])
    return padded.reshape(nb, b), b


def _per_entry(values, b, d):
    return np.repeat(values, b)[:d]


def var_quantize(x, bits, bucket):
    rows, b = _buckets(x, bucket)
    step = (rows.max(1) - rows.min(1)) / (2**bits - 1)
    return _per_entry(step**2 / 4, b, x.size)  # Bernoulli on a grid of step Δ: Δ² f(1-f) <= Δ²/4


def var_qsgd(x, levels, bucket):
    b = bucket or x.size
    norms = np.array([np.linalg.norm(x[i:i + b]) for i in range(0, x.size, b)])
    return _per_entry((norms / levels) ** 2 / 4, b, x.size)  # grid step ||v||/s


def var_terngrad(x, bucket):
    rows, b = _buckets(x, bucket)
    s = _per_entry(np.abs(rows).max(1), b, x.size)
    return s * np.abs(x) - x**2  # Bernoulli(|x|/s) times s


def var_natural(x):
    a = np.abs(x)
    lo = np.ldexp(1.0, np.frexp(a)[1] - 1)
    return np.where(a > 0, (a - lo) * (2 * lo - a), 0.0)  # two-point distribution on {lo, 2 lo}


def var_randomk(x, ratio):
    d = x.size
    k = min(d, max(1, int(np.ceil(ratio * d))))
    return x**2 * (d / k - 1)


UNBIASED = [
    ("quantize(bits=3, bucket=50)", lambda x: var_quantize(x, 3, 50)),
    ("quantize(bits=8, bucket=0)", lambda x: var_quantize(x, 8, 0)),
    ("int4(bucket=7)", lambda x: var_quantize(x, 4, 7)),
    ("qsgd(levels=4, bucket=0)", lambda x: var_qsgd(x, 4, 0)),
    ("qsgd(levels=127, bucket=64)", lambda x: var_qsgd(x, 127, 64)),
    ("terngrad()", lambda x: var_terngrad(x, 0)),
    ("terngrad(bucket=9)", lambda x: var_terngrad(x, 9)),
    ("natural()", var_natural),
    ("randomk(ratio=0.2)", lambda x: var_randomk(x, 0.2)),
]


@pytest.mark.parametrize("spec,var", UNBIASED, ids=[s for s, _ in UNBIASED])
def test_unbiased_mean_converges_within_the_variance_bound(spec, var):
    """Average K = 4000 independent compressions; each entry's error must be
    within z·sqrt(Var/K), z chosen so all 203 entries pass with probability
    1 - 1e-6 (Bonferroni) if the compressor is unbiased."""
    x = np.random.default_rng(3).normal(size=203).astype(np.float32)
    x[:3] = [0.0, 1e-3, -5.0]
    samples = draws(spec, x, 4000)
    assert_unbiased(samples, x.astype(np.float64), var(x.astype(np.float64)), z=z_for(x.size))


def test_the_unbiasedness_check_catches_a_biased_compressor():
    x = np.random.default_rng(3).normal(size=203).astype(np.float32)
    samples = draws("threshold(tau=0.5, capacity=1.0)", x, 50)
    with pytest.raises(AssertionError):
        assert_unbiased(samples, x.astype(np.float64), var_randomk(x.astype(np.float64), 0.5), z=z_for(x.size))
