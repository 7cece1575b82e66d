"""Trace a compressor into a program: the first half of the MindSpore lowering.

A :class:`TracingOps` is an ``Ops`` whose arrays are :class:`Var` s. Running a
compressor's pure functions on it records every op call (and every array
operator) as an :class:`Eqn` ``(op, args, attrs) -> outs`` in a
:class:`Program`; Python control flow runs at trace time on static shapes, so
the program is straight-line. Shapes and dtypes of results come from
``jax.eval_shape`` of the reference binding, so they match JAX exactly.

Anything a program cannot hold fails here, at lowering time, with a
:class:`LoweringError` naming the construct and the compressor: an op not in
the namespace, ``bool(x)``/``float(x)`` on a traced value (data-dependent
Python control flow), ``np.asarray(x)``, unsupported indexing.
"""
from __future__ import annotations

import operator
from typing import Any, NamedTuple

import numpy as np

from compressors.ops import OP_NAMES, Fused


class LoweringError(ValueError):
    """A compressor uses something the MindSpore lowering cannot compile."""


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

    def __repr__(self):
        return f"Var(v{self.id}: {self.dtype.name}{list(self.shape)})"

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d traced array")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getitem__(self, idx):
        return self.prog.bind("getitem", (self,), {"index": _static_index(self, idx)})

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


def _binary(name, fn):
    def method(self, other):
        return self.prog.bind(name, (self, other), {})

    def rmethod(self, other):
        return self.prog.bind(name, (other, self), {})
    return method, rmethod


for _name, _fn in BINARY.items():
    _m, _r = _binary(_name, _fn)
    setattr(Var, f"__{_name}__" if _name not in ("and", "or") else f"__{_name}__", _m)
    if _name not in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(Var, f"__r{_name}__", _r)
for _name in UNARY:
    setattr(Var, f"__{_name}__", (lambda n: lambda self: self.prog.bind(n, (self,), {}))(_name))


def _static_index(var, idx):
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


def jax_fn(op, attrs):
    """The reference (JAX) function whose eval_shape gives the output avals."""
    import jax.numpy as jnp

    from backends.jax.ops import OPS as J

    if op in BINARY:
        return BINARY[op]
    if op in UNARY:
        return UNARY[op]
    if op == "getitem":
        return lambda x: x[attrs["index"]]
    if op == "asarray":
        return lambda: jnp.asarray(attrs["value"])
    if op == "comm_sum":
        return lambda x: x
    if op == "comm_gather":
        return lambda x: jnp.stack([x] * attrs["n"])
    if op == "scatter_add":
        return lambda idx, vals: J.scatter_add(attrs["size"], idx, vals)
    fn = getattr(J, op)
    kw = {k: v for k, v in attrs.items() if k not in ("origin", "site")}
    return lambda *a: fn(*a, **kw)


class Program:
    """The recorded straight-line program."""

    def __init__(self, who: str):
        self.who = who
        self.eqns: list[Eqn] = []
        self.inputs: list[Var] = []
        self._next = 0
        self.rng_sites = 0

    def new_var(self, shape, dtype, const=None, origin=None) -> Var:
        self._next += 1
        return Var(self, self._next, shape, dtype, const, origin)

    def input(self, shape, dtype) -> Var:
        v = self.new_var(shape, dtype)
        self.inputs.append(v)
        return v

    def bind(self, op: str, args: tuple, attrs: dict, origin=None, const=None):
        import jax

        def spec(a):
            if isinstance(a, Var):
                return jax.ShapeDtypeStruct(a.shape, a.dtype)
            if isinstance(a, (list, tuple)):
                return type(a)(spec(x) for x in a) if not hasattr(a, "_fields") else tuple(spec(x) for x in a)
            return a

        for a in args:
            if isinstance(a, Var) and a.prog is not self:
                raise LoweringError(f"{self.who}: a traced array from another program was used in {op}")
        arr_pos = [i for i, a in enumerate(args) if _has_var(a)]
        specs = [spec(args[i]) for i in arr_pos]
        fn = jax_fn(op, attrs)

        def call(*arrs):
            full = list(args)
            for i, s in zip(arr_pos, arrs):
                full[i] = s
            return fn(*full)

        try:
            out = jax.eval_shape(call, *specs)
        except LoweringError:
            raise
        except Exception as exc:  # a shape/dtype error in the compressor itself
            raise LoweringError(f"{self.who}: op {op} failed on {args!r}: {exc}") from None
        single = not isinstance(out, (tuple, list))
        leaves = (out,) if single else tuple(out)
        outs = tuple(self.new_var(o.shape, o.dtype, origin=origin) for o in leaves)
        if const is not None:
            outs[0].const = const
        self.eqns.append(Eqn(op, tuple(args), dict(attrs), outs, "one" if single else "tuple"))
        return outs[0] if single else outs


def _has_var(a) -> bool:
    if isinstance(a, Var):
        return True
    if isinstance(a, (list, tuple)):
        return any(_has_var(x) for x in a)
    return False


class TracingOps(Fused):
    """An ``Ops`` that records calls into a :class:`Program`."""

    name = "mindspore-trace"

    def __init__(self, prog: Program):
        self._prog = prog

    def __getattr__(self, op):
        if op.startswith("__"):
            raise AttributeError(op)
        raise LoweringError(f"{self._prog.who}: op {op!r} is not in the ops namespace "
                            f"(known: {', '.join(OP_NAMES)}); the MindSpore lowering has no rule for it")

    def _b(self, op, args, **attrs):
        return self._prog.bind(op, args, attrs)

    # creation (constants are folded into NumPy where static)
    def asarray(self, x, dtype=None):
        if isinstance(x, Var):
            return x if dtype is None else self.astype(x, dtype)
        import jax.numpy as jnp
        val = np.asarray(jnp.asarray(x, dtype=dtype))
        return self._prog.bind("asarray", (), {"value": val}, const=val)

    def zeros(self, shape, dtype):
        return self._b("zeros", (), shape=tuple(int(s) for s in shape), dtype=np.dtype(dtype))

    def full(self, shape, value, dtype):
        if isinstance(value, Var):
            raise LoweringError(f"{self._prog.who}: ops.full with a traced value (use ops.where or *)")
        return self._b("full", (), shape=tuple(int(s) for s in shape), value=value, dtype=np.dtype(dtype))

    def arange(self, n):
        return self._b("arange", (), n=int(n))

    def reshape(self, x, shape):
        return self._b("reshape", (x,), shape=tuple(int(s) for s in shape))

    def concatenate(self, xs, axis=0):
        return self._b("concatenate", (tuple(xs),), axis=int(axis))

    def stack(self, xs):
        return self._b("stack", (tuple(xs),))

    def pad(self, x, after):
        return self._b("pad", (x,), after=int(after))

    def transpose(self, x):
        return self._b("transpose", (x,))

    def astype(self, x, dtype):
        return self._b("astype", (x,), dtype=np.dtype(dtype))

    def bitcast(self, x, dtype):
        return self._b("bitcast", (x,), dtype=np.dtype(dtype))

    def sum(self, x, axis=None):
        return self._b("sum", (x,), axis=axis)

    def max(self, x, axis=None):
        return self._b("max", (x,), axis=axis)

    def top_k(self, x, k):
        return self._b("top_k", (x,), k=int(k))

    def gather(self, x, idx):
        return self._b("gather", (x, idx))

    def scatter_add(self, size, idx, vals):
        return self._b("scatter_add", (idx, vals), size=int(size))

    def nonzero(self, mask, capacity):
        return self._b("nonzero", (mask,), capacity=int(capacity))

    def key(self, seed):
        from backends.mindspore.runtime import np_key
        if isinstance(seed, Var):
            raise LoweringError(f"{self._prog.who}: ops.key needs a static int seed")
        val = np_key(seed)
        return self._prog.bind("asarray", (), {"value": val}, const=val)

    def fold_in(self, key, data):
        from backends.mindspore.runtime import np_fold_in
        origin = getattr(key, "origin", None)
        if isinstance(key, Var) and key.const is not None and not isinstance(data, Var):
            val = np_fold_in(key.const, data)
            return self._prog.bind("asarray", (), {"value": val}, origin=origin, const=val)
        if not isinstance(data, Var):
            data = self.asarray(np.uint32(np.int64(data) & 0xFFFFFFFF))
        return self._prog.bind("fold_in", (key, data), {}, origin=origin)

    def random_bits(self, key, shape):
        self._prog.rng_sites += 1
        return self._b("random_bits", (key,), shape=tuple(int(s) for s in shape),
                       origin=getattr(key, "origin", None), site=self._prog.rng_sites)

    def uniform(self, key, shape):
        self._prog.rng_sites += 1
        return self._b("uniform", (key,), shape=tuple(int(s) for s in shape),
                       origin=getattr(key, "origin", None), site=self._prog.rng_sites)

    def pack_bits(self, codes, bits):
        return self._b("pack_bits", (codes,), bits=int(bits))

    def unpack_bits(self, words, bits, count):
        return self._b("unpack_bits", (words,), bits=int(bits), count=int(count))


def _elementwise(name, nargs):
    def method(self, *args):
        if len(args) != nargs:
            raise LoweringError(f"{self._prog.who}: ops.{name} takes {nargs} arrays")
        return self._prog.bind(name, tuple(args), {})
    return method


for _op, _n in (("abs", 1), ("sign", 1), ("sqrt", 1), ("floor", 1), ("isfinite", 1), ("maximum", 2),
                ("minimum", 2), ("where", 3), ("frexp", 1), ("ldexp", 2), ("matmul", 2)):
    setattr(TracingOps, _op, _elementwise(_op, _n))

missing = set(OP_NAMES) - {n for n in dir(TracingOps) if not n.startswith("_")}
assert not missing, f"TracingOps lacks {missing}"
