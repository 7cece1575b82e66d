"""Static slicing, lowered to the MindSpore op its CPU kernels run fast.

MindSpore's CPU StridedSlice has slow paths (found with MindSpore's profiler;
``benchmarks/bench_ms_slicing.py`` prints both forms side by side): row 1 of a
(2, K) int32 array, ``x[1:2]``, took 263 ms on 8.4M elements where ``ops.slice``
took 5.8 ms. A gathered payload of n workers is split into its rows that way, so
with 2 simulated workers an int8 exchange of 10.7M parameters spent 370 of its
660 ms in StridedSlice (a probe; now 234 ms in all). For a strided block (a column)
StridedSlice is the faster one (11 vs 43 ms). So:

* a slice that is one contiguous block of memory (axes before the sliced one
  of extent 1, the axes after it whole, step 1) is ``ops.slice`` (Slice);
* an int index is a one-entry slice and a reshape (dropping an axis is another
  slow path: ``x[0]`` of a (1, 2.1M) int32 array took 148 ms);
* a slice of a whole axis is not a slice at all;
* anything else (steps, a block inside inner axes) stays StridedSlice, with a
  normalised start (MindSpore does not clamp a start past the end for a
  negative step).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from backends.mindspore.trace import Var


def _parts(index, shape) -> tuple[list[tuple[int, int, int]], bool]:
    """Normalised (start, stop, step) per axis, and whether an int index drops an axis."""
    parts, dropped = [], False
    index = tuple(index) + (slice(None),) * (len(shape) - len(tuple(index)))
    for it, dim in zip(index, shape):
        if isinstance(it, slice):
            parts.append(it.indices(dim))
        else:
            i = int(it) + dim if int(it) < 0 else int(it)
            parts.append((i, i + 1, 1))
            dropped = True
    return parts, dropped


def _extent(start: int, stop: int, step: int) -> int:
    return len(range(start, stop, step))


def slice_source(ref: str, shape: Sequence[int], parts: Sequence[tuple[int, int, int]]) -> str:
    """MindSpore source of ``ref[parts]`` (normalised slices, one per axis)."""
    parts = [(p[0], p[0] + 1, 1) if _extent(*p) == 1 else tuple(p) for p in parts]  # one entry: any step
    whole = [p == (0, d, 1) for p, d in zip(parts, shape)]
    if all(whole):
        return ref
    last = max(i for i, w in enumerate(whole) if not w)
    contiguous = (parts[last][2] == 1 and _extent(*parts[last]) > 0
                  and all(_extent(*p) == 1 for p in parts[:last]))
    if contiguous:
        begin = tuple(p[0] for p in parts)
        size = tuple(_extent(*p) for p in parts)
        return f"ops.slice({ref}, {begin!r}, {size!r})"
    text = []
    for (start, stop, step), w in zip(parts[:last + 1], whole):
        if w:
            text.append(":")
        else:
            text.append(f"{start}:{'' if stop < 0 else stop}" + ("" if step == 1 else f":{step}"))
    return f"{ref}[{', '.join(text)}]"


def index_source(ref: str, shape: Sequence[int], index, out_shape: Sequence[int]) -> str:
    """MindSpore source of ``ref[index]`` (static ints and slices; result not empty)."""
    parts, dropped = _parts(index, shape)
    expr = slice_source(ref, shape, parts)
    return f"ops.reshape({expr}, {tuple(out_shape)!r})" if dropped else expr


def row(ref: str, shape: Sequence[int], i: int) -> str:
    """Row ``i`` of ``ref`` (its shape ``shape``), the leading axis dropped."""
    return index_source(ref, shape, (i,), tuple(shape[1:]))


def concat_part(em, x, index, out):
    """The operand of the concatenation (or stack) ``x`` that ``x[index]`` is exactly (a
    block of the leading axis at that operand's bounds, the other axes whole; row i of a
    stack), or None."""
    src = em.named(x)
    p = em.producer(src)
    if p is not None and p.op == "stack" and len(tuple(index)) == 1 and isinstance(index[0], (int, np.integer)):
        row = p.args[0][int(index[0])]
        ok = isinstance(row, Var) and row.dtype == out.dtype and em.tensor_shape(row) == tuple(out.shape)
        return row if ok else None
    if p is None or p.op != "concatenate" or p.attrs["axis"] != 0:
        return None
    parts, dropped = _parts(index, src.shape)
    (start, stop, step), rest = parts[0], parts[1:]
    if dropped or step != 1 or any(q != (0, d, 1) for q, d in zip(rest, src.shape[1:])):
        return None
    at = 0
    for a in p.args[0]:
        size = a.shape[0]
        if (at, at + size) == (start, stop):
            ok = getattr(a, "dtype", None) == out.dtype and em.tensor_shape(a) == tuple(out.shape)
            return a if ok else None
        at += size
    return None


def getitem(em, eqn):
    """``x[index]``, static ints and slices; a slice that is one operand of a
    concatenation is that operand (a bucket split where nothing travelled between)."""
    x, out = eqn.args[0], eqn.outs[0]
    if out.size == 0:
        em.assign(out, em.filled(out.shape, 0, out.dtype))
        return
    part = concat_part(em, x, eqn.attrs["index"], out)
    if part is not None:
        em.alias(out, part)
        return
    em.assign(out, index_source(em.ref(x), x.shape, eqn.attrs["index"], out.shape))
