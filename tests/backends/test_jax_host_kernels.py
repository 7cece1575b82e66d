"""The JAX binding's fused ops as XLA custom calls (``backends.jax.host_kernels``)
return the bits of the compositions they replace (``compressors.fused.Fused``, which
run when ``host.usable`` says no): at tensor sizes above ``HOST_MIN`` with odd
tails, at the edges of the float range, for float32 and float64, and under vmap.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import compressors as C
from backends.jax import host_kernels as host
from backends.jax.ops import OPS
from backends.numpy.arrays import BF16

N = host.HOST_MIN + 4099  # above the threshold, a tail that fills no word, bucket or block evenly
FLOATS = (np.float32, np.float64)


def edge_vector(dtype, n=N, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(dtype)
    info = np.finfo(dtype)
    specials = np.array([0.0, -0.0, 1e38, -1e38, 1e-38, -1e-38, info.tiny / 4, -info.tiny / 4, info.max, info.min,
                         3.0, -3.0], dtype)
    x[rng.choice(n, specials.size, replace=False)] = specials
    return x


def with_bad(x, seed=1):
    """x with a NaN and both infinities at random places."""
    x = x.copy()
    x[np.random.default_rng(seed).choice(x.size, 3, replace=False)] = [np.nan, np.inf, -np.inf]
    return x


def bits(a):
    a = np.asarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]) if a.size else a


def assert_same_bits(got, want):
    got, want = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w)
        np.testing.assert_array_equal(bits(g), bits(w))


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):  # JAX holds float64 only with x64 on
        yield


@pytest.fixture
def both(monkeypatch):
    """fn -> (custom-call result, composition result), each under jit."""
    def run(fn, *args):
        got = jax.jit(fn)(*args)
        with monkeypatch.context() as m:
            m.setattr(host, "usable", lambda *a, **k: False)
            want = jax.jit(fn)(*args)
        return got, want
    return run


def hlo(fn, *args) -> str:
    return jax.jit(fn).lower(*args).compile().as_text()


def test_the_kernels_serve_this_machine():
    """Without this the tests below compare the composition with itself."""
    assert host.usable(N, jnp.zeros(1, jnp.float32))
    text = hlo(lambda x: OPS.bucket_min_max(x, 512), jnp.zeros(N, jnp.float32))
    assert "kfsim_bucket_min_max_float32" in text


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bucket", [0, 512, 1000])
@pytest.mark.parametrize("bad", [False, True])
def test_min_max_norm_and_sums(both, dtype, bucket, bad):
    x = edge_vector(dtype)
    x = with_bad(x) if bad else x
    got, want = both(lambda v: OPS.bucket_min_max(v, bucket), x)
    assert got[0].dtype == dtype
    assert_same_bits(got, want)
    assert_same_bits(*both(lambda v: OPS.bucket_norm(v, bucket), x))
    assert_same_bits(*both(OPS.sum, x))
    assert_same_bits(*both(OPS.sum_abs, x))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bad", [False, True])
def test_sign_split_sums(both, dtype, bad):
    x = edge_vector(dtype)
    x = with_bad(x) if bad else x
    got, want = both(lambda v: OPS.sign_split_sums(v, 2.0**-16), x)
    assert got.shape == (5,) and got.dtype == dtype
    assert_same_bits(got, want)
    assert np.isnan(np.asarray(got)[4]) == bad


@pytest.mark.parametrize("dtype", FLOATS)
def test_sums_at_extreme_magnitudes_overflow_alike(both, dtype):
    info = np.finfo(dtype)
    x = np.full(N, info.max / 4, dtype)  # the partial sums overflow: where they do must agree
    x[::7] = -info.max / 3
    assert_same_bits(*both(OPS.sum, x))
    assert_same_bits(*both(OPS.sum_abs, x))
    assert_same_bits(*both(lambda v: OPS.sum_abs(v, 2.0**-20), x))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bits_", [1, 2, 4, 8])
@pytest.mark.parametrize("signed", [False, True])
def test_quantize_pack_and_dequantize(both, dtype, bits_, signed):
    bucket = 512
    x = edge_vector(dtype) * dtype(1e-30)  # finite bucket ranges, with subnormal entries
    lo, hi = OPS.bucket_min_max(jnp.asarray(x), bucket)
    top = float(2 ** bits_ - 1 if not signed else 2 ** (bits_ - 1) - 1)
    span = jnp.maximum(hi - lo, jnp.asarray(np.finfo(dtype).tiny, dtype))
    offset = jnp.zeros_like(lo) if signed else lo
    inv = (top / span).astype(dtype)
    key = jnp.array([7, 11], jnp.uint32)
    got, want = both(lambda v: OPS.quantize_pack(v, offset, inv, bucket, top, bits_, key, signed), x)
    assert_same_bits(got, want)
    scale = (1 / inv).astype(dtype)
    assert_same_bits(*both(lambda w: OPS.dequantize(w, bits_, N, offset, scale, bucket, signed), got))


@pytest.mark.parametrize("dtype", FLOATS)
def test_signs(both, dtype):
    x = with_bad(edge_vector(dtype))
    words, want = both(OPS.pack_signs, x)
    assert_same_bits(words, want)
    pos, neg = jnp.asarray(2.5, dtype), jnp.asarray(-np.inf, dtype)
    assert_same_bits(*both(lambda w: OPS.unpack_signs(w, N, pos, neg), words))
    assert_same_bits(*both(lambda w: OPS.unpack_signs(w, N - 5, pos, pos), words))  # count short of the words


@pytest.mark.parametrize("dtype", FLOATS)
def test_natural_codec(both, dtype):
    """Natural compression's codec. XLA:CPU reads subnormal inputs as 0 while the
    kernel rounds them as NumPy does, so: the call against the composition on
    NumPy with subnormals, and against XLA's composition without them."""
    from backends.numpy.ops import OPS as NPO
    from compressors.fused import Fused

    x, key = with_bad(edge_vector(dtype)), jnp.asarray(NPO.key(4))
    got = jax.jit(OPS.natural_pack)(x, key)
    with np.errstate(all="ignore"):
        assert_same_bits(got, Fused.natural_pack(NPO, x, np.asarray(key)))
    normal = np.where(np.abs(x) < np.finfo(dtype).tiny, dtype(0), x)
    assert_same_bits(*both(lambda v: OPS.natural_pack(v, key), normal))
    assert_same_bits(*both(lambda s, e: OPS.natural_unpack(s, e, N), *got))
    assert_same_bits(*both(lambda s, e: OPS.natural_unpack(s, e, N - 7), *got))  # count short of the words
    tiny = np.full(N, -1e-40, dtype)  # negative subnormals, the last ones (in whole and partial words) likely
    tiny[-40:] = -1.1e-38              # to round to -2^-126: the kernel runs on an XLA thread that reads them
    with np.errstate(all="ignore"):    # as 0 (DAZ); its sign tests must not
        assert_same_bits(jax.jit(OPS.natural_pack)(tiny, key), Fused.natural_pack(NPO, tiny, np.asarray(key)))
    two = jax.jit(jax.vmap(lambda v: OPS.natural_pack(v, key)))(np.stack([x, -x]))
    assert_same_bits(jax.tree.map(lambda a: a[1], two), jax.jit(OPS.natural_pack)(-x, key))


@pytest.mark.parametrize("narrow", [np.float16, BF16])
def test_16_bit_casts_round_and_saturate_alike(both, narrow):
    x = with_bad(edge_vector(np.float32))
    x[:4] = [65504.0, 65520.0, 6e-8, 1e-45]  # float16's max, its overflow boundary, subnormal, below it
    half, want = both(lambda v: OPS.astype(v, narrow), x)
    assert_same_bits(half, want)
    assert_same_bits(*both(lambda h: OPS.astype(h, np.float32), half))


def test_no_large_bitcast_copies_around_the_calls():
    """XLA:CPU copies a large bitcast_convert: the calls take and return the float arrays."""
    x = jnp.zeros(N, jnp.float32)
    text = hlo(lambda v: (OPS.bucket_min_max(v, 512), OPS.unpack_signs(OPS.pack_signs(v), N, jnp.float32(1),
                                                                       jnp.float32(-1)),
                          OPS.astype(OPS.astype(v, BF16), np.float32)), x)
    big = [ln for ln in text.splitlines() if "bitcast-convert(" in ln and f"[{N}]" in ln]
    assert not big, big


def test_vmap_runs_the_call_once_per_worker(both):
    xs = np.stack([edge_vector(np.float32, seed=s) for s in range(3)])
    got, want = both(jax.vmap(lambda v: OPS.bucket_min_max(v, 512)), xs)
    assert_same_bits(got, want)
    for i in range(3):
        assert_same_bits(jax.tree.map(lambda a: a[i], got), jax.jit(lambda v: OPS.bucket_min_max(v, 512))(xs[i]))


@pytest.mark.parametrize("spec", ["quantize(bits=8)", "quantize(bits=4)", "qsgd(levels=127)", "terngrad()",
                                  "signsgd()", "scaledsign()", "onebit()", "fp16()", "bf16()", "ef(topk(ratio=0.01))"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_compressors_round_trip_alike(both, spec, dtype):
    comp = C.parse(spec)
    grads = {"a": jnp.asarray(edge_vector(dtype)), "b": jnp.asarray(edge_vector(dtype, n=300, seed=3))}
    state = comp.init(OPS, grads)
    keys = C.make_keys(OPS, 0, 5)
    assert_same_bits(*both(lambda g, s, k: C.roundtrip(OPS, comp, g, s, k), grads, state, keys))
