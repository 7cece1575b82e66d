"""In-process communicators and payload fusion for the runner (:mod:`compressors.protocol`).

:class:`Loopback` (workers as lists) and :class:`StackedLoopback` (workers
stacked on a leading axis, under vmap) compute in process what a real
communicator delivers: the rank-order sum for SUM, the payloads stacked on a
new leading worker axis for GATHER, the elementwise maximum for MAX, and for
SCATTER (an all-to-all) each worker its own part of every worker's payload.

A SCATTER payload array is split along axis 0 into n parts of
:func:`shard_rows` rows, part j for rank j (the last parts zero-padded to
that length, so every part has one shape): worker j receives, per array,
the n senders' part j stacked on a new leading axis, ``(n, S, ...)``.

:func:`fuse` and :func:`split` turn a bucket's payload arrays into one flat
buffer per dtype and back (what a communicator sends in one call).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from compressors.ops import Array, Ops


def shard_rows(rows: int, n: int) -> int:
    """Rows of each of the n parts of a SCATTER payload array of ``rows`` rows: ⌈rows/n⌉."""
    return -(-int(rows) // int(n)) if rows else 0


def scatter_parts(ops: Ops, a: Array, n: int) -> list:
    """One worker's SCATTER payload array as its n parts along axis 0 (part j for rank j),
    zero-padded to n · :func:`shard_rows` rows."""
    rows = int(a.shape[0])
    S = shard_rows(rows, n)
    if n * S > rows:
        a = ops.concatenate([a, ops.zeros((n * S - rows,) + tuple(a.shape[1:]), a.dtype)], axis=0)
    return [a[j * S:(j + 1) * S] for j in range(n)]


def all_to_all(ops: Ops, senders: Sequence, n: int) -> list:
    """What each of the n workers receives of one SCATTER payload array sent by ``senders``
    (the n workers' arrays, rank order): the senders' part j stacked, for j = 0 .. n-1."""
    parts = [scatter_parts(ops, a, n) for a in senders]
    return [ops.stack([parts[i][j] for i in range(n)]) for j in range(n)]


# ---------------------------------------------------------------------------------------------
# In-process communicators
# ---------------------------------------------------------------------------------------------

def rank_order_sum(values: Sequence) -> Any:
    """((v_0 + v_1) + v_2) + ...: the order every backend and collective must match."""
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total


def gather_max(ops: Ops, comm, arrays: list) -> list:
    """A MAX round through ``comm.max``, or as a gather and a maximum over the
    worker axis where the communicator has no ``max`` (the maximum is exact
    in any order)."""
    if hasattr(comm, "max"):
        return comm.max(ops, arrays)
    return [ops.max(g, axis=0) if g.size else g[0] for g in comm.gather(ops, arrays)]


class Loopback:
    """All n workers in this process, held as lists (the reference semantics)."""

    def __init__(self, n: int):
        self.n = n

    def sum(self, ops: Ops, arrays: list) -> list:
        return [rank_order_sum(a) for a in arrays]

    def gather(self, ops: Ops, arrays: list) -> list:
        if self.n == 1:  # a leading axis of one: a view, not a copy
            return [ops.reshape(a[0], (1,) + tuple(a[0].shape)) for a in arrays]
        return [ops.stack(a) for a in arrays]

    def max(self, ops: Ops, arrays: list) -> list:
        return [_rank_order_max(ops, a) for a in arrays]

    def scatter(self, ops: Ops, arrays: list) -> list:
        """Per array, per worker: the n senders' parts for it, ``(n, S, ...)``."""
        return [all_to_all(ops, a, self.n) for a in arrays]


def _rank_order_max(ops: Ops, values: Sequence) -> Any:
    total = values[0]
    for v in values[1:]:
        total = ops.maximum(total, v)
    return total


class StackedLoopback:
    """All n workers in this process, stacked on a leading axis (under vmap)."""

    def __init__(self, n: int):
        self.n = n

    def sum(self, ops: Ops, arrays: list) -> list:
        return [rank_order_sum([a[w] for w in range(a.shape[0])]) for a in arrays]

    def gather(self, ops: Ops, arrays: list) -> list:
        return list(arrays)  # already what an all-gather delivers

    def max(self, ops: Ops, arrays: list) -> list:
        return [_rank_order_max(ops, [a[w] for w in range(a.shape[0])]) for a in arrays]

    def scatter(self, ops: Ops, arrays: list) -> list:
        """Per array, stacked over the receiving workers: ``(n, n, S, ...)``."""
        return [ops.stack(all_to_all(ops, [a[w] for w in range(a.shape[0])], self.n)) for a in arrays]


# ---------------------------------------------------------------------------------------------
# Fusing a bucket's payloads into flat buffers
# ---------------------------------------------------------------------------------------------

class Segment(NamedTuple):
    """Where one payload array lives in its fused buffer."""

    buffer: int
    offset: int
    shape: tuple


def fuse(ops: Ops, arrays: Sequence[Array]) -> tuple[list[Array], list[Segment]]:
    """Flatten and concatenate arrays into one flat buffer per dtype (in order of
    first appearance); empty arrays take no room. Returns (buffers, segments)."""
    order: list = []
    parts: dict = {}
    segs = []
    for a in arrays:
        dt = np.dtype(a.dtype)
        if dt not in parts:
            order.append(dt)
            parts[dt] = []
        pos = sum(int(p.size) for p in parts[dt])
        segs.append(Segment(order.index(dt), pos, tuple(a.shape)))
        if a.size:
            parts[dt].append(ops.reshape(a, (-1,)))
    bufs = []
    for dt in order:
        ps = parts[dt]
        bufs.append(ps[0] if len(ps) == 1 else ops.concatenate(ps) if ps else ops.zeros((0,), dt))
    return bufs, segs


def split(ops: Ops, buffers: Sequence[Array], segments: Sequence[Segment], lead: tuple = ()) -> list[Array]:
    """The arrays back out of received buffers; ``lead`` is the leading shape the
    communicator added (``(n,)`` after a gather, ``()`` after a sum)."""
    out = []
    for seg in segments:
        size = int(np.prod(seg.shape, dtype=np.int64))
        buf = buffers[seg.buffer]
        window = (slice(None),) * len(lead) + (slice(seg.offset, seg.offset + size),)
        part = buf[window] if size else ops.zeros(lead + (0,), buf.dtype)
        out.append(ops.reshape(part, lead + seg.shape))
    return out


