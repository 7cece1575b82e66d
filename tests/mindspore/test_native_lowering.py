"""Graphs lowered for GPU/Ascend (native ops only, ``backends.mindspore.native``) run here on CPU
and agree bit for bit with the CPU graphs' host kernels, with the NumPy threefry and with JAX.

Edges: 0, -0, ±inf, NaN, 1, ±max, the smallest normal, 1e±38 (1e-38 is subnormal in float32),
scalar arrays; exponents from -2^31 to 2^31-1. Not compared: subnormal inputs (MindSpore's CPU
kernels read them as zero, so neither lowering can see them here) and the sign and payload of a
NaN given to a bit cast (native gives the positive quiet NaN). Zero-size arrays never reach these
ops (``check_lowerable`` refuses them). See docs/devices.md.
"""
from __future__ import annotations

import jax
import numpy as np
import pytest

from backends import get
from backends.mindspore import runtime as rt
from backends.mindspore.emit import program_cell
from backends.mindspore.lower import LoopbackExchange, to_ms, to_np
from backends.mindspore.trace import Program, TracingOps
from tests.mindspore.test_lowered_conformance import run_both

J = get("jax")
INT = {np.float32: np.int32, np.float64: np.int64}
UINT = {np.float32: np.uint32, np.float64: np.uint64}


def edge_values(dt):
    fi = np.finfo(dt)
    v = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.75, 1.5, 3.0, 2.0 ** 100, fi.tiny, -fi.tiny, fi.max,
         -fi.max, 1e38, -1e38, 1e-38, -1e-38, float(fi.tiny) * (1 + fi.eps), fi.smallest_subnormal]
    rng = np.random.default_rng(0)
    lim = 80 if dt == np.float32 else 700
    r = rng.standard_normal(120) * np.exp(rng.uniform(-lim, lim, 120))
    with np.errstate(over="ignore"):
        return np.concatenate([np.array(v, np.float64), r]).astype(dt)


def compiled(build, inputs, device):
    """``build``'s program lowered for ``device``: a function of NumPy inputs like ``inputs``."""
    prog = Program("native edges")
    ops = TracingOps(prog)
    outs = build(ops, *[prog.input(x.shape, x.dtype) for x in inputs])
    cell = program_cell(prog, list(outs), "native edges", device=device)
    customs = [o for o in vars(cell).get("_primitives", {}).values() if type(o).__name__ == "Custom"]
    assert bool(customs) == (device == "CPU"), (device, customs)  # host kernels on CPU only
    return lambda *xs: [np.atleast_1d(to_np(o)) for o in cell(*[to_ms(x) for x in xs])]


def lowered(build, inputs, device):
    return compiled(build, inputs, device)(*inputs)


def same_bits(a, b, where):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (where, a.shape, b.shape, a.dtype, b.dtype)
    if a.dtype.kind == "f":
        a, b = a.view(UINT[a.dtype.type]), b.view(UINT[b.dtype.type])
    bad = np.nonzero(a != b)[0]
    assert bad.size == 0, f"{where}: differ at {bad[:5]}: {a[bad[:5]]} vs {b[bad[:5]]}"


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_frexp_ldexp_bitcast_native_equal_host_and_jax(dt):
    x = edge_values(dt)
    e = np.resize(np.array(list(range(-1100, 1100, 37)) + [2**31 - 1, -2**31, 0, 1, -1, 127, 128, 129, -126, -149,
                                                             -150, 1023, 1024, -1022, -1074, -1075], np.int32), x.shape)
    bits = np.random.default_rng(1).integers(-2**62, 2**62, x.size).astype(INT[dt])
    bits[:4] = [0, np.iinfo(INT[dt]).min, -1, 1]  # +0, -0, -NaN, the smallest subnormal
    xs, es = x[5:6].reshape(()), e[3:4].reshape(())  # scalar arrays

    def build_n(ops, x, e, b):
        m, ee = ops.frexp(x)
        return (m, ee, ops.ldexp(x, e), ops.bitcast(x, INT[dt]), ops.bitcast(x, UINT[dt]), ops.bitcast(b, dt),
                ops.bitcast(ops.bitcast(b, dt), INT[dt]))

    def build(ops, x, e, b, xs, es):
        m, ee = ops.frexp(x)
        sm, se = ops.frexp(xs)
        one = [ops.reshape(v, (1,)) for v in (sm, se, ops.ldexp(xs, es), ops.bitcast(xs, UINT[dt]))]  # 0-d operands
        return (m, ee, ops.ldexp(x, e), ops.bitcast(x, INT[dt]), ops.bitcast(x, UINT[dt]), ops.bitcast(b, dt),
                ops.bitcast(ops.bitcast(b, dt), INT[dt]), *one)

    host = lowered(build_n, [x, e, bits], "CPU")
    native = lowered(build_n, [x, e, bits], "GPU")
    scalar = lowered(build, [x, e, bits, xs, es], "GPU")[7:]  # host kernels take no 0-d operand
    seen = (np.abs(x) >= np.finfo(dt).tiny) | (x == 0) | ~np.isfinite(x)  # subnormals: not visible on CPU
    b_float = bits.view(dt)
    b_seen = ((np.abs(b_float) >= np.finfo(dt).tiny) | (b_float == 0) | np.isinf(b_float)) & ~np.isnan(b_float)
    names = ["frexp m", "frexp e", "ldexp", "bitcast int", "bitcast uint", "bits->float", "bits round trip"]
    for name, h, n in zip(names, host, native):
        mask = b_seen if name.startswith("bits") else seen
        same_bits(h[mask], n[mask], name)
    sm, se = np.frexp(xs)
    with np.errstate(over="ignore"):
        want = [sm, se.astype(np.int32), np.ldexp(xs, es), xs.view(UINT[dt])]
    for name, w, n in zip(["scalar frexp m", "scalar frexp e", "scalar ldexp", "scalar bitcast"], want, scalar):
        same_bits(np.atleast_1d(w), n, name)
    # NaN to a bit cast: the quiet NaN of the positive sign
    assert np.all(np.isnan(native[5][np.isnan(b_float)]))
    nan_bits = native[3][np.isnan(x)]
    assert nan_bits.size and np.all(nan_bits == np.asarray(np.nan, dt).view(INT[dt]))
    # JAX (normal values and normal results only: XLA's CPU frexp/ldexp flush subnormals)
    with jax.enable_x64(True):
        jm, je = (np.asarray(a) for a in J.frexp(x))
        jl, jb = np.asarray(J.ldexp(x, e)), np.asarray(J.bitcast(x, INT[dt]))
    same_bits(jm[seen], native[0][seen], "frexp m vs JAX")
    same_bits(je[seen], native[1][seen], "frexp e vs JAX")
    ok = seen & ((np.abs(jl) >= np.finfo(dt).tiny) | (jl == 0) | ~np.isfinite(jl)) & (jl != 0)
    same_bits(jl[ok], native[2][ok], "ldexp vs JAX")
    same_bits(jb[seen & ~np.isnan(x)], native[3][seen & ~np.isnan(x)], "bitcast vs JAX")


def test_threefry_native_equals_host_numpy_and_jax():
    keys = np.array([[0, 0], [0, 42], [0xFFFFFFFF, 0xFFFFFFFF], [123456789, 987654321], [0x80000000, 1]], np.uint32)
    data = np.array([0, -5, 2**31 - 1, -2**31, 7], np.int32)

    from backends.numpy.threefry import random_words_reference as words

    def build(ops, k, d):
        return (ops.fold_in(k, d), ops.random_bits(k, (5, 7)), ops.random_bits(k, ()), ops.random_bits(k, (1,)),
                ops.random_words(k, (3, 5)), ops.random_words(k, (1,)), ops.random_words(k, (2,)))

    host_fn, native_fn = (compiled(build, [keys[0], np.asarray(data[0])], dev) for dev in ("CPU", "GPU"))
    for k, d in zip(keys, data):
        d = np.asarray(d)
        host, native = host_fn(k, d), native_fn(k, d)
        want = [rt.np_fold_in(k, d), rt.np_random_bits(k, (5, 7)), rt.np_random_bits(k, (1,)), rt.np_random_bits(k, (1,)),
                words(k, (3, 5)), words(k, (1,)), words(k, (2,))]
        jax = [J.fold_in(k, d), J.random_bits(k, (5, 7)), J.random_bits(k, ()), J.random_bits(k, (1,)),
               J.random_words(k, (3, 5)), J.random_words(k, (1,)), J.random_words(k, (2,))]
        assert len(host) == len(want) == 7
        for i, (h, n, w, j) in enumerate(zip(host, native, want, jax)):
            same_bits(h, n, f"key {k} output {i}: host vs native")
            same_bits(np.asarray(w).reshape(n.shape), n, f"key {k} output {i}: numpy vs native")
            same_bits(np.atleast_1d(np.asarray(j)), n, f"key {k} output {i}: JAX vs native")


# the issue's eight less randomk, terngrad and ef(topk), whose native ops are int8's, qsgd's and topk's
# (the suite's time budget: each native graph compiles in 3-10 s)
AFFECTED = ["int8()", "qsgd(levels=127, bucket=64)", "topk(ratio=0.1)", "natural()", "dgc(ratio=0.05, sample=0.5)"]


@pytest.mark.parametrize("spec", AFFECTED)
def test_native_graphs_match_jax(spec):
    """The compressors whose CPU graphs hold host kernels, lowered for GPU (native ops only) and
    run here, against JAX through the conformance suite's own ``run_both`` (one worker, one
    leaf: the native ops' graphs compile slowly; the CPU suite covers two workers)."""
    run_both(spec, steps=2, device="GPU", shapes=[(33,)], n=1)


def test_float64_top_k_native_equals_host():
    """Stable float64 top-k without the host kernel: ties by lowest index, ±inf, NaN, -0, 1e±300."""
    rng = np.random.default_rng(0)
    x = np.round(rng.standard_normal(200) * 2) / 2
    x[:8] = [np.inf, -np.inf, np.nan, -0.0, 0.0, 1e300, -1e300, 1e-300]
    x[50:60] = 1.5

    def build(ops, v):
        return [o for k in (1, 7, 60, 200) for o in ops.top_k(v, k)]

    for i, (h, n) in enumerate(zip(lowered(build, [x], "CPU"), lowered(build, [x], "GPU"))):
        same_bits(h, n, f"top_k output {i}")


def test_a_gpu_graph_refuses_a_host_kernel():
    """Lowering for GPU a program that needs a host-only kernel fails at lowering time, naming it."""
    from backends.mindspore.trace import LoweringError
    with pytest.raises(LoweringError, match=r"op 'scatter_add' needs the host kernel scatter_add_bf16_prim .* "
                                            r"device GPU cannot run"):
        LoopbackExchange("topk(ratio=0.1)", [((20,), np.dtype("bfloat16"))], n=1, device="GPU")
