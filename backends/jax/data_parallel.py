"""A multi-device JAX data-parallel training step with a compressed gradient exchange.

Each device of a 1-D mesh axis (``"dp"``) is one worker: it computes the
gradient of its shard of the batch, and an optax chain that starts with
:func:`backends.jax.transform.kfsim_compress` (``axis_name="dp"``) exchanges
it (SUM rounds by ``lax.psum``, GATHER rounds by ``lax.all_gather``), so
every device applies the same mean-gradient estimate::

    mesh = jax.make_mesh((jax.device_count(),), ("dp",))
    tx = optax.chain(kfsim_compress("ef(topk(ratio=0.01))", axis_name="dp"), optax.sgd(0.1))
    step = data_parallel_step(loss_fn, tx, mesh)
    params, opt_state = replicate(params, mesh), per_device(tx.init(params), mesh)
    params, opt_state, loss = step(params, opt_state, shard_batch(batch, mesh))

Layouts (``jax.shard_map`` over the mesh):

* params: replicated (``P()``) in and out — every device applies the same
  mean, so they stay equal;
* optimizer state: per device, a leading axis of the device count sharded
  over ``"dp"`` (``P("dp")``) — compressor state such as EF residuals is each
  worker's own;
* batch: every leaf's leading axis split over the devices (``P("dp")``):
  device r gets the r-th contiguous block;
* loss: the mean of the devices' losses (``lax.pmean``).

On CPU, ``XLA_FLAGS=--xla_force_host_platform_device_count=4`` (set before
JAX initialises) gives four host devices to try it on.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import optax
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P

AXIS = "dp"


def replicate(tree: Any, mesh) -> Any:
    """``tree`` placed whole on every device of ``mesh``."""
    return jax.device_put(tree, NamedSharding(mesh, P()))


def per_device(tree: Any, mesh, axis_name: str = AXIS) -> Any:
    """One copy of ``tree`` per device of the axis: every leaf gets a leading
    axis of the axis size, sharded over ``axis_name`` (device r holds copy r)."""
    n = mesh.shape[axis_name]
    # built in place (each device writes its own copy), never whole on one device
    spread = jax.jit(lambda t: jtu.tree_map(lambda a: jnp.broadcast_to(a, (n,) + jnp.shape(a)), t),
                     out_shardings=NamedSharding(mesh, P(axis_name)))
    return spread(tree)


def shard_batch(batch: Any, mesh, axis_name: str = AXIS) -> Any:
    """A global batch split over the axis on every leaf's leading axis."""
    return jax.device_put(batch, NamedSharding(mesh, P(axis_name)))


def data_parallel_step(loss_fn: Callable[[Any, Any], Any], tx: optax.GradientTransformation, mesh,
                       axis_name: str = AXIS) -> Callable:
    """A jitted ``step(params, opt_state, batch) -> (params, opt_state, loss)``.

    ``loss_fn(params, local_batch)`` is one device's scalar loss; ``tx`` an
    optax transformation whose compression step exchanges over
    ``axis_name`` (``kfsim_compress(..., axis_name=axis_name)``). Layouts:
    see the module docstring (params replicated, ``opt_state`` from
    :func:`per_device`, ``batch`` from :func:`shard_batch`).
    """

    def body(params, opt_state, batch):
        state = jtu.tree_map(lambda a: a[0], opt_state)
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, state = tx.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        return params, jtu.tree_map(lambda a: a[None], state), lax.pmean(loss, axis_name)

    # check_vma off: the decoded mean is equal on every device (the protocol's
    # contract), though computed from per-device state, so params leave as P()
    mapped = jax.shard_map(body, mesh=mesh, in_specs=(P(), P(axis_name), P(axis_name)),
                           out_specs=(P(), P(axis_name), P()), check_vma=False)
    return jax.jit(mapped)
