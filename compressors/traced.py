"""Traced values: the arrays of a traced op program, and the reference function of an equation.

A :class:`Var` is an array with a static shape and dtype and no value; every
operator on it (``+``, ``<``, ``x[a:b]``, ...) records an equation in its
:class:`~compressors.program.Program`. An :class:`Eqn` is one recorded op
``(op, args, attrs) -> outs``. :func:`reference_fn` is the function of the
reference binding (an ``Ops`` on JAX arrays) that computes an equation: its
``jax.eval_shape`` gives the result's aval, calling it evaluates it.
See :mod:`compressors.program`.
"""
from __future__ import annotations

import inspect
import operator
from typing import Any, NamedTuple

import numpy as np

from compressors.fused import FUSED_NAMES, Fused


class LoweringError(ValueError):
    """A compressor uses something a traced program cannot hold (and so no
    compiled lowering can compile)."""


class Eqn(NamedTuple):
    op: str
    args: tuple      # Vars, Python scalars, tuples/lists of Vars, NumPy constants
    attrs: dict      # static attributes (k, shape, axis, dtype, ...)
    outs: tuple      # output Vars (flattened)
    out_tree: Any    # "one" | "tuple"


BINARY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
          "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
          "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
          "eq": operator.eq, "ne": operator.ne, "and": operator.and_, "or": operator.or_,
          "xor": operator.xor, "lshift": operator.lshift, "rshift": operator.rshift}
UNARY = {"neg": operator.neg, "invert": operator.invert}
COMM_OPS = ("comm_sum", "comm_gather", "comm_max")   # a lowering's traced collectives (attrs: n)


class Var:
    """A traced array: static shape and dtype, no value."""

    __slots__ = ("prog", "id", "shape", "dtype", "const", "origin")
    __array_priority__ = 1000

    def __init__(self, prog, id, shape, dtype, const=None, origin=None):
        self.prog, self.id, self.shape, self.dtype = prog, id, tuple(shape), np.dtype(dtype)
        self.const = const      # a known NumPy value (key arithmetic is folded)
        self.origin = origin    # "worker"/"shared" for keys (fast RNG mode)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def __repr__(self):
        return f"Var(v{self.id}: {self.dtype.name}{list(self.shape)})"

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d traced array")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getitem__(self, idx):
        return self.prog.bind("getitem", (self,), {"index": static_index(self, idx)})

    def _fail(self, what):
        raise LoweringError(f"{self.prog.who}: {what} on a traced array {self!r} (data-dependent Python "
                            "control flow or host conversion cannot be compiled; use ops.where / static shapes)")

    def __bool__(self):
        self._fail("bool()")

    def __float__(self):
        self._fail("float()")

    def __int__(self):
        self._fail("int()")

    def __index__(self):
        self._fail("use as a Python index")

    def __array__(self, *a, **k):
        self._fail("conversion to NumPy")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise LoweringError(f"{self.prog.who}: attribute .{name} of a traced array is not part of the ops "
                            "namespace's array protocol (use ops.<op>)")

    __hash__ = object.__hash__


def _binary(name):
    def method(self, other):
        return self.prog.bind(name, (self, other), {})

    def rmethod(self, other):
        return self.prog.bind(name, (other, self), {})
    return method, rmethod


for _name in BINARY:
    _m, _r = _binary(_name)
    setattr(Var, f"__{_name}__", _m)
    if _name not in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(Var, f"__r{_name}__", _r)
for _name in UNARY:
    setattr(Var, f"__{_name}__", (lambda n: lambda self: self.prog.bind(n, (self,), {}))(_name))


def static_index(var, idx):
    items = idx if isinstance(idx, tuple) else (idx,)
    out = []
    for it in items:
        if isinstance(it, (bool, np.bool_)) or not isinstance(it, (int, np.integer, slice)):
            raise LoweringError(f"{var.prog.who}: index {idx!r} — only static ints and slices index traced arrays")
        if isinstance(it, slice):
            for part in (it.start, it.stop, it.step):
                if part is not None and not isinstance(part, (int, np.integer)):
                    raise LoweringError(f"{var.prog.who}: slice {it!r} with a non-static bound")
            out.append(slice(it.start, it.stop, it.step))
        else:
            out.append(int(it))
    if len(out) > var.ndim:
        raise LoweringError(f"{var.prog.who}: too many indices {idx!r} for {var!r}")
    return tuple(out)



def has_var(a) -> bool:
    if isinstance(a, Var):
        return True
    if isinstance(a, (list, tuple)):
        return any(has_var(x) for x in a)
    return False


def vars_of(a):
    """Every Var in an argument (a Var, or nested tuples/lists of them)."""
    if isinstance(a, Var):
        yield a
    elif isinstance(a, (list, tuple)) and not isinstance(a, np.ndarray):
        for x in a:
            yield from vars_of(x)


_FUSED_PARAMS = {name: tuple(inspect.signature(getattr(Fused, name)).parameters)[1:] for name in FUSED_NAMES}


def reference_fn(op: str, attrs: dict, reference):
    """The function of the reference binding ``reference`` (an ``Ops`` on JAX
    arrays) that computes equation ``op`` with ``attrs``; its ``jax.eval_shape``
    gives the output avals, and calling it evaluates the equation."""
    import jax.numpy as jnp

    if op in BINARY:
        return BINARY[op]
    if op in UNARY:
        return UNARY[op]
    if op == "getitem":
        return lambda x: x[attrs["index"]]
    if op == "asarray":
        return lambda: jnp.asarray(attrs["value"])
    if op in ("comm_sum", "comm_max"):
        return lambda x: x
    if op == "comm_gather":
        return lambda x: jnp.stack([x] * attrs["n"])
    if op == "scatter_add":
        return lambda idx, vals: reference.scatter_add(attrs["size"], idx, vals)
    fn = getattr(reference, op)
    if "arg_names" in attrs:  # a fused op recorded whole: arrays positional, the rest static
        names = attrs["arg_names"]
        params = _FUSED_PARAMS[op]

        def call(*arrays):
            given = dict(zip(names, arrays))
            return fn(*[given[p] if p in given else attrs[p] for p in params if p in given or p in attrs])
        return call
    kw = {k: v for k, v in attrs.items() if k not in ("origin", "site")}
    return lambda *a: fn(*a, **kw)


