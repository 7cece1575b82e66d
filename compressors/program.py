"""Trace a compressor into a straight-line op program (backend-neutral).

A :class:`TracingOps` is an ``Ops`` whose arrays are :class:`Var` s. Running a
compressor's pure functions on it records every op call (and every array
operator) as an :class:`Eqn` ``(op, args, attrs) -> outs`` in a
:class:`Program`; Python control flow runs at trace time on static shapes, so
the program is straight-line. Shapes and dtypes of results come from
``jax.eval_shape`` of a *reference binding* of the namespace (an ``Ops``
whose arrays are JAX arrays — ``backends.jax``'s, injected by the caller:
this module imports no backend), so they match the reference exactly.

Two consumers:

* the MindSpore lowering (``backends.mindspore.trace`` binds the JAX
  reference and adds its own key handling) traces *through* fused ops
  (``compressors.ops.Fused``): each becomes its primitive composition, which
  is what gets compiled;
* the cost model (:mod:`compressors.cost`) traces with ``record_fused=True``:
  a fused op is one equation at its own inputs and outputs, the one-pass
  kernel a backend may give it, not the composition that defines it.

:func:`trace_codec` traces what one tensor costs per exchange: a single
worker's encode (every round) and the decode of n workers' payloads, split in
two equation lists (:class:`CodecProgram`).

Anything a program cannot hold fails here, at trace time, with a
:class:`LoweringError` naming the construct and the compressor: an op not in
the namespace, ``bool(x)``/``float(x)`` on a traced value (data-dependent
Python control flow), ``np.asarray(x)``, unsupported indexing.
"""
from __future__ import annotations

import inspect
import operator
from typing import Any, NamedTuple

import numpy as np

from compressors.ops import FUSED_NAMES, OP_NAMES, Fused


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
COMM_OPS = ("comm_sum", "comm_gather")   # a lowering's traced collectives (attrs: n)


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
    if op == "comm_sum":
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


class Program:
    """The recorded straight-line program.

    ``reference`` is the reference binding (an ``Ops`` on JAX arrays) whose
    ``jax.eval_shape`` gives every result's shape and dtype."""

    def __init__(self, who: str, reference):
        self.who = who
        self.reference = reference
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

    def reference_fn(self, op: str, attrs: dict):
        return reference_fn(op, attrs, self.reference)

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
        key = _shape_key(op, args, attrs, self.reference)
        found = _SHAPES.get(key) if key is not None else None
        if found is None:
            arr_pos = [i for i, a in enumerate(args) if _has_var(a)]
            specs = [spec(args[i]) for i in arr_pos]
            fn = self.reference_fn(op, attrs)

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
            found = (single, tuple((tuple(o.shape), np.dtype(o.dtype)) for o in leaves))
            if key is not None:
                if len(_SHAPES) > 100_000:
                    _SHAPES.clear()
                _SHAPES[key] = found
        single, avals = found
        outs = tuple(self.new_var(s, d, origin=origin) for s, d in avals)
        if const is not None:
            outs[0].const = const
        self.eqns.append(Eqn(op, tuple(args), dict(attrs), outs, "one" if single else "tuple"))
        return outs[0] if single else outs


_SHAPES: dict = {}   # (op, argument avals, attrs, reference) -> (single, output avals): eval_shape once


def _freeze(x):
    """A hashable stand-in for an argument or attribute that fixes its aval
    (Vars by shape and dtype, scalars by type and value); TypeError if none."""
    if isinstance(x, Var):
        return ("V", x.shape, x.dtype.str)
    if isinstance(x, np.ndarray):
        return ("A", x.shape, x.dtype.str, x.tobytes())
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_freeze(a) for a in x))
    if isinstance(x, dict):
        return ("D", tuple(sorted((k, _freeze(v)) for k, v in x.items())))
    if isinstance(x, slice):
        return ("S", x.start, x.stop, x.step)
    if isinstance(x, np.dtype):
        return ("T", x.str, x.name)
    if x is None or isinstance(x, (bool, int, float, complex, str, np.generic)):
        return (type(x).__name__, x if not isinstance(x, np.generic) else (x.dtype.str, x.item()))
    if isinstance(x, type):
        return ("C", x.__module__, x.__qualname__)
    raise TypeError(type(x))


def _shape_key(op, args, attrs, reference):
    try:
        return (op, _freeze(tuple(args)), _freeze(attrs), id(reference))
    except TypeError:
        return None


def _has_var(a) -> bool:
    if isinstance(a, Var):
        return True
    if isinstance(a, (list, tuple)):
        return any(_has_var(x) for x in a)
    return False


def vars_of(a):
    """Every Var in an argument (a Var, or nested tuples/lists of them)."""
    if isinstance(a, Var):
        yield a
    elif isinstance(a, (list, tuple)) and not isinstance(a, np.ndarray):
        for x in a:
            yield from vars_of(x)


class TracingOps(Fused):
    """An ``Ops`` that records calls into a :class:`Program`.

    ``record_fused``: False (the lowering) traces a fused op through its
    defining composition; True (the cost model) records it as one equation
    named after it, its static arguments in ``attrs`` and the names of its
    array arguments in ``attrs["arg_names"]``."""

    name = "trace"

    def __init__(self, prog: Program, *, record_fused: bool = False):
        self._prog = prog
        self.record_fused = record_fused

    def _unknown(self, op):
        return (f"{self._prog.who}: op {op!r} is not in the ops namespace "
                f"(known: {', '.join(OP_NAMES)}); a traced program cannot hold it")

    def __getattr__(self, op):
        if op.startswith("__") or op in ("_prog", "record_fused"):
            raise AttributeError(op)
        raise LoweringError(self._unknown(op))

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

    # keys: static key arithmetic is folded to constants with the reference binding
    def _const_key(self, val, origin=None):
        val = np.asarray(val)
        return self._prog.bind("asarray", (), {"value": val}, origin=origin, const=val)

    def key(self, seed):
        if isinstance(seed, Var):
            raise LoweringError(f"{self._prog.who}: ops.key needs a static int seed")
        return self._const_key(self._prog.reference.key(seed))

    def fold_in(self, key, data):
        origin = getattr(key, "origin", None)
        if isinstance(key, Var) and key.const is not None and not isinstance(data, Var):
            return self._const_key(self._prog.reference.fold_in(key.const, data), origin)
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


def _fused(name):
    composed = getattr(Fused, name)
    sig = inspect.signature(composed)

    def method(self, *args, **kwargs):
        if not self.record_fused:
            return composed(self, *args, **kwargs)
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        arrays, names, static = [], [], {}
        for pname, value in list(bound.arguments.items())[1:]:
            if _has_var(value):
                arrays.append(value)
                names.append(pname)
            else:
                static[pname] = value
        if name in BINARY and not static:  # Fused.add is the + operator: record it as one
            return self._prog.bind(name, tuple(arrays), {})
        return self._prog.bind(name, tuple(arrays), {**static, "arg_names": tuple(names)})

    method.__name__ = name
    method.__doc__ = composed.__doc__
    return method


for _op in FUSED_NAMES:
    setattr(TracingOps, _op, _fused(_op))

missing = set(OP_NAMES) - {n for n in dir(TracingOps) if not n.startswith("_")}
assert not missing, f"TracingOps lacks {missing}"


# ---------------------------------------------------------------------------------------------
# Tracing one tensor's codec: a single worker's encode, the decode of n payloads
# ---------------------------------------------------------------------------------------------

class Received(NamedTuple):
    """What the traced communicator delivered in one call: the law and, per array,
    the shape and dtype every worker receives."""

    law: str
    shapes: tuple
    dtypes: tuple


class CodecProgram(NamedTuple):
    """One tensor's exchange as two straight-line programs.

    ``encode``: the live equations of one worker's encode, every round (what
    it does before and between its collectives); ``decode``: the live
    equations after the last collective (its decode of what n workers sent).
    ``received``: one entry per collective call (round order). Equations
    whose results reach no output (payload, new state, mean) are dropped:
    a compiled backend never runs them."""

    who: str
    n: int
    encode: tuple
    decode: tuple
    received: tuple
    program: Program


class TracingCommunicator:
    """A communicator for :func:`compressors.protocol.run` over a traced
    program with one local worker out of ``n``: a SUM round delivers a fresh
    input of the payload's shape, a GATHER round one with a leading axis n
    (no equation: communication is not codec work). It records what it sent
    and received, and where in the program the last call happened."""

    def __init__(self, prog: Program, n: int):
        self.prog, self.n = prog, int(n)
        self.sent: list = []
        self.received: list[Received] = []
        self.boundary = 0

    def _deliver(self, law: str, arrays: list, lead: tuple) -> list:
        out = []
        for per_worker in arrays:
            (a,) = per_worker  # one local worker
            if isinstance(a, Var):
                self.sent.append(a)
                shape, dtype = a.shape, a.dtype
            else:
                arr = np.asarray(a)
                shape, dtype = arr.shape, arr.dtype
            out.append(self.prog.input(lead + tuple(shape), dtype))
        self.received.append(Received(law, tuple(o.shape for o in out), tuple(o.dtype.name for o in out)))
        self.boundary = len(self.prog.eqns)
        return out

    def sum(self, ops, arrays: list) -> list:
        return self._deliver("sum", arrays, ())

    def gather(self, ops, arrays: list) -> list:
        return self._deliver("gather", arrays, (self.n,))


def live_eqns(eqns, outputs) -> list[int]:
    """Indices (in order) of the equations the ``outputs`` depend on."""
    need = {v.id for v in outputs if isinstance(v, Var)}
    keep = []
    for i in range(len(eqns) - 1, -1, -1):
        e = eqns[i]
        if any(o.id in need for o in e.outs):
            keep.append(i)
            need.update(v.id for v in vars_of(e.args))
    return keep[::-1]


def _tree_vars(tree) -> list:
    import jax.tree_util as jtu

    return [v for v in jtu.tree_leaves(tree) if isinstance(v, Var)]


def trace_codec(comp, shape, dtype, reference, n: int = 2, *, record_fused: bool = True,
                seed: int = 0, step: int = 0) -> CodecProgram:
    """Trace one tensor's single-worker encode (all rounds) and its decode for
    ``n`` workers (``n >= 1``): the exchange runs through
    :func:`compressors.protocol.run` with the ``Loop`` strategy and a
    :class:`TracingCommunicator` (a GATHER round's received value has a
    leading axis n; a SUM round's the payload's shape). ``reference`` is the
    reference binding for shapes (``backends.jax``'s ``OPS``). Keys are the
    constants ``make_keys(seed, step, rank 0)`` (key arithmetic folds away).
    Fused ops are single equations unless ``record_fused=False``."""
    import jax.tree_util as jtu

    from compressors.core import make_keys
    from compressors.protocol import LOOP, run

    if int(n) < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    shape = tuple(int(s) for s in shape)
    dtype = np.dtype(dtype)
    who = f"compressor {comp.spec!r}"
    scratch = Program(who + " init", reference)
    x0 = scratch.input(shape, dtype)
    state0 = comp.init(TracingOps(scratch, record_fused=record_fused), x0)
    leaves, tree = jtu.tree_flatten(state0)

    prog = Program(who, reference)
    ops = TracingOps(prog, record_fused=record_fused)
    x = prog.input(shape, dtype)
    state = jtu.tree_unflatten(tree, [prog.input(v.shape, v.dtype) if isinstance(v, Var) else v for v in leaves])
    keys = make_keys(ops, seed, step, 0)
    comm = TracingCommunicator(prog, n)
    res = run(ops, comp, [x], [state], [keys], comm, workers=LOOP)
    outputs = comm.sent + _tree_vars(res.mean) + _tree_vars(res.states)
    live = live_eqns(prog.eqns, outputs)
    enc = tuple(prog.eqns[i] for i in live if i < comm.boundary)
    dec = tuple(prog.eqns[i] for i in live if i >= comm.boundary)
    return CodecProgram(who, int(n), enc, dec, tuple(comm.received), prog)
