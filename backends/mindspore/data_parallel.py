"""kfsim compressors in a user's own MindSpore data-parallel script (the public entry point).

    from backends.mindspore import kfsim_reducer     # importing it is the only set-up

    init()                                           # mindspore.communication, under msrun
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
    train.grad_reducer = kfsim_reducer("ef(topk(ratio=0.01))", opt.parameters)

``kfsim_reducer`` takes a spec string or a :class:`compressors.Compressor`
and the parameters in gradient order, and returns the Cell that replaces
``TrainOneStepCell.grad_reducer`` (in the spirit of Horovod's
``compression=`` and PyTorch DDP's communication hooks): in one compiled
graph it encodes every gradient, exchanges the payloads with one
AllReduce/AllGather per bucket and round (``bucket_bytes``, default the
simulator's 25 MiB) and returns the decoded mean. Workers and rank come from
``mindspore.communication`` unless given.

Scheduled compressors (``warmup(...)``, DGC's sparsity schedule) get one
graph per phase inside one reducer, sharing the state and the step counter;
``construct`` picks the phase by the counter, so the switch happens at the
step the compressor's ``phase_of`` names (phases are found over the first
``horizon`` steps; the last one holds after).

Importing this module makes MindSpore usable beside kfsim's NumPy 2: the
MindSpore 2.10 wheel is built for NumPy 1.x and its first shape-taking call
fails once per process with ``SystemError``; :func:`numpy_compat` takes that
failure at import, through an argument-parsing error that runs no kernel, so
``set_device``/``set_context`` and ``init()`` may still follow. Import it
before ``init()``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from backends.mindspore.emit import build_cell
from backends.mindspore.reducer import RNG_MODES, compressed_reducer
from backends.mindspore.runtime import absorb_numpy_error
from compressors.buckets import DEFAULT_BUCKET_BYTES

MAX_PHASES = 16
_DONE = []


def numpy_compat() -> None:
    """Absorb MindSpore's one-time NumPy-1.x start-up failure without starting its runtime."""
    if _DONE:
        return
    import mindspore as ms

    absorb_numpy_error(lambda: ms.Tensor(np.zeros(2, np.float32)).reshape("not a shape"))
    _DONE.append(True)


numpy_compat()


def phases(comp, horizon: int) -> list[int]:
    """The first step of every phase of ``comp`` within ``horizon`` steps ([0] if unscheduled)."""
    if comp.phase is None:
        return [0]
    starts, last = [0], comp.phase_of(0)
    for t in range(1, max(int(horizon), 1)):
        p = comp.phase_of(t)
        if p != last:
            starts.append(t)
            last = p
            if len(starts) > MAX_PHASES:
                raise ValueError(f"compressor {comp.spec!r} changes phase more than {MAX_PHASES} times in "
                                 f"{horizon} steps; one graph per phase is not practical")
    return starts


def kfsim_reducer(compression, params: Sequence, *, n: int | None = None, rank: int | None = None,
                  seed: int = 0, rng: str = "exact", collective: str = "auto",
                  bucket_bytes: float = DEFAULT_BUCKET_BYTES, step: int = 0, horizon: int = 100_000,
                  prefix: str = "kfsim"):
    """The gradient reducer Cell for ``params`` compressing with ``compression`` (spec or Compressor).

    ``step``: the step the run starts at (a resume). ``prefix``: the state
    Parameters' name prefix (``<prefix>.state.<tensor>.<field>``, ``<prefix>.step``;
    distinct per reducer when a Cell holds several). Raises ValueError for a bad
    spec or option before anything is compiled.
    """
    import compressors

    comp = compressors.parse(compression) if isinstance(compression, str) else compression
    if not isinstance(comp, compressors.Compressor):
        raise ValueError(f"compression must be a spec string or a Compressor, got {compression!r}")
    if rng not in RNG_MODES:
        raise ValueError(f"rng must be one of {', '.join(RNG_MODES)}, got {rng!r}")
    if n is None or rank is None:
        from mindspore.communication import get_group_size, get_rank
        n = get_group_size() if n is None else n
        rank = get_rank() if rank is None else rank
    opts = dict(n=n, rank=rank, seed=seed, rng=rng, collective=collective, bucket_bytes=bucket_bytes,
                prefix=prefix)
    starts = phases(comp, horizon)
    first = compressed_reducer(comp.step(starts[0]), params, step=step, **opts)
    cell = first if len(starts) == 1 else scheduled(comp, starts, [first] + [
        compressed_reducer(comp.step(t), params, share_with=first, **opts) for t in starts[1:]])
    cell.accounting = lambda t: accounting(cell, t)
    return cell


def accounting(reducer, step: int) -> dict:
    """Per step at ``step``: the plan's payload bytes, the bytes the lowered collectives
    take (their wire dtypes), how many collectives and buckets."""
    c = phase_cell(reducer, step)
    return {"payload_bytes": c.payload_bytes, "wire_bytes": c.wire_bytes, "collectives": c.collectives,
            "buckets": c.buckets}


def scheduled(comp, starts: list[int], cells: list):
    """One Cell choosing the phase's reducer by the shared step counter."""
    objs = {"step": cells[0].step}
    body = []
    for i, (t, cell) in enumerate(zip(starts, cells)):
        objs[f"p{i}"] = cell
    for i in range(len(cells) - 1, 0, -1):
        body += [f"if self.step >= {starts[i]}:", f"    return self.p{i}(grads)"]
    body.append("return self.p0(grads)")
    cell = build_cell(f"compressor {comp.spec!r} schedule", ["grads"], body, objs)
    cell.compressor, cell.starts, cell.phases = comp, list(starts), cells
    cell.n_state = cells[0].n_state
    for j in range(cell.n_state):
        setattr(cell, f"s{j}", getattr(cells[0], f"s{j}"))
    return cell


def phase_cell(reducer, step: int):
    """The phase's reducer in force at ``step`` (the reducer itself if unscheduled)."""
    starts = getattr(reducer, "starts", None)
    if starts is None:
        return reducer
    return reducer.phases[max(i for i, t in enumerate(starts) if t <= step)]
