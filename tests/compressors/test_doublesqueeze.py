"""doublesqueeze: the error-compensated compressed all-reduce, and the SCATTER law under it.

* the all-to-all delivers to worker j part j of every worker's payload (zero-padded parts);
* conservation (float64): Σ_t mean_t = Σ_t x̄_t − mean_i e_i − ε (the worker errors and the
  shard servers' errors, in global order) — nothing is lost, at any n, with uneven shards;
* loop and vmap agree bit for bit; jit agrees to rounding (XLA fuses the arithmetic);
* edges: 1e±38 gradients decode finite, non-finite ones NaN; a communicator without an
  all-to-all is refused with one clear error.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import backends
import compressors as C
from compressors import protocol
from compressors.doublesqueeze import grid

NP = backends.get("numpy")
JX = backends.get("jax")


def test_all_to_all_parts_and_padding():
    n = 3
    sent = [np.arange(7 * 2).reshape(7, 2) + 100 * w for w in range(n)]    # 7 rows → parts of 3, last padded
    got = protocol.Loopback(n).scatter(NP, [sent])[0]
    assert protocol.shard_rows(7, n) == 3 and len(got) == n
    for j in range(n):
        assert got[j].shape == (n, 3, 2)
        for i in range(n):
            want = np.zeros((3, 2), sent[i].dtype)
            rows = sent[i][3 * j:3 * j + 3]
            want[:len(rows)] = rows
            np.testing.assert_array_equal(got[j][i], want)
    stacked = protocol.StackedLoopback(n).scatter(NP, [np.stack(sent)])[0]
    np.testing.assert_array_equal(stacked, np.stack(got))


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_error_compensation_conserves_the_sum(n):
    block = 64
    shape = (23, 13)                                    # 299 entries: 5 blocks, uneven shards for n = 2, 3
    comp = C.parse(f"doublesqueeze(block={block})")
    rng = np.random.default_rng(n)
    states = [comp.init(NP, {"x": np.zeros(shape)}) for _ in range(n)]
    total_mean, total_true = 0.0, 0.0
    for step in range(6):
        grads = [{"x": rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 3)} for _ in range(n)]
        keys = [C.make_keys(NP, 0, step, w) for w in range(n)]
        mean, states, _ = C.exchange(NP, comp, grads, states, keys)
        total_mean = total_mean + np.asarray(mean["x"])
        total_true = total_true + np.mean([g["x"] for g in grads], axis=0)
    d = int(np.prod(shape))
    B, L = grid(d, block)
    S = protocol.shard_rows(B, n)
    worker = np.mean([np.asarray(s["x"].worker) for s in states], axis=0)
    k = int(np.ceil(np.log2(L) / 2))      # the server error is kept times 2^-k
    server = np.concatenate([np.asarray(s["x"].server)[:S * L] for s in states])[:d].reshape(shape) * 2.0**k
    np.testing.assert_allclose(total_mean + worker + server, total_true, rtol=1e-9, atol=1e-9)
    assert np.abs(total_mean - total_true).max() > 1e-6        # it does compress


def test_loop_vmap_and_jit_agree():
    comp = C.parse("doublesqueeze(block=32)")
    n = 3
    rng = np.random.default_rng(0)
    grads = [{"w": jnp.asarray(rng.standard_normal((9, 11)), jnp.float32),
              "s": jnp.asarray(rng.standard_normal(), jnp.float32)} for _ in range(n)]
    states = [comp.init(JX, g) for g in grads]
    keys = [C.make_keys(JX, 0, 0, w) for w in range(n)]
    loop = protocol.run(JX, comp, grads, states, keys)
    stack = lambda xs: jax.tree_util.tree_map(lambda *a: jnp.stack(a), *xs)   # noqa: E731
    vm = protocol.run(JX, comp, stack(grads), stack(states), stack(keys), workers=protocol.VMAP)
    jit = jax.jit(lambda g, s, k: protocol.run(JX, comp, g, s, k, workers=protocol.VMAP).mean)
    for name in ("w", "s"):
        np.testing.assert_array_equal(np.asarray(loop.mean[name]), np.asarray(vm.mean[name]))
        np.testing.assert_allclose(np.asarray(loop.mean[name]), np.asarray(jit(stack(grads), stack(states),
                                                                               stack(keys))[name]), rtol=1e-6)
    for w in range(n):
        np.testing.assert_array_equal(np.asarray(loop.states[w]["w"].server),
                                      np.asarray(vm.states["w"].server[w]))


@pytest.mark.parametrize("scale", [1e38, 1e-38, 3e-45])
def test_extreme_magnitudes_decode_finite(scale):
    comp = C.parse("doublesqueeze(block=64)")
    grads = [{"x": (np.random.default_rng(w).standard_normal(200) * scale).astype(np.float32)} for w in range(2)]
    states = [comp.init(NP, g) for g in grads]
    mean, states, _ = C.exchange(NP, comp, grads, states, [C.make_keys(NP, 0, 0, w) for w in range(2)])
    out = np.asarray(mean["x"], np.float64)
    biggest = np.abs(np.stack([g["x"] for g in grads]).astype(np.float64)).max()
    assert np.isfinite(out).all() and np.abs(out).max() <= 2 * biggest
    if scale > 1e-40:   # not all subnormal: the scales survive the 2^-k pre-scaling
        assert np.abs(out).max() > 0


def test_non_finite_gradient_is_not_hidden():
    comp = C.parse("doublesqueeze(block=32)")
    grads = [{"x": np.ones(100, np.float32)} for _ in range(2)]
    grads[1]["x"][40] = np.inf
    states = [comp.init(NP, g) for g in grads]
    mean, _, _ = C.exchange(NP, comp, grads, states, [C.make_keys(NP, 0, 0, w) for w in range(2)])
    out = np.asarray(mean["x"])
    assert np.isnan(out[32:64]).all() and np.isfinite(out[:32]).all()


def test_communicator_without_all_to_all_is_refused():
    class SumGatherOnly:
        n = 2

        def sum(self, ops, arrays):
            return [a[0] for a in arrays]

        def gather(self, ops, arrays):
            return [ops.stack([a[0]] * 2) for a in arrays]

    comp = C.parse("doublesqueeze()")
    g = {"x": np.ones(10, np.float32)}
    with pytest.raises(ValueError, match="all-to-all .*SumGatherOnly has no scatter"):
        protocol.run(NP, comp, [g], [comp.init(NP, g)], [C.make_keys(NP, 0, 0)], SumGatherOnly())


@pytest.mark.parametrize("bad", ["doublesqueeze(block=48)", "doublesqueeze(block=0)", "doublesqueeze(block=True)"])
def test_bad_block_is_one_clear_error(bad):
    with pytest.raises(ValueError, match="block must be a multiple of 32"):
        C.parse(bad)


def test_plan_is_one_bit_per_entry_plus_block_scales():
    comp = C.parse("doublesqueeze(block=2048)")
    (a2a, shard) = comp.plan((5000,))
    assert a2a.law is C.Law.SCATTER and shard.law is C.Law.GATHER and shard.shard and not a2a.shard
    assert a2a.bits == shard.bits == 3 * (2048 + 32)
    assert comp.plan(())[0].bits == 32 + 32 and comp.plan((0,)) == ()
