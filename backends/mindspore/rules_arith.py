"""Lowering rules of the Python operators on traced arrays (``+ - * / // % **``,
comparisons, bitwise ops and shifts, ``-x``, ``~x``; ``x[i]`` is
:mod:`backends.mindspore.rules_slice`), and
:func:`binop`, the MindSpore source of one binary operator, which the other
rule modules use too. MindSpore traps worked around: bool arrays take logical
ops, bf16 computes in float32 and rounds once, uint32 subtraction, negation
and remainder go through int64 (no uint32 ``Sub``; the uint32 remainder
kernel fails), integer ``//`` and ``%`` use ``floor_divide``/``remainder``
(exact; ``div`` and ``fmod`` would go through float32), and a broadcast float
divisor becomes ``a * (1 / b)`` as XLA (the reference) does.
"""
from __future__ import annotations

import numpy as np

from backends.mindspore.rules_dtypes import is_float, is_int


def binop(em, op, a, b, dt):
    """Source for ``a op b`` in dtype dt (operands already of dt)."""
    name = np.dtype(dt).name
    if name == "bool":
        fn = {"add": "ops.logical_or", "mul": "ops.logical_and", "and": "ops.logical_and",
              "or": "ops.logical_or", "xor": "ops.logical_xor", "max": "ops.logical_or",
              "min": "ops.logical_and"}.get(op)
        if fn is None:
            raise em.error(f"operator {op} on bool arrays")
        return f"{fn}({a}, {b})"
    if name == "bfloat16":  # no bf16 CPU kernels: compute in float32, round once
        res = binop(em, op, f"ops.cast({a}, ms.float32)", f"ops.cast({b}, ms.float32)", np.float32)
        return res if op in ("lt", "le", "gt", "ge", "eq", "ne") else f"ops.cast({res}, ms.bfloat16)"
    if name == "uint32" and op in ("sub", "mod"):  # no uint32 Sub; uint32 remainder fails
        fn = "ops.sub" if op == "sub" else "ops.remainder"
        return f"ops.cast({fn}(ops.cast({a}, ms.int64), ops.cast({b}, ms.int64)), ms.uint32)"
    fn = {"add": "ops.add", "sub": "ops.sub", "mul": "ops.mul", "truediv": "ops.div",
          "floordiv": "ops.floor_divide", "mod": "ops.remainder",
          "and": "ops.bitwise_and", "or": "ops.bitwise_or", "xor": "ops.bitwise_xor",
          "lshift": "ops.bitwise_left_shift", "rshift": "ops.bitwise_right_shift",
          "lt": "ops.less", "le": "ops.less_equal", "gt": "ops.greater", "ge": "ops.greater_equal",
          "eq": "ops.equal", "ne": "ops.not_equal"}[op]
    return f"{fn}({a}, {b})"


def _operand_dtype(eqn):
    """The common dtype two operands are brought to (JAX promotion, weak Python scalars)."""
    import jax
    import jax.numpy as jnp

    from backends.mindspore.trace import Var

    specs = [jax.ShapeDtypeStruct((), a.dtype) if isinstance(a, Var) else a for a in eqn.args]
    return np.dtype(jax.eval_shape(jnp.add, *specs).dtype)


def binary(op):
    def rule(em, eqn):
        out = eqn.outs[0]
        dt = _operand_dtype(eqn) if op in ("lt", "le", "gt", "ge", "eq", "ne") else out.dtype
        a, b = (em.operand(x, dt) for x in eqn.args)
        if op == "pow":
            em.assign(out, _pow(em, eqn, a, b, dt))
            return
        if op == "truediv" and is_float(dt) and _size(eqn.args[1]) < out.size:
            # XLA (the reference) divides by a broadcast divisor as a * (1 / b); do the same
            b = em.tmp(f"ops.div({em.scalar(1, dt)}, {b})")
            em.assign(out, f"ops.mul({a}, {b})")
            return
        if op in ("lshift", "rshift") and not is_int(dt):
            raise em.error(f"shift on {dt}")
        em.assign(out, binop(em, op, a, b, dt))
    return rule


def _size(a) -> int:
    return a.size if hasattr(a, "id") else int(np.asarray(a).size)


def _pow(em, eqn, a, b, dt):
    """``x ** y``: integer Python exponents by squaring (as lax.integer_pow)."""
    y = eqn.args[1]
    if isinstance(y, (int, np.integer)) and not isinstance(y, bool) and y >= 0:
        y = int(y)
        if y == 0:
            return f"ops.ones_like({a})"
        acc, x = None, a
        while y > 0:
            if y & 1:
                acc = x if acc is None else em.tmp(f"ops.mul({acc}, {x})")
            y >>= 1
            if y:
                x = em.tmp(f"ops.mul({x}, {x})")
        return acc
    return f"ops.pow({a}, {b})"


def unary(op):
    def rule(em, eqn):
        (x,), out = eqn.args, eqn.outs[0]
        a = em.operand(x, out.dtype)
        name = out.dtype.name
        if op == "neg":
            if name == "uint32":
                em.assign(out, f"ops.cast(ops.neg(ops.cast({a}, ms.int64)), ms.uint32)")
            else:
                em.assign(out, f"ops.neg({a})")
        else:  # invert
            if name == "bool":
                em.assign(out, f"ops.logical_not({a})")
            elif is_int(name):
                em.assign(out, f"ops.bitwise_xor({a}, {em.scalar(-1 if name.startswith('int') else np.iinfo(name).max, name)})")
            else:
                raise em.error(f"~ on {name}")
    return rule
