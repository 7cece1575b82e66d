"""kfsim compressors as an optax ``GradientTransformation``.

One line in an optax chain compresses the gradients (and, inside
``shard_map``/``pmap``, exchanges them across the devices of a mesh axis)
before the optimizer sees them::

    tx = optax.chain(kfsim_compress("ef(topk(ratio=0.01))", axis_name="dp"), optax.sgd(0.1))

``update`` replaces the gradients by the compressor's mean-gradient estimate:

* ``axis_name=None``: a single worker's round trip (compress, then
  decompress; n = 1) — error-feedback experiments on one device;
* ``axis_name="dp"`` (called inside ``shard_map``/``pmap`` over that axis):
  each device is one worker; SUM rounds go through ``lax.psum``, GATHER
  rounds through ``lax.all_gather`` (:mod:`backends.jax.collective`), and
  every device gets the same mean, as :func:`compressors.exchange` computes
  it for the same per-worker gradients.

The state is :class:`CompressState`: the compressor's per-leaf named state
(``EFState(inner, residual)``, ``PowerSGDState(q)``, ``()``) and the step
counter that, with ``seed``, gives each exchange its keys
(``make_keys(seed, step, rank)``, as every kfsim driver). Under ``shard_map``
the state is per device (EF residuals differ between workers): hold it with
a leading device axis (:func:`backends.jax.data_parallel.per_device`).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import optax

from backends.jax.collective import worker_exchange
from backends.jax.ops import OPS
from compressors import parse
from compressors.buckets import DEFAULT_BUCKET_BYTES
from compressors.core import Compressor


class CompressState(NamedTuple):
    """The state of :func:`kfsim_compress`."""

    compressor: Any   # per leaf, the compressor's state (a NamedTuple or ())
    step: Any         # int32 scalar: exchanges done; the next one's keys are make_keys(seed, step, rank)


def kfsim_compress(compressor: Compressor | str, axis_name: Any = None, *, seed: int = 0,
                   bucket_bytes: float = DEFAULT_BUCKET_BYTES) -> optax.GradientTransformation:
    """An optax transformation that replaces gradients by ``compressor``'s
    mean-gradient estimate (a Compressor, or a spec string parsed here, once).

    ``axis_name``: None for one worker's compress→decompress round trip, or
    the mapped axis (shard_map/pmap) whose devices are the workers.
    ``seed``: the keys' seed; ``bucket_bytes``: the DDP bucket cap that
    groups the payloads into collectives.
    """
    comp = parse(compressor)
    if comp.at is not None:
        raise ValueError(f"kfsim_compress: {comp.spec} is scheduled (its payloads change with the step); "
                         f"pass the compressor of one phase, e.g. comp.step(t)")

    def init(params):
        return CompressState(comp.init(OPS, params), jnp.zeros((), jnp.int32))

    def update(updates, state, params=None):
        del params
        out = worker_exchange(comp, updates, state.compressor, state.step, axis_name=axis_name,
                              seed=seed, bucket_bytes=bucket_bytes)
        return out.mean, CompressState(out.state, state.step + 1)

    return optax.GradientTransformation(init, update)
