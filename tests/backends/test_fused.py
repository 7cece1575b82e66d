"""The fused ops (``compressors.fused.Fused``): every backend's implementation
gives the bits of the reference composition.

NumPy overrides each fused op with a one-pass Numba kernel (serial below
``PARALLEL_MIN`` elements, threaded above), so the sizes here cover both
paths, bucket edges, every code width and NaN/inf/zero entries.
The reference is ``Fused.<op>`` run on NumPy's primitive ops; JAX inherits
the composition, so comparing it checks the composition itself is portable.
"""
from __future__ import annotations

import numpy as np
import pytest

import backends
from backends.numpy.blocks import PARALLEL_MIN, ROWS_PARALLEL_MIN
from backends.numpy.fused_lowrank import thin_matmul
from backends.numpy.fused_topk import TOPK_MIN, sample_size, top_k_abs_rows
from backends.numpy.sums import halving_sum
from backends.numpy.topk import stratified_positions
from compressors.fused import FUSED_NAMES, Fused
from tests.backends.ops_backends import assert_same_bits, maybe_x64

NP = backends.get("numpy")
JAX = backends.get("jax")
BIG = PARALLEL_MIN + 12_345  # the threaded kernels
SIZES = [1, 31, 513, 4_099, BIG]
# The JAX composition is one XLA program whatever the size (the size-dependent
# paths are NumPy's kernels): it is compared at three of the sizes, which keeps
# the module's compile count (time and memory) down.
JAX_SIZES = {1, 513, BIG}
FLOATS = [np.dtype(np.float32), np.dtype(np.float64)]


def data(n: int, dtype, seed: int = 0) -> np.ndarray:
    """Normal values with NaN, +-inf, +-0 and repeated values sprinkled in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(dtype)
    if n > 40:
        x[rng.integers(0, n, 3)] = np.nan
        x[rng.integers(0, n, 2)] = np.inf
        x[rng.integers(0, n, 2)] = -np.inf
        x[rng.integers(0, n, 5)] = 0.0
        x[rng.integers(0, n, 5)] = -0.0
        x[10:30] = x[9]
    return x


def finite_data(n: int, dtype, seed: int = 0) -> np.ndarray:
    x = data(n, dtype, seed)
    x[~np.isfinite(x)] = 1.5
    return x


def on_jax(fn, *args, dtype):
    with maybe_x64(dtype):
        out = fn(JAX, *[JAX.asarray(a) if isinstance(a, np.ndarray) else a for a in args])
        return [np.asarray(o) for o in out] if isinstance(out, tuple) else np.asarray(out)


def test_every_fused_op_is_covered():
    assert set(FUSED_NAMES) == {"bucket_min_max", "quantize_pack", "minmax_quantize_pack", "dequantize", "top_k_abs", "clear_at", "sum_abs",
                                "bucket_norm", "sign_split_sums", "sign_split_pack", "sum_abs_pack", "pack_signs", "unpack_signs", "natural_pack",
                                "natural_unpack", "add", "matmul_nt", "matmul_tn", "sub_matmul_nt"}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("bucket", [0, 1, 7, 512, 10**7])
def test_bucket_min_max(n, dtype, bucket):
    x = data(n, dtype)
    got = NP.bucket_min_max(x, bucket)
    want = Fused.bucket_min_max(NP, x, bucket)
    nb = -(-n // (bucket or n))
    for g, w, name in zip(got, want, ("min", "max")):
        assert g.shape == (nb,) and g.dtype == dtype
        # values (NaN == NaN); the sign of a zero extreme is unspecified
        np.testing.assert_array_equal(g, w, err_msg=name)
    if n in JAX_SIZES:
        j = on_jax(Fused.bucket_min_max, x, bucket, dtype=dtype)
        np.testing.assert_array_equal(j[0], want[0])
        np.testing.assert_array_equal(j[1], want[1])


def test_bucket_min_max_nan_and_infinities():
    x = np.array([1.0, np.nan, -2.0, np.inf, -np.inf, 3.0, -0.0, 0.0], np.float32)
    mn, mx = NP.bucket_min_max(x, 2)
    np.testing.assert_array_equal(mn, [np.nan, -2.0, -np.inf, -0.0])
    np.testing.assert_array_equal(mx, [np.nan, np.inf, 3.0, 0.0])
    e = NP.bucket_min_max(np.zeros(0, np.float32), 4)
    assert e[0].shape == e[1].shape == (0,)


def quant_args(x, bucket, bits):
    mn, mx = Fused.bucket_min_max(NP, np.where(np.isfinite(x), x, 0).astype(x.dtype), bucket)
    top = float(2**bits - 1)
    step = np.maximum((mx - mn) * x.dtype.type(1.0 / top), x.dtype.type(2.0**-126))
    return mn + x.dtype.type(0), (1.0 / step).astype(x.dtype), step.astype(x.dtype), top


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("bits", [1, 2, 3, 4, 5, 6, 7, 8, 11, 16])
def test_quantize_pack_and_dequantize(n, dtype, bits):
    bucket = 512 if n > 600 else 7
    x = data(n, dtype)
    off, inv, step, top = quant_args(x, bucket, bits)
    key = NP.key(11)
    words = NP.quantize_pack(x, off, inv, bucket, top, bits, key)
    ref = Fused.quantize_pack(NP, x, off, inv, bucket, top, bits, key)
    assert_same_bits(words, ref, "quantize_pack")
    assert words.size == -(-n // (32 // bits))
    if n in JAX_SIZES:
        assert_same_bits(on_jax(Fused.quantize_pack, x, off, inv, bucket, top, bits, key, dtype=dtype), ref,
                         "quantize_pack (JAX)")
    codes = NP.unpack_bits(words, bits, n)
    assert codes.max() <= top
    assert np.all(codes[np.isnan(x)] == 0)  # NaN -> code 0
    out = NP.dequantize(words, bits, n, off, step, bucket)
    assert_same_bits(out, Fused.dequantize(NP, words, bits, n, off, step, bucket), "dequantize")


@pytest.mark.parametrize("bits", [1, 2, 4, 8, 16, 5])
@pytest.mark.parametrize("n", [33, BIG + 2])
def test_quantize_pack_clears_the_unused_fields_of_a_recycled_buffer(bits, n):
    """The kernels store 8- and 16-bit codes straight into the output's bytes,
    and 1-, 2- and 4-bit ones a byte at a time; the unused fields of a last partial word
    must still be 0 when the (pooled, reused) output buffer held garbage."""
    from backends.numpy import fused_quant

    x = finite_data(n, np.float32)
    off, inv, step, top = quant_args(x, 512, bits)
    ref = Fused.quantize_pack(NP, x, off, inv, 512, top, bits, NP.key(5))
    per = 32 // bits
    assert n % per, "the case needs a last partial word"
    run = fused_quant._quantize_parallel if n >= PARALLEL_MIN else fused_quant._quantize_serial
    out = np.full(ref.size, 0xFFFFFFFF, np.uint32)
    run(x, off, inv, 512, np.float32(top), bits, False, np.uint32(0), np.uint32(5), out)
    assert_same_bits(out, ref, "quantize_pack into a garbage buffer")


def test_quantize_pack_rounds_stochastically_without_bias():
    """E[code] = y within 2^-17 + sampling error: 2^20 draws of the same y per bucket."""
    n = 1 << 20
    x = np.full(n, 0.3, np.float32)
    off = np.zeros(1, np.float32)
    for y in (0.25, 0.3, 0.7, 2.999):
        inv = np.array([y / 0.3], np.float32)
        y32 = float(np.float32(np.float32(0.3) * inv[0]))
        codes = NP.unpack_bits(NP.quantize_pack(x, off, inv, 0, 3.0, 2, NP.key(3)), 2, n)
        assert set(np.unique(codes)) <= {np.floor(y32), np.floor(y32) + 1}
        mean = codes.mean()
        sd = np.sqrt((y32 % 1) * (1 - y32 % 1) / n)
        assert abs(mean - y32) <= 2.0**-17 + 5 * sd + 1e-12, (y, mean)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [TOPK_MIN + 5, PARALLEL_MIN + 3, 400_000])
@pytest.mark.parametrize("k", [1, 17, 3_000, "n/4"])
def test_top_k_abs(n, dtype, k):
    k = n // 4 if k == "n/4" else k  # n/4: the largest k the sampled selection takes
    x = data(n, dtype, seed=k)
    x[1000:1600] = -x[999]  # ties at the threshold region for small k
    got = NP.top_k_abs(x, k)
    assert np.all(np.diff(got) > 0), "indices must ascend"
    assert_same_bits(got, Fused.top_k_abs(NP, x, k), "top_k_abs")
    assert_same_bits(on_jax(Fused.top_k_abs, x, k, dtype=dtype), got, "top_k_abs (JAX composition)")
    assert_same_bits(on_jax(type(JAX).top_k_abs, x, k, dtype=dtype), got, "top_k_abs (JAX host route)")


@pytest.mark.parametrize("n", [TOPK_MIN + 5, PARALLEL_MIN + 3])
@pytest.mark.parametrize("levels", [3, 40])
def test_top_k_abs_heavy_ties(n, levels):
    """Few distinct magnitudes: the sampled threshold lands on a tied value,
    so the k chosen mix keys above it with its lowest-index ties."""
    rng = np.random.default_rng(levels)
    x = (rng.integers(-levels, levels + 1, n) / levels).astype(np.float32)
    for k in [1, n // 100, n // 10, n // 4]:
        got = NP.top_k_abs(x, k)
        assert_same_bits(got, Fused.top_k_abs(NP, x, k), f"top_k_abs k={k}")


def test_top_k_abs_jax_vmap_rows():
    import jax

    x = np.stack([data(PARALLEL_MIN + 3, np.float32, seed=s) for s in range(3)])
    got = np.asarray(jax.jit(jax.vmap(lambda r: JAX.top_k_abs(r, 500)))(JAX.asarray(x)))
    for r in range(3):
        assert_same_bits(got[r], Fused.top_k_abs(NP, x[r], 500), f"row {r}")


def test_top_k_abs_rows_fall_back_per_row():
    """Rows go through one parallel kernel call; a row whose sampled
    threshold fails (its sample sees only zeros, so the survivors overflow)
    is redone by the reference, the others keep the kernel's answer."""
    n = TOPK_MIN * 4
    rows = np.stack([data(n, np.float32, seed=1), np.ones(n, np.float32), data(n, np.float32, seed=2)])
    rows[1, stratified_positions(n, sample_size(n))] = 0.0  # every sampled entry
    idx, ok = top_k_abs_rows(rows, 300)
    assert ok.tolist() == [True, False, True]
    got = np.asarray(JAX.top_k_abs(JAX.asarray(rows), 300))  # the host route of a batch of rows
    for r in range(3):
        assert_same_bits(got[r], Fused.top_k_abs(NP, rows[r], 300), f"row {r}")


def test_top_k_abs_small_and_bad_input():
    x = data(513, np.float32)
    assert_same_bits(NP.top_k_abs(x, 20), Fused.top_k_abs(NP, x, 20))
    with pytest.raises(ValueError, match="0 < k"):
        NP.top_k_abs(x, 0)
    with pytest.raises(ValueError, match="1-D"):
        NP.top_k_abs(x.reshape(27, 19), 3)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [5, 2048, 4_099, (1 << 20) + 77])
def test_sum_abs(n, dtype):
    x = finite_data(n, dtype)
    assert_same_bits(NP.sum_abs(x), Fused.sum_abs(NP, x), "sum_abs")
    assert_same_bits(on_jax(Fused.sum_abs, x, dtype=dtype), NP.sum_abs(x), "sum_abs (JAX)")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [5, 4_099, (1 << 20) + 77])
def test_scaled_sum_abs_stays_finite_where_the_plain_one_overflows(n, dtype):
    x = finite_data(n, dtype) * dtype.type(np.finfo(dtype).max / 8)
    scale = 2.0 ** -(n - 1).bit_length()
    got = NP.sum_abs(x, scale)
    assert_same_bits(got, Fused.sum_abs(NP, x, scale), "scaled sum_abs")
    assert_same_bits(on_jax(Fused.sum_abs, x, scale, dtype=dtype), got, "scaled sum_abs (JAX)")
    assert np.isfinite(got) and (n < 16 or not np.isfinite(NP.sum_abs(x)))
    assert_same_bits(got, NP.sum_abs(x * dtype.type(scale)), "scaled sum_abs = sum_abs of the scaled copy")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("finite", [True, False])
def test_sign_split_sums(n, dtype, finite):
    """More sizes and thresholds: tests/backends/test_split_sums.py."""
    x = finite_data(n, dtype) if finite else data(n, dtype)
    scale = 2.0 ** -max(n - 1, 0).bit_length()
    want = Fused.sign_split_sums(NP, x, scale)
    assert_same_bits(NP.sign_split_sums(x, scale), want, "sign_split_sums")
    if n in JAX_SIZES:
        assert_same_bits(on_jax(Fused.sign_split_sums, x, scale, dtype=dtype), want, "sign_split_sums (JAX)")


def test_halving_sum_bits_do_not_depend_on_threads():
    x = finite_data((1 << 20) + 5, np.float32)
    sums = {float(halving_sum(x, parallel, False)) for parallel in (False, True)}
    assert len(sums) == 1
    assert_same_bits(NP.sum(x), JAX.sum(JAX.asarray(x)))


@pytest.mark.parametrize("dtype", FLOATS + [np.dtype(np.float16)])
@pytest.mark.parametrize("n", SIZES)
def test_pack_and_unpack_signs(n, dtype):
    x = data(n, dtype)
    words = NP.pack_signs(x)
    assert_same_bits(words, Fused.pack_signs(NP, x), "pack_signs")
    bits = NP.unpack_bits(words, 1, n)
    np.testing.assert_array_equal(bits, (x < 0).astype(np.uint32))  # -0.0 and NaN give 0
    pos, neg = np.asarray(dtype.type(0.5)), np.asarray(dtype.type(-0.0))
    out = NP.unpack_signs(words, n, pos, neg)
    assert_same_bits(out, Fused.unpack_signs(NP, words, n, pos, neg), "unpack_signs")
    if n in JAX_SIZES:
        assert_same_bits(on_jax(Fused.unpack_signs, words, n, pos, neg, dtype=dtype), out, "unpack_signs (JAX)")


def test_unpack_signs_rejects_mismatched_values():
    with pytest.raises(ValueError, match="0-d arrays of one dtype"):
        NP.unpack_signs(np.zeros(1, np.uint32), 3, np.asarray(np.float32(1)), np.asarray(np.float64(1)))
    with pytest.raises(ValueError, match="do not fit"):
        NP.unpack_signs(np.zeros(1, np.uint32), 40, np.asarray(np.float32(1)), np.asarray(np.float32(1)))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(7,), (1000, 999), (ROWS_PARALLEL_MIN + 5,)])
def test_add(shape, dtype):
    a = data(int(np.prod(shape)), dtype, 1).reshape(shape)
    b = data(int(np.prod(shape)), dtype, 2).reshape(shape)
    got = NP.add(a, b)
    assert got.shape == shape and got.dtype == dtype
    assert_same_bits(got, Fused.add(NP, a, b), "add")
    with pytest.raises(ValueError, match="one shape and dtype"):
        NP.add(a, b.astype(np.float16))


def within_rounding(got, want, bound, name):
    """|got - want| <= bound entrywise; the callers' bound, (r + 2) eps
    |a| |b|^T (+ 2 eps |c|), is matmul's promise: agreement to rounding of
    r-term dot products."""
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= bound), f"{name}: max excess {np.max(err - bound):.3g}"


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n,m,r", [(3, 5, 1), (50, 70, 4), (1100, 1000, 4), (1027, 1030, 6), (1025, 1031, 32), (1024, 1024, 33)])
def test_low_rank_products(n, m, r, dtype):
    """The kernels (row-parallel above ROWS_PARALLEL_MIN entries, BLAS past
    LOW_RANK_MAX columns) agree with the compositions, on NumPy and JAX."""
    rng = np.random.default_rng(n + r)
    c = rng.standard_normal((n, m)).astype(dtype)
    a = rng.standard_normal((n, r)).astype(dtype)
    b = rng.standard_normal((m, r)).astype(dtype)
    a64, b64, c64 = a.astype(np.float64), b.astype(np.float64), c.astype(np.float64)
    want = a64 @ b64.T
    bound = (r + 2) * np.finfo(dtype).eps * (np.abs(a64) @ np.abs(b64).T)
    for name, got in [("matmul_nt", NP.matmul_nt(a, b)), ("JAX matmul_nt", on_jax(Fused.matmul_nt, a, b, dtype=dtype)),
                      ("JAX's matmul_nt (custom call above CUSTOM_CALL_MIN)",
                       on_jax(type(JAX).matmul_nt, a, b, dtype=dtype))]:
        assert got.shape == (n, m) and got.dtype == dtype, name
        within_rounding(got, want, bound, name)
    bound = bound + 2 * np.finfo(dtype).eps * np.abs(c64)
    for name, got in [("sub_matmul_nt", NP.sub_matmul_nt(c, a, b)),
                      ("JAX sub_matmul_nt", on_jax(Fused.sub_matmul_nt, c, a, b, dtype=dtype)),
                      ("JAX's sub_matmul_nt", on_jax(type(JAX).sub_matmul_nt, c, a, b, dtype=dtype))]:
        assert got.shape == (n, m) and got.dtype == dtype, name
        within_rounding(got, c64 - want, bound, name)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n,m,r", [(1100, 1000, 1), (1500, 997, 4), (1001, 1200, 32), (1027, 1025, 6), (800, 700, 2)])
def test_thin_matmul_kernels(n, m, r, dtype):
    """NumPy's matmul takes the Numba projections for a (n, m) @ (m, r) and
    for the transposed view a.T @ (n, r): they agree with BLAS to rounding."""
    rng = np.random.default_rng(r)
    a = rng.standard_normal((n, m)).astype(dtype)
    q = rng.standard_normal((m, r)).astype(dtype)
    p = rng.standard_normal((n, r)).astype(dtype)
    assert thin_matmul(a, q) is not None and thin_matmul(a.T, p) is not None
    want_tn = a.T.astype(np.float64) @ p
    tol_tn = 4 * np.finfo(dtype).eps * np.sqrt(2 * n) * float(np.max(np.abs(want_tn)))
    for name, got in [("matmul_tn", NP.matmul_tn(a, p)), ("JAX's matmul_tn (custom call)",
                                                          on_jax(type(JAX).matmul_tn, a, p, dtype=dtype)),
                      ("JAX matmul_tn composition", on_jax(Fused.matmul_tn, a, p, dtype=dtype))]:
        assert got.dtype == dtype and got.shape == (m, r), name
        np.testing.assert_allclose(got, want_tn, rtol=0, atol=tol_tn, err_msg=name)
    for got, want in [(NP.matmul(a, q), a.astype(np.float64) @ q), (NP.matmul(NP.transpose(a), p),
                                                                    a.T.astype(np.float64) @ p)]:
        assert got.dtype == dtype and got.shape == want.shape
        tol = 4 * np.finfo(dtype).eps * np.sqrt(got.shape[0] + n) * float(np.max(np.abs(want)))
        np.testing.assert_allclose(got, want, rtol=0, atol=tol)


def test_thin_matmul_sizes_it_takes():
    """Every width from ROWS_PARALLEL_MIN entries of a (where the row kernels run threaded:
    BLAS's threads are not alternated with Numba's), BLAS below."""
    n = ROWS_PARALLEL_MIN // 512
    a, a_small = np.ones((n, 512), np.float32), np.ones((n - 1, 512), np.float32)
    for r in (1, 2, 32):
        b = np.ones((512, r), np.float32)
        assert thin_matmul(a, b) is not None and thin_matmul(a_small, b) is None, r


def test_jax_low_rank_custom_calls_under_vmap_and_jit():
    """PowerSGD's products on JAX's CPU custom calls: taken above CUSTOM_CALL_MIN (the HLO
    names the target), one call per worker under vmap, each worker's own result."""
    import jax

    from backends.jax import host_lowrank
    rng = np.random.default_rng(9)
    m = rng.standard_normal((3, 1030, 1024)).astype(np.float32)
    p = rng.standard_normal((3, 1030, 4)).astype(np.float32)
    q = rng.standard_normal((3, 1024, 4)).astype(np.float32)
    assert host_lowrank.usable(m[0].size, m[0], p[0], max_rank=host_lowrank.THIN_MAX)
    for op, args, want in [("matmul_tn", (m, p), [m[i].T @ p[i] for i in range(3)]),
                           ("matmul_nt", (p, q), [p[i] @ q[i].T for i in range(3)]),
                           ("sub_matmul_nt", (m, p, q), [m[i] - p[i] @ q[i].T for i in range(3)])]:
        fn = jax.jit(jax.vmap(getattr(JAX, op)))
        assert f"kfsim_{op}_float32" in fn.lower(*args).as_text(), op
        got = np.asarray(fn(*args))
        for i in range(3):
            np.testing.assert_allclose(got[i], want[i], rtol=1e-4, atol=1e-3, err_msg=f"{op} worker {i}")
    small = np.ones((8, 8), np.float32)
    assert not host_lowrank.usable(small.size, small, small[:, :2], max_rank=host_lowrank.THIN_MAX)
