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
  (``compressors.fused.Fused``): each becomes its primitive composition, which
  is what gets compiled;
* the cost model (:mod:`compressors.cost`) traces with ``record_fused=True``:
  a fused op is one equation at its own inputs and outputs, the one-pass
  kernel a backend may give it, not the composition that defines it.

:func:`trace_codec` traces what one tensor costs per exchange: a single
worker's encode (every round) and the decode of n workers' payloads, split in
two equation lists (:class:`CodecProgram`).

The pieces: :mod:`compressors.traced` (``Var``, ``Eqn``, ``LoweringError``,
static indexing, :func:`reference_fn`), :mod:`compressors.tracing_ops`
(``TracingOps``) and, here, :class:`Program` and :func:`trace_codec`; every
name is importable from this module.

Anything a program cannot hold fails here, at trace time, with a
:class:`LoweringError` naming the construct and the compressor: an op not in
the namespace, ``bool(x)``/``float(x)`` on a traced value (data-dependent
Python control flow), ``np.asarray(x)``, unsupported indexing.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from compressors.traced import (BINARY, COMM_OPS, UNARY, Eqn, LoweringError, Var, has_var,  # noqa: F401
                                reference_fn, static_index, vars_of)
from compressors.tracing_ops import TracingOps  # noqa: F401  (re-exported)


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

    @property
    def x64(self) -> bool:
        """Whether the program computes with 64-bit types: exactly when one of
        its inputs is float64 (the ops namespace computes float64 in float64),
        whatever JAX's global ``jax_enable_x64`` says."""
        seen, flag = getattr(self, "_x64_seen", (-1, False))
        if seen != len(self.inputs):  # rescanned only when inputs were added
            flag = any(v.dtype == np.float64 for v in self.inputs)
            self._x64_seen = (len(self.inputs), flag)
        return flag

    def x64_scope(self):
        """JAX's x64 flag set to :attr:`x64` for the duration (every shape,
        dtype and constant of the program is taken under it, so a traced
        program depends on its compressor and inputs only)."""
        import jax

        return jax.enable_x64(self.x64)

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
        x64 = self.x64
        key = _shape_key(op, args, attrs, self.reference)
        key = key + (x64,) if key is not None else None
        found = _SHAPES.get(key) if key is not None else None
        if found is None:
            arr_pos = [i for i, a in enumerate(args) if has_var(a)]
            specs = [spec(args[i]) for i in arr_pos]
            fn = self.reference_fn(op, attrs)

            def call(*arrs):
                full = list(args)
                for i, s in zip(arr_pos, arrs):
                    full[i] = s
                return fn(*full)

            try:
                with jax.enable_x64(x64):
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
    links: tuple = ()    # (id sent, id received) per array a collective delivered


class TracingCommunicator:
    """A communicator for :func:`compressors.protocol.run` over a traced
    program with one local worker out of ``n``: a SUM round delivers a fresh
    input of the payload's shape, a GATHER round one with a leading axis n, a
    SCATTER round this worker's n parts (no equation: communication is not
    codec work). It records what it sent
    and received, and where in the program the last call happened."""

    def __init__(self, prog: Program, n: int):
        self.prog, self.n = prog, int(n)
        self.sent: list = []
        self.received: list[Received] = []
        self.links: list[tuple[int, int]] = []
        self.boundary = 0

    def _deliver(self, law: str, arrays: list, shape_of) -> list:
        out = []
        for per_worker in arrays:
            (a,) = per_worker  # one local worker
            if isinstance(a, Var):
                self.sent.append(a)
                shape, dtype = a.shape, a.dtype
            else:
                arr = np.asarray(a)
                shape, dtype = arr.shape, arr.dtype
            out.append(self.prog.input(shape_of(tuple(shape)), dtype))
            if isinstance(a, Var):
                self.links.append((a.id, out[-1].id))
        self.received.append(Received(law, tuple(o.shape for o in out), tuple(o.dtype.name for o in out)))
        self.boundary = len(self.prog.eqns)
        return out

    def sum(self, ops, arrays: list) -> list:
        return self._deliver("sum", arrays, lambda shape: shape)

    def gather(self, ops, arrays: list) -> list:
        return self._deliver("gather", arrays, lambda shape: (self.n,) + shape)

    def scatter(self, ops, arrays: list) -> list:
        """A SCATTER round: per array, this worker's n received parts ``(n, S, ...)``
        (``compressors.communicators.shard_rows``), in the workers' form (a list of one)."""
        from compressors.communicators import shard_rows

        got = self._deliver("scatter", arrays, lambda shape: (self.n, shard_rows(shape[0], self.n)) + shape[1:])
        return [[g] for g in got]


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
    return CodecProgram(who, int(n), enc, dec, tuple(comm.received), prog, tuple(comm.links))
