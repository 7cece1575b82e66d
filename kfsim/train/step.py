"""One synchronous data-parallel iteration of N simulated workers, jitted whole.

Worker r of n computes its gradient on samples ``[r::n]`` of the global batch
(the convention every kfsim driver shares), g_r = grad L(w; batch[r::n]).
The compressed exchange is the runner, :func:`compressors.protocol.run`, with
the in-process loopback: for each round every worker encodes, payloads
combine by the leaf's law (SUM: added in rank order; GATHER: stacked), and
every worker decodes the mean
estimate  g_hat ~ (1/n) sum_r g_r  and updates its own compressor state.
With the identity compressor g_hat = (1/n) sum_r g_r, which equals the
full-batch gradient up to float reassociation (equal shards, mean losses).

Parameter-server mode may compress the server's reply too: the server
round-trips g_hat through ``server`` (its own state, keys of rank n) and
every worker applies what it decodes.

Randomness: worker r's keys at step t are ``make_keys(ops, seed, t, r)``.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from compressors.core import Compressor, make_keys
from compressors import protocol
from compressors.exchange import roundtrip
from kfsim.train import models, optim


def shard(x, r: int, n: int):
    """Worker r's samples of a global batch: x[r::n]."""
    return x[r::n]


def worker_grads(model: str, params, x, y, n: int, mode: str = "loop"):
    """(per-worker losses, per-worker gradient dicts) for shards x[r::n].

    ``mode="loop"`` differentiates each shard separately (unrolled in the
    trace); ``"vmap"`` batches the n shards with jax.vmap."""
    import jax

    vg = jax.value_and_grad(lambda p, a, b: models.loss(model, p, a, b))
    if mode == "loop":
        out = [vg(params, shard(x, r, n), shard(y, r, n)) for r in range(n)]
        return [o[0] for o in out], [o[1] for o in out]
    if mode == "vmap":
        b = x.shape[0] // n
        xs = x.reshape((b, n) + x.shape[1:]).swapaxes(0, 1)  # xs[r] == x[r::n]
        ys = y.reshape(b, n).swapaxes(0, 1)
        ls, gs = jax.vmap(vg, in_axes=(None, 0, 0))(params, xs, ys)
        return [ls[r] for r in range(n)], [jax.tree_util.tree_map(lambda a, r=r: a[r], gs) for r in range(n)]
    raise ValueError(f"grad mode must be 'loop' or 'vmap', got {mode!r}")


def mean_loss(losses):
    total = losses[0]
    for v in losses[1:]:
        total = total + v
    return total / len(losses)


def stack_trees(trees):
    """Pytrees -> one pytree whose leaves carry a leading worker axis."""
    import jax
    import jax.numpy as jnp

    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)


def unstack_tree(tree, n: int) -> list:
    import jax

    return [jax.tree_util.tree_map(lambda a, i=i: a[i], tree) for i in range(n)]


def sync_step(model: str, comp: Compressor, n: int, ops, *, lr: float, momentum: float,
              seed: int, server: Compressor | None = None, grad_mode: str = "loop",
              exchange_mode: str = "loop") -> Callable:
    """The traceable (not yet jitted) step of :func:`make_sync_step`, for
    callers that jit it inside a larger function (one jit, not a jit in a jit)."""
    if exchange_mode not in protocol.STRATEGIES:
        raise ValueError(f"exchange mode must be one of {', '.join(protocol.STRATEGIES)}, got {exchange_mode!r}")
    workers = protocol.STRATEGIES[exchange_mode]

    def step(params, opt, states, server_state, x, y, t):
        losses, grads = worker_grads(model, params, x, y, n, grad_mode)
        keys = [make_keys(ops, seed, t, r) for r in range(n)]
        if workers is protocol.VMAP:
            grads, keys = stack_trees(grads), stack_trees(keys)
        res = protocol.run(ops, comp, grads, list(states) if workers is protocol.LOOP else states, keys,
                           workers=workers)
        mean = res.mean
        if server is not None:
            mean, server_state = roundtrip(ops, server, mean, server_state, make_keys(ops, seed, t, n))
        params, opt = optim.update(params, opt, mean, lr, momentum)
        new_states = tuple(res.states) if workers is protocol.LOOP else res.states
        return params, opt, new_states, server_state, mean_loss(losses)

    return step


def make_sync_step(model: str, comp: Compressor, n: int, ops, *, lr: float, momentum: float,
                   seed: int, server: Compressor | None = None, grad_mode: str = "loop",
                   exchange_mode: str = "loop") -> Callable:
    """A jitted ``step(params, opt, states, server_state, x, y, t) ->
    (params, opt, states, server_state, loss)``; ``states`` is a tuple of the
    n workers' compressor states (``exchange_mode="loop"``: the runner's LOOP
    workers) or one state stacked on a leading worker axis (``"vmap"``: VMAP
    workers, encode and decode batched by ``jax.vmap``); ``t`` is the
    (traced) step number."""
    import jax

    return jax.jit(sync_step(model, comp, n, ops, lr=lr, momentum=momentum, seed=seed, server=server,
                             grad_mode=grad_mode, exchange_mode=exchange_mode))


def make_worker_update(model: str, comp: Compressor, ops, *, seed: int) -> Callable:
    """Jitted ``(params, state, x, y, t, rank) -> (decoded gradient, state, loss)``
    of one worker talking alone to a parameter server (async training):
    its payloads are decoded by themselves (the n = 1 exchange)."""
    import jax

    vg = jax.value_and_grad(lambda p, a, b: models.loss(model, p, a, b))

    def upd(params, state, x, y, t, rank):
        loss, g = vg(params, x, y)
        out, state = roundtrip(ops, comp, g, state, make_keys(ops, seed, t, rank))
        return out, state, loss

    return jax.jit(upd)


@functools.lru_cache(maxsize=64)
def make_apply(lr: float, momentum: float) -> Callable:
    """Jitted ``(params, opt, grad, weight) -> (params, opt)``."""
    import jax

    return jax.jit(lambda p, o, g, w: optim.update(p, o, g, lr, momentum, w))


@functools.lru_cache(maxsize=None)
def make_eval(model: str, chunk: int = 2048) -> Callable[[Any, np.ndarray, np.ndarray], tuple[float, float]]:
    """``evaluate(params, x, y) -> (mean loss, accuracy)`` in fixed chunks."""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def part(params, x, y):
        logits = models.apply(model, params, x)
        logp = jax.nn.log_softmax(logits, axis=-1)
        nll = -jnp.sum(jnp.take_along_axis(logp, y[:, None], axis=1))
        return nll, jnp.sum(jnp.argmax(logits, axis=-1) == y)

    def evaluate(params, x, y):
        nll = correct = 0.0
        for i in range(0, len(x), chunk):
            a, b = part(params, x[i:i + chunk], y[i:i + chunk])
            nll += float(a)
            correct += float(b)
        return nll / len(x), correct / len(x)

    return evaluate
