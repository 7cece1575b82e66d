"""Lowering rules of the collectives (distributed lowering only): a SUM round
is an AllReduce (float32/float16; bf16 via float32), other dtypes gather and
add in rank order; a GATHER round is an AllGather stacked on a new leading
worker axis. AllGather takes no uint32/int8/bool/bf16: such payloads travel
as int32 (float32 for bf16) and are cast back exactly.
"""
from __future__ import annotations

import numpy as np

from backends.mindspore.rules_arith import binop

GATHERABLE = {"float16", "float32", "float64", "int32", "int64"}


def comm_sum(em, eqn):
    """SUM round: AllReduce (float32/float16; bf16 via float32); other dtypes gather + rank-order sum."""
    (x,), out = eqn.args, eqn.outs[0]
    dt = x.dtype.name
    a = em.ref(x)
    if eqn.attrs.get("via") == "allgather":
        pass
    elif dt in ("float32", "float16"):
        em.assign(out, f"{em.prim_expr('ops.AllReduce()', 'allreduce')}({a})")
        return
    elif dt == "bfloat16":
        em.assign(out, f"ops.cast({em.prim_expr('ops.AllReduce()', 'allreduce')}(ops.cast({a}, ms.float32)), ms.bfloat16)")
        return
    g = _allgather(em, a, x.shape, x.dtype, eqn.attrs["n"])  # exact rank-order sum
    total = f"{g}[0]"
    for i in range(1, eqn.attrs["n"]):
        total = em.tmp(binop(em, "add", total, f"{g}[{i}]", x.dtype))
    em.assign(out, total)


def _allgather(em, a, shape, dtype, n):
    dt = np.dtype(dtype).name
    wire = dt if dt in GATHERABLE else ("float32" if dt == "bfloat16" else "int32")
    if wire != dt:
        a = f"ops.cast({a}, ms.{wire})"
    row = shape if shape else (1,)
    g = em.tmp(f"{em.prim_expr('ops.AllGather()', 'allgather')}(ops.reshape({a}, {(1,) + tuple(row)!r}))")
    g = em.tmp(f"ops.reshape({g}, {(n,) + tuple(shape)!r})")
    if wire != dt:
        g = em.tmp(f"ops.cast({g}, {em.dt(dt)})")
    return g


def comm_gather(em, eqn):
    """GATHER round: AllGather, stacked on a new leading worker axis."""
    (x,), out = eqn.args, eqn.outs[0]
    em.assign(out, _allgather(em, em.ref(x), x.shape, x.dtype, eqn.attrs["n"]))
