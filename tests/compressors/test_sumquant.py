"""Summable quantization (``sumquant``) and the MAX aggregation law it needs."""
from __future__ import annotations

import numpy as np
import pytest

import compressors
from backends.jax.ops import OPS as JX
from backends.numpy.ops import OPS as NP
from compressors import protocol
from compressors.core import Law, make_keys
from compressors.sumquant import container


def _exchange(ops, spec, grads, seed=0, step=0, comm=None):
    comp = compressors.parse(spec)
    states = [comp.init(ops, g) for g in grads]
    keys = [make_keys(ops, seed, step, r) for r in range(len(grads))]
    res = protocol.run(ops, comp, grads, states, keys, comm)
    return res


def _workers(n, shape=(1000,), scale=1.0, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape) * scale).astype(dtype) for _ in range(n)]


@pytest.mark.parametrize("bits,workers,dtype", [(4, 16, np.int8), (2, 127, np.int8), (2, 128, np.int16),
                                                (8, 16, np.int16), (8, 258, np.int16), (8, 259, np.int32)])
def test_container_is_the_smallest_with_headroom(bits, workers, dtype):
    assert container(bits, workers) == np.dtype(dtype)
    top = workers * (2 ** (bits - 1) - 1)
    assert top <= np.iinfo(dtype).max


def test_plan_states_scales_codes_and_headroom():
    comp = compressors.parse("sumquant(bits=4, workers=16, bucket=512)")
    plan = comp.plan((1025,))
    assert [r.law for r in plan] == [Law.MAX, Law.SUM]
    assert plan[0].bits == 3 * 32 and plan[1].bits == 1025 * 8
    assert plan[1].max_workers == 16
    ex = comp.exchange_plan({"a": np.zeros(1025, np.float32)})
    assert ex.payload_bits == 3 * 32 + 1025 * 8
    ex.check_workers(16)
    with pytest.raises(ValueError, match="at most 16 workers, the exchange has 17"):
        ex.check_workers(17)
    assert compressors.parse("sumquant(bits=8, workers=16)").plan((10,))[1].bits == 160


@pytest.mark.parametrize("bad", ["sumquant(bits=1)", "sumquant(bits=9)", "sumquant(workers=0)",
                                 "sumquant(bits=8, workers=20000000)", "sumquant(bucket=-1)"])
def test_bad_parameters_are_one_clear_error(bad):
    with pytest.raises(ValueError, match="sumquant"):
        compressors.parse(bad)


@pytest.mark.parametrize("ops", [NP, JX], ids=["numpy", "jax"])
def test_more_workers_than_headroom_is_refused(ops):
    with pytest.raises(ValueError, match="at most 4 workers"):
        _exchange(ops, "sumquant(workers=4)", _workers(5, (16,)))


def test_unbiased_and_close():
    n, T = 4, 400
    grads = _workers(n, (300,))
    true = sum(grads) / n
    acc = np.zeros_like(true, dtype=np.float64)
    for t in range(T):
        acc += np.asarray(_exchange(NP, "sumquant(bits=4, workers=4, bucket=64)", grads, step=t).mean)
    # one draw's error per entry is ≤ M/(n L) per worker code; the mean of T draws shrinks as 1/sqrt(T)
    M = max(np.abs(g).max() for g in grads)
    assert np.abs(acc / T - true).max() < 4 * (M / 7) / np.sqrt(n * T)
    one = np.asarray(_exchange(NP, "sumquant(bits=8, workers=4, bucket=64)", grads).mean)
    assert np.abs(one - true).max() <= M / 127 + 1e-6


def test_integer_sum_cannot_overflow_at_full_headroom():
    """16 workers all at the bucket maximum: codes +L each, the int8 sum 16·7 = 112 fits."""
    grads = [np.full(64, 3.0, np.float32) for _ in range(16)]
    grads[0][5] = -3.0
    res = _exchange(NP, "sumquant(bits=4, workers=16, bucket=64)", grads, comm=protocol.Loopback(16))
    mean = np.asarray(res.mean)
    assert mean[0] == np.float32(3.0)
    np.testing.assert_allclose(mean[5], 3.0 * 14 / 16, rtol=1e-6)


@pytest.mark.parametrize("ops", [NP, JX], ids=["numpy", "jax"])
def test_edges(ops):
    spec = "sumquant(bits=4, workers=8, bucket=16)"
    zero = [np.zeros((33,), np.float32)] * 3
    assert not np.asarray(_exchange(ops, spec, zero).mean).any()
    empty = _exchange(ops, spec, [np.zeros((0,), np.float32)] * 3).mean
    assert np.asarray(empty).shape == (0,)
    scalar = np.asarray(_exchange(ops, spec, [np.float32(2.5)] * 3).mean)
    assert scalar.shape == () and scalar == np.float32(2.5)        # |x| = M: code L, exact
    huge = _workers(3, (40,), 1e38)
    out = np.asarray(_exchange(ops, spec, huge).mean)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, sum(g.astype(np.float64) for g in huge) / 3,
                               atol=3.4e38 / 7)
    tiny = _workers(3, (40,), 1e-38)
    assert np.isfinite(np.asarray(_exchange(ops, spec, tiny).mean)).all()


@pytest.mark.parametrize("ops", [NP, JX], ids=["numpy", "jax"])
def test_nan_poisons_only_its_bucket_on_every_worker(ops):
    grads = _workers(3, (48,))
    grads[1][20] = np.nan
    mean = np.asarray(_exchange(ops, "sumquant(bits=4, workers=8, bucket=16)", grads).mean)
    assert np.isnan(mean[16:32]).all() and np.isfinite(mean[:16]).all() and np.isfinite(mean[32:]).all()


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_dtypes_keep_their_dtype(dtype):
    grads = _workers(2, (50,), dtype=dtype)
    import jax
    a = np.asarray(_exchange(NP, "sumquant(bits=8, workers=2)", grads).mean)
    with jax.enable_x64(True):                    # JAX holds float64 only with x64 on
        b = np.asarray(_exchange(JX, "sumquant(bits=8, workers=2)", grads).mean)
    assert a.dtype == dtype and b.dtype == dtype
    np.testing.assert_array_equal(a, b)


class _NoMax:
    """A communicator without ``max``: the runner serves MAX rounds by gather + max."""

    def __init__(self, n):
        self.inner = protocol.Loopback(n)
        self.n = n

    def sum(self, ops, arrays):
        return self.inner.sum(ops, arrays)

    def gather(self, ops, arrays):
        return self.inner.gather(ops, arrays)


def test_max_law_loopback_stacked_and_fallback_agree():
    grads = _workers(3, (70,))
    grads[2][3] = np.nan
    ref = np.asarray(_exchange(NP, "sumquant(workers=4, bucket=8)", grads).mean)
    fb = np.asarray(_exchange(NP, "sumquant(workers=4, bucket=8)", grads, comm=_NoMax(3)).mean)
    np.testing.assert_array_equal(ref, fb)
    import jax
    import jax.numpy as jnp
    comp = compressors.parse("sumquant(workers=4, bucket=8)")
    stack = lambda trees: jax.tree_util.tree_map(lambda *a: jnp.stack(a), *trees)  # noqa: E731
    keys = [make_keys(JX, 0, 0, r) for r in range(3)]
    states = stack([comp.init(JX, g) for g in grads]) or ()
    loop = np.asarray(protocol.run(JX, comp, list(grads), [()] * 3, keys).mean)
    vm = np.asarray(protocol.run(JX, comp, jnp.stack(grads), states, stack(keys), workers=protocol.VMAP).mean)
    np.testing.assert_array_equal(loop, ref)
    np.testing.assert_array_equal(np.isnan(vm), np.isnan(ref))
    np.testing.assert_allclose(vm, ref, rtol=0, atol=1e-6)


def test_simulator_prices_it_and_refuses_beyond_headroom():
    """Seed scenario (BERT-large, 16 workers, 1 Gbit/s): ahead of fp16; 32 workers refused; NaN in a sweep."""
    from kfsim import catalog
    from kfsim.sim.predict import predict_iteration
    from kfsim.sim.sweep import sweep_grid
    cl = catalog.seed_cluster()
    cl = cl._replace(inter=cl.inter._replace(bandwidth=1e9 / 8))
    sq = predict_iteration("bert-large", cl, "sumquant(bits=4, workers=16)", 16).total_s
    fp16 = predict_iteration("bert-large", cl, "fp16()", 16).total_s
    assert sq < fp16
    with pytest.raises(ValueError, match="at most 16 workers"):
        predict_iteration("bert-large", cl, "sumquant(bits=4, workers=16)", 32)
    grid = sweep_grid("bert-large", cl, ["sumquant(bits=4, workers=16)"], [8, 16, 32])[0, 0, 0]
    assert np.isfinite(grid[:2]).all() and np.isnan(grid[2])
    np.testing.assert_allclose(grid[1], sq, rtol=1e-12)
