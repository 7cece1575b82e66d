"""Lowering rules of the reductions and ``matmul``: ``sum`` in the halving
order ``s[:m/2] + s[m/2:]`` of the reference (zero-padded to a power of two,
a bf16 sum rounded at every level), ``max`` with NaN put back (ReduceMax
drops it on CPU).
"""
from __future__ import annotations

from backends.mindspore.rules_arith import binop
from backends.mindspore.rules_dtypes import is_float, isnan


def sum_(em, eqn):
    (x,), out, axis = eqn.args, eqn.outs[0], eqn.attrs["axis"]
    dt = out.dtype
    a = em.ref(x)
    if axis is None:
        a, nd = em.tmp(f"ops.reshape({a}, ({x.size},))"), 1
        shape = (x.size,)
    else:
        nd = x.ndim
        axis = axis % nd
        perm = tuple(i for i in range(nd) if i != axis) + (axis,)
        shape = tuple(x.shape[i] for i in perm)
        if perm != tuple(range(nd)):
            a = em.tmp(f"ops.transpose({a}, {perm!r})")
    m = shape[-1]
    lead = ":, " * (nd - 1)
    if m == 0:
        em.assign(out, em.filled(out.shape, 0, dt))
        return
    p = 1 if m <= 1 else 1 << (m - 1).bit_length()
    if p != m:
        a = em.tmp(f"ops.concat(({a}, {em.filled(shape[:-1] + (p - m,), 0, dt)}), {nd - 1})")
    while p > 1:
        p //= 2
        a = em.tmp(binop(em, "add", f"{a}[{lead}:{p}]", f"{a}[{lead}{p}:]", dt))
        if eqn.attrs.get("round_to"):  # a bf16 sum computed in float32: round every level
            a = em.tmp(f"ops.cast(ops.cast({a}, ms.{eqn.attrs['round_to']}), {em.dt(dt)})")
    em.assign(out, f"{a}[{lead}0]")


def max_(em, eqn):
    (x,), out, axis = eqn.args, eqn.outs[0], eqn.attrs["axis"]
    a = em.ref(x)
    ax = "()" if axis is None else str(int(axis))
    base = f"{em.prim_expr('ops.ReduceMax()', 'rmax')}({a}, {ax})"
    if is_float(x.dtype):
        anynan = f"{em.prim_expr('ops.ReduceAny()', 'rany')}({isnan(em, a, x.dtype)}, {ax})"
        base = f"ops.where({anynan}, {em.filled(out.shape, float('nan'), out.dtype)}, {base})"
    em.assign(out, base)


def matmul(em, eqn):
    """A transposed 2-D left operand is read in place (``MatMul(transpose_a=True)``): a
    transpose on MindSpore's CPU is a full copy (PowerSGD's ``M^T P`` of a 2900 x 2900 M:
    33 ms as transpose + matmul, 15 ms in place). Not the right operand: ``P Q^T`` with Q
    thin is faster transposed first (8.4 vs 12.6 ms)."""
    a, b = eqn.args
    ta = _untransposed(em, a) if len(b.shape) == 2 else None  # MatMul takes 2-D operands only
    if ta is None:
        em.assign(eqn.outs[0], f"ops.matmul({em.ref(a)}, {em.ref(b)})")
        return
    prim = em.prim_expr("ops.MatMul(transpose_a=True)", "mm")
    em.assign(eqn.outs[0], f"{prim}({em.ref(ta)}, {em.ref(b)})")


def _untransposed(em, v):
    """The 2-D float array whose transpose ``v`` is, when an earlier equation made it so."""
    src = em.producer(v)
    if src is None or src.op != "transpose" or len(v.shape) != 2 or v.dtype.kind != "f":
        return None
    return src.args[0]
