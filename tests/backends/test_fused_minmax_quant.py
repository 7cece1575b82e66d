"""``Fused.minmax_quantize_pack`` (quantize's encoder: min-max scales and codes in one call):
the NumPy one-pass kernel and JAX give the composition's bits."""
from __future__ import annotations

import numpy as np
import pytest

from backends.numpy.blocks import PARALLEL_MIN
from compressors.fused import Fused
from tests.backends.ops_backends import assert_same_bits
from tests.backends.test_fused import BIG, FLOATS, JAX_SIZES, NP, SIZES, data, finite_data, on_jax


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("bits,bucket", [(8, 512), (8, 0), (4, 512), (3, 520), (1, 1024), (16, 512), (4, 64), (3, 50),
                                        (2, 65536), (8, 65540)])
def test_minmax_quantize_pack(n, dtype, bits, bucket):
    """Scales and codes in one call: the one-pass kernel (float32, buckets of whole words of at
    most 2^16) gives the composition's bits (NaN, +-inf, +-0 and runs of one value inside);
    the other cases take the composition."""
    from backends.numpy import fused_minmax_quant
    x = data(n, dtype)
    top = float(2**bits - 1)
    key = NP.fold_in(NP.key(4), bits)
    got = NP.minmax_quantize_pack(x, bucket, top, bits, key)
    want = Fused.minmax_quantize_pack(NP, x, bucket, top, bits, key)
    kernel = fused_minmax_quant.applies(x, bucket, bits)
    B = bucket or n
    assert kernel == (dtype == np.float32 and B % (32 // bits) == 0 and B <= 1 << 16 and (B >= 512 or B >= n))
    nb = -(-n // (bucket or n))
    assert got[0].shape == (-(-n // (32 // bits)),) and got[1].shape == got[2].shape == (nb,)
    assert got[1].dtype == got[2].dtype == np.float32
    for g, w, name in zip(got, want, ("codes", "lo", "step")):
        assert_same_bits(g, w, f"minmax_quantize_pack {name}")
    # the scales and codes quantize_pack gets from them (the function's definition)
    lo, step = got[1].astype(dtype), got[2].astype(dtype)
    inv = np.maximum(dtype.type(1.0) / step, dtype.type(2.0**-126))
    assert_same_bits(got[0], Fused.quantize_pack(NP, x, lo, inv, bucket, top, bits, key), "codes from the scales")
    if n in JAX_SIZES:
        for j, w, name in zip(on_jax(Fused.minmax_quantize_pack, x, bucket, top, bits, key, dtype=dtype), want,
                              ("codes", "lo", "step")):
            assert_same_bits(j, w, f"minmax_quantize_pack {name} (JAX)")


@pytest.mark.parametrize("bits", [8, 16, 4])
@pytest.mark.parametrize("n", [33, BIG + 2])
def test_minmax_quantize_pack_clears_the_unused_fields_of_a_recycled_buffer(bits, n):
    from backends.numpy import fused_minmax_quant as F
    x = finite_data(n, np.float32)
    top = float(2**bits - 1)
    ref = Fused.minmax_quantize_pack(NP, x, 512, top, bits, NP.key(5))
    run = F.run_parallel if n >= PARALLEL_MIN else F.run_serial
    out = np.full(ref[0].size, 0xFFFFFFFF, np.uint32)
    los, steps = np.full(ref[1].size, np.nan, np.float32), np.full(ref[1].size, np.nan, np.float32)
    run(x, 512, np.float32(top), np.float32(1.0 / top), bits, np.uint32(0), np.uint32(5), out, los, steps)
    assert_same_bits(out, ref[0], "codes into a garbage buffer")
    assert_same_bits(los, ref[1], "lo")
    assert_same_bits(steps, ref[2], "step")


@pytest.mark.parametrize("bits,bucket", [(8, 512), (4, 1024), (3, 520), (8, 64), (8, 65540)])
def test_jax_custom_call_under_jit_and_vmap(bits, bucket):
    """From HOST_MIN entries, on float32 buckets the kernel takes, JAX calls the NumPy kernel (the
    HLO names the target); each of 3 vmapped workers gets its own key's codes; other buckets
    stay the composition. Values as NumPy's (NaN scales: any NaN)."""
    import jax
    import jax.numpy as jnp
    from backends.jax import host_kernels
    JAX = __import__("backends").get("jax")
    n = host_kernels.HOST_MIN + 1001
    top = float(2**bits - 1)
    xs = np.stack([data(n, np.float32, seed=s) for s in range(3)])
    keys = np.stack([NP.key(s) for s in range(3)])
    f = jax.jit(jax.vmap(lambda x, k: JAX.minmax_quantize_pack(x, bucket, top, bits, k)))
    hlo = f.lower(jnp.asarray(xs), jnp.asarray(keys)).as_text()
    assert ("kfsim_minmax_quantize_pack" in hlo) == (512 <= bucket <= 1 << 16)
    got = f(jnp.asarray(xs), jnp.asarray(keys))
    for w in range(3):
        want = NP.minmax_quantize_pack(xs[w], bucket, top, bits, keys[w])
        for g, v in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g[w]), v)
