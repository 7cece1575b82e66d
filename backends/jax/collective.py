"""The runner's communicator across JAX devices: one worker per device of a named axis.

Inside ``jax.shard_map`` (or ``jax.pmap``) every device along the mesh axis
``axis_name`` is one worker of the exchange. :class:`AxisCollective` is the
communicator :func:`compressors.protocol.run` calls there, as the MindSpore
``TracedCollective`` is for msrun jobs: per bucket, round and law it fuses
the bucket's payloads into one flat buffer per dtype (``protocol.fuse``) and

* SUM rounds: ``jax.lax.psum`` of each buffer (an all-reduce);
* GATHER rounds: ``jax.lax.all_gather`` of each buffer (a new leading axis of
  the n workers' payloads, in rank order);
* SCATTER rounds: ``jax.lax.all_to_all`` of each payload array's n parts;

then splits what it received back into the payload arrays. Empty buffers
are not sent.

:data:`MESH_OPS` is the JAX binding with top-k always selected on the
device: on CPU the default binding hands large top-k selections to host
code, and a ``pure_callback`` into the NumPy backend's OpenMP-parallel Numba
kernel, run by 4 devices at once inside one program, stalled the others'
collectives (XLA:CPU aborts a rendezvous after 40 s). The device selection
returns the same indices (the ops contract), so results do not change.

:func:`worker_exchange` is one device's share of a whole exchange step: its
keys are the ones every kfsim driver uses (``make_keys(seed, step, rank)``
with rank = ``lax.axis_index(axis_name)``), so n devices compute exactly
what ``compressors.exchange`` computes for the same n per-worker gradients,
states and keys in one process, when both are jitted (op by op, eagerly, a
few compressors differ in the last bit: XLA fuses their arithmetic under
jit). Bit for bit where the all-reduce adds in rank order ((p_0 + p_1) +
p_2 ..., as XLA:CPU's does); a GPU ring may add in another order, changing
the last bits of summed payloads, never of gathered ones.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
from jax import lax

from backends.jax.ops import OPS, JaxOps
from compressors import protocol
from compressors.buckets import DEFAULT_BUCKET_BYTES
from compressors.core import Compressor, make_keys
from compressors.fused import Fused


class MeshOps(JaxOps):
    """:class:`~backends.jax.ops.JaxOps` with top-k always selected on the
    device (``lax.top_k`` and the namespace's composition; no host callback)."""

    @staticmethod
    def top_k(x, k):
        v, i = lax.top_k(x, k)
        return v, i.astype(jnp.int32)

    def top_k_abs(self, x, k):
        return Fused.top_k_abs(self, x, k)


MESH_OPS = MeshOps()


class AxisCollective:
    """``comm.sum`` as ``lax.psum`` and ``comm.gather`` as ``lax.all_gather``
    over the mapped axis ``axis_name`` (call inside shard_map/pmap; one
    local worker per device). ``n`` defaults to the axis size."""

    def __init__(self, axis_name: Any, n: int | None = None):
        self.axis_name = axis_name
        self.n = int(lax.axis_size(axis_name)) if n is None else int(n)

    def _collect(self, ops, arrays: list, collective, lead: tuple) -> list:
        # LOOP workers with one local worker: per payload array, a list of one
        bufs, segs = protocol.fuse(ops, [a[0] for a in arrays])
        got = [collective(b) if b.size else ops.zeros(lead + (0,), b.dtype) for b in bufs]
        return protocol.split(ops, got, segs, lead)

    def sum(self, ops, arrays: list) -> list:
        return self._collect(ops, arrays, lambda b: lax.psum(b, self.axis_name), ())

    def gather(self, ops, arrays: list) -> list:
        return self._collect(ops, arrays, lambda b: lax.all_gather(b, self.axis_name), (self.n,))

    def scatter(self, ops, arrays: list) -> list:
        """SCATTER rounds: ``lax.all_to_all`` of each payload array cut into its n parts
        (``protocol.scatter_parts``), row i of what arrives being rank i's part for this one."""
        out = []
        for (a,) in arrays:
            parts = ops.stack(protocol.scatter_parts(ops, a, self.n))   # (n, S, ...)
            out.append([lax.all_to_all(parts, self.axis_name, 0, 0) if parts.size else parts])
        return out


class Exchanged(NamedTuple):
    mean: Any      # the mean-gradient estimate (the same on every device)
    state: Any     # this device's new compressor state
    plan: Any      # the static ExchangePlan (buckets, collectives, bits)


def worker_exchange(comp: Compressor, grads: Any, state: Any, step: Any, *, axis_name: Any = None,
                    seed: int = 0, bucket_bytes: float = DEFAULT_BUCKET_BYTES) -> Exchanged:
    """One exchange step of ``comp`` for this device's worker.

    ``grads``/``state`` are this worker's gradient pytree and compressor
    state; ``step`` (an int or a traced scalar) picks the keys,
    ``make_keys(OPS, seed, step, rank)``. With ``axis_name`` the workers are
    the devices along that mapped axis (rank = ``lax.axis_index``); with
    None, a single worker of rank 0 (compress then decompress, n = 1).
    ``comp`` must be unscheduled (``comp.step(t)`` of a scheduled one).
    """
    if axis_name is None:
        ops, comm, rank = OPS, protocol.Loopback(1), 0
    else:
        ops, comm, rank = MESH_OPS, AxisCollective(axis_name), lax.axis_index(axis_name)
    keys = make_keys(ops, seed, step, rank)
    res = protocol.run(ops, comp, [grads], [state], [keys], comm, bucket_bytes=bucket_bytes)
    return Exchanged(res.mean, res.states[0], res.plan)
