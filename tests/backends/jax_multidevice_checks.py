"""The multi-device checks of ``tests/backends/test_jax_multidevice.py``, run in a child process.

The host device count is fixed when JAX initialises, so these run as
``python -m tests.backends.jax_multidevice_checks`` with
``XLA_FLAGS=--xla_force_host_platform_device_count=4`` (set by the test).
Each check returns nothing or raises; ``main`` prints one JSON object,
check name -> "ok" or the failure's traceback.

The reference is the simulated n-worker exchange: ``compressors.exchange``
(the runner with the in-process loopback) over the same per-worker
gradients, states and keys, jitted as simulated training runs it. (Eager,
op by op, a few compressors differ from any jitted program in the last
bit: XLA fuses their arithmetic under jit.)
"""
from __future__ import annotations

import json
import traceback

import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec as P

import compressors as C
from backends.jax.data_parallel import data_parallel_step, per_device, replicate, shard_batch
from backends.jax.ops import OPS
from backends.jax.transform import CompressState, kfsim_compress
from tests.backends.ops_backends import assert_same_bits

N = 4
SEED = 3
STEPS = 2
# a SUM law, EF around a GATHER law (with a leaf large enough for the CPU
# host top-k path), stochastic GATHER (worker keys), two SUM rounds with
# state, GATHER of sign bits, SUM with the shared key, all-to-all then a shard all-gather
SPECS = ["none()", "ef(topk(ratio=0.1))", "int8()", "powersgd(rank=2)", "signsgd()", "randomk(ratio=0.2)",
         "doublesqueeze(block=64)"]


def grads_for(worker: int, big: bool = False) -> dict:
    """A gradient pytree with a matrix, a vector, a scalar and an empty leaf."""
    rng = np.random.default_rng(worker)
    tree = {"w": rng.standard_normal((16, 12)), "b": rng.standard_normal(12), "s": np.asarray(rng.standard_normal()),
            "e": np.zeros((0,))}
    if big:
        tree["big"] = rng.standard_normal((200, 180))  # 36000 >= the host top-k threshold
    return {k: jnp.asarray(np.asarray(v, np.float32)) for k, v in tree.items()}


def mesh():
    return jax.make_mesh((N,), ("dp",))


def stack(trees):
    return jtu.tree_map(lambda *xs: jnp.stack(xs), *trees)


def squeeze(tree):
    return jtu.tree_map(lambda a: a[0], tree)


def expand(tree):
    return jtu.tree_map(lambda a: a[None], tree)


def row(tree, w: int):
    return jtu.tree_map(lambda a: np.asarray(a)[w], tree)


def assert_trees_same(got, want, where: str) -> None:
    g, gd = jtu.tree_flatten(got)
    w, wd = jtu.tree_flatten(want)
    assert gd == wd, f"{where}: structure {gd} vs {wd}"
    for i, (a, b) in enumerate(zip(g, w)):
        assert_same_bits(np.asarray(a), np.asarray(b), f"{where} leaf {i}")


def reference_exchange(comp):
    """The jitted simulated exchange: (grads list, states list, step) -> (mean, states)."""

    def ex(grads, states, step):
        keys = [C.make_keys(OPS, SEED, step, r) for r in range(len(grads))]
        mean, new, _ = C.exchange(OPS, comp, grads, states, keys)
        return mean, new

    return jax.jit(ex)


def check_exchange(spec: str) -> None:
    """kfsim_compress(axis_name="dp") under shard_map on 4 devices == the simulated 4-worker exchange."""
    comp = C.parse(spec)
    big = "topk" in spec
    m = mesh()
    tx = kfsim_compress(comp, axis_name="dp", seed=SEED)
    state = per_device(tx.init(grads_for(0, big)), m)
    step = jax.jit(jax.shard_map(lambda g, s: expand(tx.update(squeeze(g), squeeze(s))), mesh=m,
                                 in_specs=(P("dp"), P("dp")), out_specs=(P("dp"), P("dp"))))
    ref = reference_exchange(comp)
    ref_states = [comp.init(OPS, grads_for(0, big)) for _ in range(N)]
    for t in range(STEPS):
        grads = [grads_for(10 * t + w, big) for w in range(N)]
        mean, state = step(jax.device_put(stack(grads), NamedSharding(m, P("dp"))), state)
        want, ref_states = ref(grads, ref_states, t)
        for w in range(N):
            assert_trees_same(row(mean, w), want, f"{spec} step {t} device {w} mean")
            assert_trees_same(row(state.compressor, w), ref_states[w], f"{spec} step {t} device {w} state")
        assert np.all(np.asarray(state.step) == t + 1)


def check_pmap() -> None:
    """The same transformation inside jax.pmap (stochastic int8: per-rank keys)."""
    comp = C.parse("int8()")
    tx = kfsim_compress(comp, axis_name="dp", seed=SEED)
    state = stack([tx.init(grads_for(0))] * N)
    step = jax.pmap(tx.update, axis_name="dp")
    ref = reference_exchange(comp)
    ref_states = [comp.init(OPS, grads_for(0)) for _ in range(N)]
    for t in range(STEPS):
        grads = [grads_for(20 + 10 * t + w) for w in range(N)]
        mean, state = step(stack(grads), state)
        want, ref_states = ref(grads, ref_states, t)
        for w in range(N):
            assert_trees_same(row(mean, w), want, f"pmap step {t} device {w} mean")
            assert_trees_same(row(state.compressor, w), ref_states[w], f"pmap step {t} device {w} state")


def check_single_worker() -> None:
    """axis_name=None: one worker's compress→decompress == compressors.roundtrip (rank 0)."""
    comp = C.parse("ef(topk(ratio=0.1))")
    tx = kfsim_compress(comp, seed=SEED)
    state = tx.init(grads_for(0))
    assert isinstance(state, CompressState) and int(state.step) == 0
    update = jax.jit(tx.update)
    ref = jax.jit(lambda g, s, t: C.roundtrip(OPS, comp, g, s, C.make_keys(OPS, SEED, t, 0)))
    ref_state = comp.init(OPS, grads_for(0))
    for t in range(STEPS):
        g = grads_for(t)
        out, state = update(g, state)
        want, ref_state = ref(g, ref_state, t)
        assert_trees_same(out, want, f"roundtrip step {t}")
        assert_trees_same(state.compressor, ref_state, f"roundtrip state {t}")


def check_edge_trees() -> None:
    """An empty pytree, and one of only scalar and empty leaves, across 4 devices."""
    m = mesh()
    for tree in ({}, {"s": jnp.float32(1.5), "e": jnp.zeros((0, 3), jnp.float32)}):
        for spec in ("ef(topk(ratio=0.5))", "int8()"):
            comp = C.parse(spec)
            tx = kfsim_compress(comp, axis_name="dp", seed=SEED)
            state = per_device(tx.init(tree), m)
            grads = [jtu.tree_map(lambda a, w=w: a * (w + 1), tree) for w in range(N)]
            fn = jax.jit(jax.shard_map(lambda g, s: expand(tx.update(squeeze(g), squeeze(s))), mesh=m,
                                       in_specs=(P("dp"), P("dp")), out_specs=(P("dp"), P("dp"))))
            mean, state = fn(jax.device_put(stack(grads), NamedSharding(m, P("dp"))), state)
            want, ref_states = reference_exchange(comp)(grads, [comp.init(OPS, tree)] * N, 0)
            for w in range(N):
                assert_trees_same(row(mean, w), want, f"{spec} on {list(tree)} device {w}")
                assert_trees_same(row(state.compressor, w), ref_states[w], f"{spec} on {list(tree)} state {w}")


def check_training() -> None:
    """optax.chain(kfsim_compress, sgd) trains a tiny model with data_parallel_step;
    its parameters equal the simulated 4-worker run's (per-worker gradients,
    the loopback exchange, the same sgd) after every step, and the loss falls."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = (x @ rng.standard_normal((8, 1)) + 0.5).astype(np.float32)
    params = {"w": jnp.zeros((8, 1), jnp.float32), "b": jnp.zeros((1,), jnp.float32)}

    def loss_fn(p, batch):
        bx, by = batch
        return jnp.mean((bx @ p["w"] + p["b"] - by) ** 2)

    comp = C.parse("ef(topk(ratio=0.25))")
    m = mesh()
    tx = optax.chain(kfsim_compress(comp, axis_name="dp", seed=SEED), optax.sgd(0.1))
    step = data_parallel_step(loss_fn, tx, m)
    p, s = replicate(params, m), per_device(tx.init(params), m)
    batch = shard_batch((x, y), m)

    sgd = optax.sgd(0.1)
    b = len(x) // N

    @jax.jit
    def simulated(p, sgd_state, states, t):
        grads = [jax.grad(loss_fn)(p, (x[r * b:(r + 1) * b], y[r * b:(r + 1) * b])) for r in range(N)]
        keys = [C.make_keys(OPS, SEED, t, r) for r in range(N)]
        mean, states, _ = C.exchange(OPS, comp, grads, states, keys)
        upd, sgd_state = sgd.update(mean, sgd_state, p)
        return optax.apply_updates(p, upd), sgd_state, states

    rp, rs, rstates = params, sgd.init(params), [comp.init(OPS, params)] * N
    losses = []
    for t in range(5):
        p, s, loss = step(p, s, batch)
        losses.append(float(loss))
        rp, rs, rstates = simulated(rp, rs, rstates, t)
        assert_trees_same(jtu.tree_map(np.asarray, p), rp, f"params after step {t}")
    assert losses[-1] < 0.8 * losses[0], losses


CHECKS = {f"exchange {s}": (lambda s=s: check_exchange(s)) for s in SPECS}
CHECKS.update({"pmap": check_pmap, "single worker": check_single_worker, "edge trees": check_edge_trees,
               "training": check_training})


def main() -> None:
    assert jax.device_count() == N, f"{jax.device_count()} devices; set XLA_FLAGS before JAX starts"
    out = {}
    for name, check in CHECKS.items():
        try:
            check()
            out[name] = "ok"
        except Exception:  # report every check, not just the first failure
            out[name] = traceback.format_exc()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
