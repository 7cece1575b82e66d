"""The exchange protocol of :func:`compressors.exchange.exchange`, vectorised over workers.

Same semantics — for each round r every worker encodes (given what it
received in rounds < r), SUM payloads are added in rank order
((p_0 + p_1) + p_2 + ...), GATHER payloads are stacked, then every worker
decodes — but the n workers' encode and decode run as one ``jax.vmap`` over
a leading worker axis of the gradients, states and keys. What depends only
on the received values (the mean of the gathered payloads, e.g. the single
scatter of all n*k top-k pairs) is then computed once instead of n times,
and per-worker work such as top-k selection becomes one batched call.
"""
from __future__ import annotations

from typing import Any

from compressors.core import Compressor, Keys, Law


def stack_trees(trees):
    import jax
    import jax.numpy as jnp

    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)


def unstack_tree(tree, n: int) -> list:
    import jax

    return [jax.tree_util.tree_map(lambda a, i=i: a[i], tree) for i in range(n)]


def exchange_stacked(ops, comp: Compressor, grads: Any, states: Any, keys: Keys, n: int):
    """(mean estimate, new stacked states, bits per round) for stacked inputs
    (every leaf of ``grads``/``states``/``keys`` has a leading axis of size n)."""
    import jax

    one = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), grads)
    plans = comp.tree_plan(one)
    received: list[list] = []
    own: list[list] = []
    bits: list[int] = []
    for r in range(comp.n_rounds(one)):
        rec_so_far = list(received)

        def enc(g, s, k, r=r, rec=rec_so_far):
            return comp.encode(ops, g, s, k, rec, r)

        pays, states = jax.vmap(enc)(grads, states, keys)
        own.append(pays)
        rec = []
        for i, plan in enumerate(plans):
            if r >= len(plan):
                rec.append(None)
            elif plan[r].law is Law.SUM:
                rec.append(_rank_order_sum(pays[i], n))
            else:
                rec.append(pays[i])  # stacked on the worker axis: what all-gather delivers
        received.append(rec)
        bits.append(sum(p[r].bits for p in plans if r < len(p)))

    def dec(g, s, mine):
        return comp.decode(ops, g, s, mine, received, n)

    outs, states = jax.vmap(dec)(grads, states, own)
    mean = jax.tree_util.tree_map(lambda a: a[0], outs)
    return mean, states, bits


def _rank_order_sum(stacked, n: int):
    import jax

    def add(a):
        total = a[0]
        for w in range(1, n):
            total = total + a[w]
        return total

    return jax.tree_util.tree_map(add, stacked)
