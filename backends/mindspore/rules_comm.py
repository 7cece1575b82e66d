"""Lowering rules of the collectives (distributed lowering only): a SUM round
is an AllReduce (float32/float16; bf16 via float32; int8/int16 via float16 or
float32 where every partial sum of n workers is an exact float integer —
MindSpore's float → int cast wraps like integer addition, so the result is
bit-identical), other dtypes gather and add in rank order; a GATHER round is
an AllGather stacked on a new leading worker axis; a MAX round gathers and
takes the rank-order maximum (MindSpore's CPU AllReduce is SUM-only; the
scales such rounds carry are small). AllGather takes no uint32/int8/bool/bf16:
such payloads travel as int32 (float32 for bf16) and are cast back exactly.
With one worker (n = 1) every collective is the identity (an AllGather adds
the worker axis): the graph needs no communication group, so a reducer for
one rank runs in any process (a benchmark's, a researcher's notebook).
"""
from __future__ import annotations

import numpy as np

from backends.mindspore.rules_arith import binop
from backends.mindspore.rules_elementwise import extremum_expr
from backends.mindspore.rules_slice import row

GATHERABLE = {"float16", "float32", "float64", "int32", "int64"}


def comm_sum(em, eqn):
    """SUM round: AllReduce (float32/float16; bf16 via float32); other dtypes gather + rank-order sum."""
    (x,), out = eqn.args, eqn.outs[0]
    dt = x.dtype.name
    a = em.ref(x)
    if eqn.attrs["n"] == 1:  # one rank: what it receives is its own payload
        em.alias(out, x)
        return
    if eqn.attrs.get("via") == "allgather":
        pass
    elif dt in ("float32", "float16"):
        em.assign(out, f"{em.prim_expr('ops.AllReduce()', 'allreduce')}({a})")
        return
    elif dt == "bfloat16":
        em.assign(out, f"ops.cast({em.prim_expr('ops.AllReduce()', 'allreduce')}(ops.cast({a}, ms.float32)), ms.bfloat16)")
        return
    elif int_carrier(x.dtype, eqn.attrs["n"]):
        carrier = int_carrier(x.dtype, eqn.attrs["n"])
        summed = f"{em.prim_expr('ops.AllReduce()', 'allreduce')}(ops.cast({a}, ms.{carrier}))"
        em.assign(out, f"ops.cast({summed}, {em.dt(x.dtype)})")
        return
    n = eqn.attrs["n"]
    g = _allgather(em, a, x.shape, x.dtype, n)  # exact rank-order sum
    em.assign(out, _rank_order(em, g, n, x.shape, lambda t, r: binop(em, "add", t, r, x.dtype)))


def wire_dtype(eqn) -> np.dtype:
    """The dtype a collective equation's buffer travels in, as the rules below lower it."""
    x = eqn.args[0]
    dt = np.dtype(x.dtype).name
    if eqn.op == "comm_sum" and eqn.attrs.get("via") != "allgather":
        if dt in ("float32", "float16", "bfloat16"):
            return np.dtype(np.float32) if dt == "bfloat16" else np.dtype(dt)
        carrier = int_carrier(x.dtype, eqn.attrs["n"])
        if carrier:
            return np.dtype(carrier)
    return np.dtype(dt if dt in GATHERABLE else ("float32" if dt == "bfloat16" else "int32"))


def int_carrier(dtype, n: int) -> str | None:
    """The float dtype an integer SUM payload can be all-reduced in exactly:
    every partial sum of n workers is an integer of magnitude ≤ n · 2^(b-1),
    exact in float16 up to 2^11 and in float32 up to 2^24 (None: gather)."""
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.int8), np.dtype(np.int16)):
        return None
    bound = n * 2 ** (dt.itemsize * 8 - 1)
    return "float16" if bound <= 2**11 else "float32" if bound <= 2**24 else None


def _allgather(em, a, shape, dtype, n):
    if n == 1:
        return em.tmp(f"ops.reshape({a}, {(1,) + tuple(shape)!r})")
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


def _rank_order(em, g, n, shape, combine) -> str:
    """The rows of a gathered (n, *shape) array folded in rank order: combine(total, row)."""
    rows = (em.tmp(row(g, (n,) + tuple(shape), i)) for i in range(n))
    total = next(rows)
    for r in rows:
        total = em.tmp(combine(total, r))
    return total


def comm_gather(em, eqn):
    """GATHER round: AllGather, stacked on a new leading worker axis."""
    (x,), out = eqn.args, eqn.outs[0]
    em.assign(out, _allgather(em, em.ref(x), x.shape, x.dtype, eqn.attrs["n"]))


def comm_max(em, eqn):
    """MAX round: AllGather and the elementwise maximum in rank order."""
    (x,), out = eqn.args, eqn.outs[0]
    n = eqn.attrs["n"]
    g = _allgather(em, em.ref(x), x.shape, x.dtype, n)
    em.assign(out, _rank_order(em, g, n, x.shape, lambda t, r: extremum_expr(em, "max", t, r, x.dtype)))
