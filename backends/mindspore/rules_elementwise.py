"""Lowering rules of the elementwise ops: ``abs``, ``sqrt``, ``sign``,
``floor``, ``maximum`` / ``minimum``, ``where``, ``isfinite``, ``frexp``,
``ldexp``. ``Maximum``/``Minimum`` and ``sign`` drop NaN on MindSpore's CPU:
NaN is put back with ``where``; frexp/ldexp of 16-bit floats run in float32.
"""
from __future__ import annotations

import numpy as np

from backends.mindspore.rules_arith import binop
from backends.mindspore.rules_dtypes import is_float, isnan


def simple(fn):
    def rule(em, eqn):
        out = eqn.outs[0]
        em.assign(out, f"{fn}({em.operand(eqn.args[0], out.dtype)})")
    return rule


def sign(em, eqn):
    out = eqn.outs[0]
    x = em.ref(eqn.args[0])
    dt = out.dtype.name
    one, mone = em.scalar(1, dt), em.scalar(-1, dt)
    if dt.startswith("uint"):
        em.assign(out, f"ops.where(ops.greater({x}, {em.scalar(0, dt)}), {one}, {x})")
    else:
        em.assign(out, f"ops.where(ops.greater({x}, {em.scalar(0, dt)}), {one}, "
                       f"ops.where(ops.less({x}, {em.scalar(0, dt)}), {mone}, {x}))")


def floor(em, eqn):
    out = eqn.outs[0]
    x = em.ref(eqn.args[0])
    em.assign(out, f"ops.floor({x})" if is_float(out.dtype) else x)


def extremum_expr(em, kind: str, a: str, b: str, dt) -> str:
    """Source for max/min(a, b) in dtype dt, NaN-propagating like NumPy and XLA."""
    if dt.name == "bool":
        return binop(em, kind, a, b, dt)
    base = f"ops.{'maximum' if kind == 'max' else 'minimum'}({a}, {b})"
    if is_float(dt):
        base = f"ops.where(ops.logical_or({isnan(em, a, dt)}, {isnan(em, b, dt)}), ops.add({a}, {b}), {base})"
    return base


def extremum(kind):
    def rule(em, eqn):
        out = eqn.outs[0]
        a, b = (em.operand(x, out.dtype) for x in eqn.args)
        em.assign(out, extremum_expr(em, kind, a, b, out.dtype))
    return rule


def where(em, eqn):
    out = eqn.outs[0]
    c = eqn.args[0]
    cond = em.ref(c) if hasattr(c, "id") else em.const(np.asarray(c, bool))
    a, b = (em.operand(x, out.dtype) for x in eqn.args[1:])
    if tuple(getattr(c, "shape", ())) != out.shape:
        cond = f"ops.broadcast_to({cond}, {out.shape!r})"
    a = a if tuple(getattr(eqn.args[1], "shape", ())) == out.shape else f"ops.broadcast_to({a}, {out.shape!r})"
    b = b if tuple(getattr(eqn.args[2], "shape", ())) == out.shape else f"ops.broadcast_to({b}, {out.shape!r})"
    em.assign(out, f"ops.where({cond}, {a}, {b})")


def isfinite(em, eqn):
    x = eqn.args[0]
    src = em.ref(x)
    if x.dtype.name == "bfloat16":
        src = f"ops.cast({src}, ms.float32)"
    em.assign(eqn.outs[0], f"ops.isfinite({src})" if is_float(x.dtype) else f"ops.ones_like({src}).astype(ms.bool_)")


def frexp(em, eqn):
    from backends.mindspore import native
    from backends.mindspore import runtime as rt
    x = eqn.args[0]
    dt = x.dtype.name
    src = em.ref(x)
    work = "float32" if dt in ("bfloat16", "float16") else dt
    if work != dt:
        src = f"ops.cast({src}, ms.float32)"
    m, e = eqn.outs
    if em.native:
        nm, ne = native.frexp(em, em.tmp(src), work)
        em.line(f"{em.name(m)}, {em.name(e)} = {nm}, ops.cast({ne}, {em.dt(e.dtype)})")
    else:
        prim = em.host(rt.frexp_prim, work, op="frexp", hint="frexp")
        em.line(f"{em.name(m)}, {em.name(e)} = {prim}({src})")
    if work != dt:
        em.assign(m, f"ops.cast({em.name(m)}, {em.dt(dt)})")


def ldexp(em, eqn):
    from backends.mindspore import native
    from backends.mindspore import runtime as rt
    m, e = eqn.args
    out = eqn.outs[0]
    dt = out.dtype.name
    work = "float32" if dt in ("bfloat16", "float16") else dt
    if em.native:
        em.assign(out, native.ldexp(em, em.tmp(em.operand(m, work)), em.tmp(em.operand(e, np.int32)), work))
    else:
        prim = em.host(rt.ldexp_prim, work, op="ldexp", hint="ldexp")
        em.assign(out, f"{prim}({em.operand(m, work)}, {em.operand(e, np.int32)})")
    if work != dt:
        em.assign(out, f"ops.cast({em.name(out)}, {em.dt(dt)})")
