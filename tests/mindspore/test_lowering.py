"""Lowering: user-written compressors, clear errors at lowering time, RNG modes."""
from __future__ import annotations

import functools

import math

import jax.numpy as jnp
import numpy as np
import pytest

from backends import get
from backends.mindspore.lower import LoopbackExchange, first_mismatch
from backends.mindspore.reducer import check_compatible, check_lowerable
from backends.mindspore.trace import LoweringError, Program, TracingOps
from compressors import exchange, make_keys
from compressors.core import Compressor, Law, fixed, single_round

J = get("jax")


def user_compressor(compress, law=Law.SUM, name="mine()"):
    """A compressor written by a user against the ops namespace only."""
    leaf = single_round(law=law, bits=lambda shape, dtype: 32 * math.prod(shape), compress=compress,
                        decompress=lambda ops, payload, x: ops.reshape(payload, x.shape))
    return Compressor(name, fixed(leaf))


def test_user_written_compressor_lowers_and_matches_jax():
    """Scaled stochastic sign written from scratch: uniform, where, sign, max, uint32 arithmetic."""
    def compress(ops, x, state, keys):
        flat = ops.reshape(x, (-1,))
        scale = ops.max(ops.abs(flat))
        u = ops.uniform(keys.worker, flat.shape)
        bits = ops.random_bits(keys.shared, flat.shape)
        jitter = ops.astype((bits >> 30) - ops.asarray(np.uint32(1)), np.float32) * 0.0
        keep = u < (ops.abs(flat) / ops.maximum(scale, 1e-12))
        return ops.where(keep, ops.sign(flat) * scale, 0.0) + jitter, state

    comp = user_compressor(compress, name="stochsign()")
    shapes = [(6, 5), (17,)]
    lx = LoopbackExchange(comp, [(s, np.float32) for s in shapes], n=2, seed=11)
    rng = np.random.default_rng(1)
    per = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(2)]
    mean, _ = lx(per, lx.init(per), 5)
    jm, _, _ = exchange(J, comp, [tuple(jnp.asarray(x) for x in g) for g in per], [comp.init(J, tuple(per[0]))] * 2,
                        [make_keys(J, 11, 5, w) for w in range(2)])
    for a, b in zip(mean, jm):
        assert np.array_equal(a, np.asarray(b))


def test_scheduled_compressor_runs_the_phase_of_each_step():
    """warmup(...) is dense for its first steps and the inner compressor after: the loopback
    exchange builds the graph of each phase on first use (it once ran the warm-up phase at
    every step, so a benchmark timed a dense exchange as ef(topk))."""
    import compressors
    comp = compressors.parse("warmup(topk(ratio=0.1), steps=2)")
    lx = LoopbackExchange(comp, [((1000,), np.float32)], n=2, seed=3)
    rng = np.random.default_rng(2)
    per = [[rng.standard_normal(1000).astype(np.float32)] for _ in range(2)]
    states = lx.init(per)
    for step in (0, 1, 2, 7, 0):
        mean, states = lx(per, states, step)
        jm, _, _ = exchange(J, comp.step(step), [tuple(jnp.asarray(x) for x in g) for g in per],
                            [comp.init(J, tuple(per[0]))] * 2, [make_keys(J, 3, step, w) for w in range(2)])
        assert np.array_equal(mean[0], np.asarray(jm[0])), step
        assert np.count_nonzero(mean[0]) == (1000 if step < 2 else np.count_nonzero(np.asarray(jm[0]))), step
        assert step < 2 or np.count_nonzero(mean[0]) <= 200
    assert len(lx._phases) == 2


def test_unknown_op_fails_at_lowering_naming_op_and_compressor():
    comp = user_compressor(lambda ops, x, s, k: (ops.cumsum(x), s), name="prefixsum()")
    with pytest.raises(LoweringError, match=r"prefixsum\(\).*'cumsum'"):
        check_lowerable(comp, [((8,), np.float32)])


def test_data_dependent_python_control_flow_fails_at_lowering():
    def compress(ops, x, state, keys):
        if ops.max(x) > 0:  # a traced value in a Python `if`
            return x, state
        return -x, state

    with pytest.raises(LoweringError, match=r"branchy\(\).*bool\(\)"):
        check_lowerable(user_compressor(compress, name="branchy()"), [((4,), np.float32)])


def test_host_conversion_fails_at_lowering():
    comp = user_compressor(lambda ops, x, s, k: (ops.asarray(np.asarray(x) * 2), s), name="tonumpy()")
    with pytest.raises(LoweringError, match=r"tonumpy\(\).*NumPy"):
        check_lowerable(comp, [((4,), np.float32)])


def test_gather_only_compressor_rejected_for_allreduce():
    with pytest.raises(ValueError, match="cannot run over all-reduce"):
        check_compatible("topk(ratio=0.1)", [((10,), np.float32)], "allreduce")
    check_compatible("qsgd(levels=4, bucket=0)", [((10,), np.float32)], "allgather")


def test_fast_rng_runs_and_differs_from_exact():
    """fast mode in a GPU/Ascend graph: MindSpore's RNG — same law, different bits than threefry
    (the native graph runs here on the CPU)."""
    import compressors
    comp = compressors.parse("randomk(ratio=0.2)")
    shapes = [(50,)]
    per = [[np.arange(50, dtype=np.float32) + 1.0] for _ in range(2)]
    exact = LoopbackExchange(comp, [(s, np.float32) for s in shapes], n=2, seed=0, rng="exact", device="GPU")
    fast = LoopbackExchange(comp, [(s, np.float32) for s in shapes], n=2, seed=0, rng="fast", device="GPU")
    me, _ = exact(per, exact.init(per), 0)
    mf, _ = fast(per, fast.init(per), 0)
    # shared-key draws agree across workers: both pick the same k coordinates, so exactly k are nonzero
    assert np.count_nonzero(mf[0]) == np.count_nonzero(me[0]) == 10
    assert not np.array_equal(me[0], mf[0])


def test_first_mismatch_finds_nothing_on_a_correct_program():
    prog = Program("probe")
    ops = TracingOps(prog)
    x = prog.input((9,), np.float32)
    y = ops.sum(ops.where(x > 0, x / 3.0, ops.floor(x)))
    ops.top_k(ops.abs(x), 4)
    assert y.shape == ()
    assert first_mismatch(prog, [np.linspace(-2, 2, 9).astype(np.float32)]) is None


def _cell_for(build, *inputs, device="CPU"):
    """``build``'s traced program lowered (for ``device``; it runs here either way) and its source."""
    from backends.mindspore.emit import program_cell
    prog = Program("probe")
    outs = build(TracingOps(prog), *[prog.input(x.shape, x.dtype) for x in inputs])
    c = program_cell(prog, list(outs), "probe", device=device)
    return c, open(c.source_path).read()


@pytest.mark.parametrize("dt, device", [(np.float32, "GPU"), ("bfloat16", "GPU")])
def test_top_k_writes_its_values_only_when_read(dt, device):
    """A native top_k reading only its indices gathers nothing (a dead gather is a kernel per call);
    one reading the values still gathers them. (On CPU top_k is one host kernel: the next test.)"""
    import ml_dtypes
    from backends.mindspore.lower import to_ms, to_np
    x = np.array([0.5, -3.0, 2.0, -0.25, 3.0, 0.0, -2.0, 1.0, 7.0], ml_dtypes.bfloat16 if dt == "bfloat16" else dt)
    _cell = functools.partial(_cell_for, device=device)
    idx_only, src = _cell(lambda ops, v: [ops.top_k(v, 3)[1]], x)
    assert to_np(idx_only(to_ms(x))[0]).tolist() == [8, 4, 2]
    both, src2 = _cell(lambda ops, v: list(ops.top_k(v, 3)), x)
    # (the native float bits take gathers of their own: the values are one gather more)
    assert src2.count("ops.gather(") == src.count("ops.gather(") + 1, (src, src2)
    vals, idx = both(to_ms(x))
    assert to_np(idx).tolist() == [8, 4, 2] and np.asarray(to_np(vals), np.float32).tolist() == [7.0, 3.0, 2.0]


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.uint8])
def test_top_k_on_cpu_is_the_numpy_kernel_bit_for_bit(dt):
    """On CPU top_k is one host kernel (the NumPy backend's selection; no int64 composite key),
    with NumPy's values and indices: ties to the lowest index, NaN above +inf, -0 beside +0, k = 1 .. n."""
    import backends
    from backends.mindspore.lower import to_ms, to_np
    rng = np.random.default_rng(5)
    if np.dtype(dt).kind == "f":
        x = rng.standard_normal(50).astype(dt)
        x[[3, 9, 17]] = 2.5
        x[[1, 2, 4]] = [np.nan, -np.inf, np.inf]
        x[[11, 12]] = [0.0, -0.0]
        x[40:] = 0.0
    else:
        x = rng.integers(0, 6, 50).astype(dt)       # heavy ties
    ref = backends.get("numpy")
    for k in (1, 4, 17, 50):
        c, src = _cell_for(lambda ops, v: list(ops.top_k(v, k)), x)
        assert "ops.topk" not in src and src.count("= self.topk") == 1, src
        vals, idx = (to_np(t) for t in c(to_ms(x)))
        want_v, want_i = ref.top_k(x, k)
        assert idx.tolist() == np.asarray(want_i).tolist(), (dt, k)
        assert vals.tobytes() == np.asarray(want_v).tobytes(), (dt, k)


@pytest.mark.parametrize("dt", [np.float32, np.float16, "bfloat16", np.float64])
def test_top_k_abs_is_one_top_k_and_a_k_sort_and_matches_jax(dt):
    """The fused top_k_abs lowers whole (no n-entry mask, cumsum or compaction scatter) and picks
    JAX's indices bit for bit: ties to the lowest index, NaN above inf, -0 with +0, k = 1 .. n."""
    import ml_dtypes
    from backends.mindspore.lower import to_ms, to_np
    from tests.backends.ops_backends import maybe_x64
    dtype = np.dtype(ml_dtypes.bfloat16 if dt == "bfloat16" else dt)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(40).astype(dtype)
    x[[3, 9, 17, 30]] = 2.5                       # ties among the largest
    x[[5, 21]] = -2.5
    x[[1, 2]] = [np.nan, -np.inf]
    x[[11, 12, 13]] = [0.0, -0.0, np.inf]
    x[35:] = 0.0                                  # ties at zero: k = n picks every index
    with maybe_x64(dtype):
        for k in (1, 3, 7, 12, 40):
            c, src = _cell_for(lambda ops, v: [ops.top_k_abs(v, k)], x)
            assert "cumsum" not in src and "tensor_scatter" not in src, src
            want = np.asarray(J.top_k_abs(J.asarray(x), k))
            got = to_np(c(to_ms(x))[0])
            assert got.dtype == want.dtype and got.tolist() == want.tolist(), (dtype, k, got, want)
