"""Lowering rules of the creation and shape ops: ``asarray``, ``zeros``,
``full``, ``arange``, ``reshape``, ``concatenate``, ``stack``, ``pad``,
``transpose`` (empty operands become filled constants).
"""
from __future__ import annotations

import numpy as np

from backends.mindspore.rules_dtypes import is_float


def asarray(em, eqn):
    em.assign(eqn.outs[0], em.const(eqn.attrs["value"]))


def zeros(em, eqn):
    out = eqn.outs[0]
    em.assign(out, em.filled(out.shape, 0, out.dtype))


def full(em, eqn):
    import jax.numpy as jnp
    out = eqn.outs[0]
    value = np.asarray(jnp.full((), eqn.attrs["value"], out.dtype)).astype(np.float64 if is_float(out.dtype) else out.dtype)
    em.assign(out, em.filled(out.shape, value.item(), out.dtype))


def arange(em, eqn):
    em.assign(eqn.outs[0], f"ops.arange(0, {eqn.attrs['n']}, 1, dtype=ms.int32)")


def reshape(em, eqn):
    """A reshape of a reshape reads the first tensor (MindSpore's CPU Reshape copies):
    back to that tensor's own shape it is that tensor."""
    out, x = eqn.outs[0], eqn.args[0]
    if x.shape == out.shape or em.presized(x, out.shape):  # nothing to do, or a host kernel did it
        em.alias(out, x)
        return
    src = em.unreshaped(x)
    if src is not x and em.tensor_shape(src) == tuple(out.shape):
        em.alias(out, src)
        return
    em.assign(out, f"ops.reshape({em.ref(src)}, {out.shape!r})")


def concatenate(em, eqn):
    xs = [x for x in eqn.args[0] if x.size > 0]
    out = eqn.outs[0]
    if not xs:
        em.assign(out, em.filled(out.shape, 0, out.dtype))
    elif len(xs) == 1:
        em.alias(out, xs[0])
    else:
        em.assign(out, f"ops.concat(({', '.join(em.operand(x, out.dtype) for x in xs)},), {eqn.attrs['axis']})")


def stack(em, eqn):
    out, xs = eqn.outs[0], eqn.args[0]
    if len(xs) == 1 and getattr(xs[0], "dtype", None) == out.dtype:  # a new leading axis: a view, where Stack copies
        em.assign(out, f"ops.reshape({em.ref(xs[0])}, {out.shape!r})")
        return
    em.assign(out, f"ops.stack(({', '.join(em.operand(x, out.dtype) for x in xs)},), 0)")


def pad(em, eqn):
    (x,), out, after = eqn.args, eqn.outs[0], eqn.attrs["after"]
    if after == 0:
        em.alias(out, x)
    elif x.size == 0:
        em.assign(out, em.filled(out.shape, 0, out.dtype))
    else:
        em.assign(out, f"ops.concat(({em.ref(x)}, {em.filled((after,), 0, out.dtype)}), 0)")


def transpose(em, eqn):
    em.assign(eqn.outs[0], f"ops.transpose({em.ref(eqn.args[0])}, (1, 0))")
