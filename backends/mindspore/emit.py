"""Emit MindSpore source for a traced program and compile it into a GRAPH_MODE Cell.

:func:`emit` walks the live equations of a :class:`~backends.mindspore.trace.Program`
and asks the rule table (``backends.mindspore.rules.RULES``) for the source
lines of each op; :func:`build_cell` writes the source to a real file (graph
mode reads source files) and instantiates the ``nn.Cell``.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from backends.mindspore.rules import RULES
from backends.mindspore.deadcode import drop_unread
from backends.mindspore.rules_fused import SHADOWED
from backends.mindspore.trace import LOWERED_FUSED, LoweringError, Program, Var

MS_DTYPES = {"float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8",
             "uint16", "uint32", "uint64", "bool"}


def _dt(dtype) -> str:
    name = np.dtype(dtype).name
    return "ms.bool_" if name == "bool" else f"ms.{name}"


class Emitter:
    """Names values, holds constants and primitives, collects source lines."""

    def __init__(self, who: str, rng: str = "exact", rank: int = 0, seed: int = 0, device: str = "CPU"):
        self.who, self.rng, self.rank, self.seed, self.device = who, rng, rank, seed, device
        self.lines: list[str] = []
        self.objs: dict[str, Any] = {}
        self.memo: dict = {}  # per-graph constants rules share (e.g. native.py's power-of-two tables)
        self._scalars: dict = {}
        self._n = 0
        self.needed: set[int] | None = None  # ids of the values the outputs depend on (set by emit)
        self.prog: Program | None = None  # the program being emitted (set by emit)
        self._producers: dict = {}  # var id -> the equation whose rule wrote it
        self._consumers: dict = {}  # var id -> the live equations that read it (set by emit)
        self._outputs: set = set()  # ids of the values the graph returns or assigns (set by emit)
        self._presized: dict = {}  # var id -> the shape its tensor already has (a host kernel's reshaped output)
        self._aliases: dict = {}  # var id -> the value whose tensor it names (an identity rule's output)
        self._f32: dict = {}  # bfloat16 var id -> a float32 Var holding its exact upcast (emit_eqn)

    @property
    def native(self) -> bool:
        """Whether the graph is for a device other than CPU: rules then emit native ops only
        (``backends.mindspore.native``) instead of host kernels."""
        return self.device != "CPU"

    def host(self, factory, *args, op: str, hint: str = "host") -> str:
        """A host kernel ``factory(*args)`` (``ops.Custom(func_type="pyfunc")``, CPU only) in the
        graph; in a graph for another device: LoweringError naming the kernel and ``op``."""
        if self.native:
            raise self.error(f"op {op!r} needs the host kernel {factory.__name__} (pyfunc custom ops run on "
                             f"CPU only), which device {self.device} cannot run")
        return self.prim(factory(*args), hint)

    def note_outputs(self, eqn) -> None:
        for o in eqn.outs:
            self._producers[o.id] = eqn

    def producer(self, v):
        """The equation, already emitted, whose output ``v`` is (None for an input or constant)."""
        return self._producers.get(v.id) if isinstance(v, Var) else None

    def unreshaped(self, v):
        """``v``, or, where ``v`` is a reshape of another value of its dtype, that value: a
        host kernel reshapes its NumPy view for free, where MindSpore's CPU Reshape of a
        graph input is a copy (8 ms for 2900x2900 float32)."""
        while isinstance(v, Var):
            p = self.producer(v)
            if v.id in self._aliases:
                v = self._aliases[v.id]
            elif p is not None and p.op == "reshape" and isinstance(p.args[0], Var) and p.args[0].dtype == v.dtype \
                    and p.args[0].shape != ():  # a pyfunc gets a 0-d tensor as a Python number, not an array
                v = p.args[0]
            else:
                break
        return v

    def reshaped_as(self, v: Var) -> tuple:
        """The shape a host kernel should give its output ``v``: where ``v``'s one reader
        is a reshape (and ``v`` is not returned), the reshape's, which then names the
        kernel's tensor instead of copying it (:meth:`presized`); else ``v.shape``."""
        readers = self._consumers.get(v.id, ())
        if v.id in self._outputs or len(readers) != 1 or readers[0].op != "reshape" or readers[0].outs[0].shape == ():
            return v.shape  # (a pyfunc's 0-d output comes back with shape (1,))
        out = readers[0].outs[0]
        self._presized[v.id] = out.shape
        return out.shape

    def presized(self, v: Var, shape) -> bool:
        """Whether ``v``'s tensor already has ``shape`` (a host kernel wrote it so)."""
        return self._presized.get(v.id) == tuple(shape)

    def tensor_shape(self, v: Var) -> tuple:
        """The shape ``v``'s MindSpore tensor has (a host kernel may have written it reshaped)."""
        return self._presized.get(v.id, tuple(v.shape))

    def named(self, v):
        """The value whose tensor ``v`` names (following identity rules' aliases)."""
        while isinstance(v, Var) and v.id in self._aliases:
            v = self._aliases[v.id]
        return v

    def expand(self, eqn) -> None:
        """Lower the recorded fused op ``eqn`` through its defining composition
        (``compressors.fused.Fused``), traced into the program now, each primitive by its rule."""
        from backends.mindspore.trace import Eqn, TracingOps
        from compressors.fused import Fused
        prog = self.prog
        kwargs = {k: v for k, v in eqn.attrs.items() if k != "arg_names"}
        kwargs.update(zip(eqn.attrs["arg_names"], eqn.args))
        start = len(prog.eqns)
        out = getattr(Fused, eqn.op)(TracingOps(prog, record=frozenset()), **kwargs)
        sub = prog.eqns[start:]
        del prog.eqns[start:]
        outs = (out,) if len(eqn.outs) == 1 else tuple(out)
        live, need = _live(prog, [v for v in outs if isinstance(v, Var)], self, sub)
        self.needed |= need
        for e in live:
            emit_eqn(self, prog, e, Eqn)
        for o, v in zip(eqn.outs, outs):
            self.assign(o, self.operand(v, o.dtype))

    def used(self, v: Var) -> bool:
        """Whether a later equation or an output reads ``v``: a rule need not write an output
        nobody reads (top_k's values, when only its indices are used)."""
        return self.needed is None or v.id in self.needed

    def error(self, msg: str) -> LoweringError:
        return LoweringError(f"{self.who}: {msg}")

    def name(self, v: Var) -> str:
        return f"v{v.id}"

    def ref(self, v) -> str:
        if not isinstance(v, Var):
            raise self.error(f"expected a traced array, got {v!r}")
        return self.name(v)

    def dt(self, dtype) -> str:
        if np.dtype(dtype).name not in MS_DTYPES:
            raise self.error(f"dtype {np.dtype(dtype).name} has no MindSpore equivalent")
        return _dt(dtype)

    def line(self, s: str) -> None:
        self.lines.append(s)

    def assign(self, v: Var, expr: str) -> None:
        self.line(f"{self.name(v)} = {expr}")

    def alias(self, v: Var, x: Var) -> None:
        """``v`` is ``x``'s tensor itself (an identity: a same-dtype bitcast, a pad by
        nothing, a concatenation of one; a reshape a host kernel already did)."""
        if x.dtype == v.dtype and x.size == v.size:
            self._aliases[v.id] = x
            if x.id in self._f32 and x.shape == v.shape:
                self._f32[v.id] = self._f32[x.id]
        self.assign(v, self.ref(x))

    def f32_of(self, v: Var):
        """The float32 Var already holding bfloat16 ``v``'s exact upcast, or None."""
        return self._f32.get(v.id)

    def carried(self, v: Var, up: Var) -> None:
        """Float32 ``up`` holds bfloat16 ``v``'s exact upcast: readers of ``v`` through float32 take it."""
        self._f32[v.id] = up

    def tmp(self, expr: str) -> str:
        self._n += 1
        name = f"t{self._n}"
        self.line(f"{name} = {expr}")
        return name

    def _attr(self, obj, hint: str) -> str:
        self._n += 1
        name = f"{hint}{self._n}"
        self.objs[name] = obj
        return f"self.{name}"

    def prim(self, obj, hint: str = "p") -> str:
        return self._attr(obj, hint)

    def prim_expr(self, src: str, hint: str = "p") -> str:
        from mindspore import ops
        return self._attr(eval(src, {"ops": ops}), hint)  # noqa: S307 (our own constant strings)

    def const(self, value) -> str:
        import mindspore as ms
        value = np.asarray(value)
        name = value.dtype.name
        if name == "bfloat16":
            return f"ops.cast({self._attr(ms.Tensor(value.astype(np.float32)), 'c')}, ms.bfloat16)"
        if name not in MS_DTYPES:
            raise self.error(f"constant of dtype {name}")
        return self._attr(ms.Tensor(np.array(value, order="C")), "c")

    def scalar(self, value, dtype) -> str:
        dtype = np.dtype(dtype)
        key = (repr(value), dtype.name)
        if key not in self._scalars:
            if dtype.name == "bfloat16":
                self._scalars[key] = self.const(np.asarray(value, np.float32).astype(dtype))
            else:
                self._scalars[key] = self.const(np.asarray(value).astype(dtype))
        return self._scalars[key]

    def operand(self, a, dtype) -> str:
        dtype = np.dtype(dtype)
        if isinstance(a, Var):
            return self.name(a) if a.dtype == dtype else f"ops.cast({self.name(a)}, {self.dt(dtype)})"
        if isinstance(a, (bool, int, float, np.generic, np.ndarray)):
            arr = np.asarray(a)
            return self.scalar(arr.item(), dtype) if arr.ndim == 0 else self.const(arr.astype(dtype))
        raise self.error(f"operand {a!r} is neither a traced array nor a number")

    def filled(self, shape, value, dtype) -> str:
        shape = tuple(int(s) for s in shape)
        if any(s == 0 for s in shape):
            return f"ops.zeros({shape!r}, {self.dt(dtype)})"
        s = self.scalar(value, dtype)
        return s if shape == () else f"ops.broadcast_to({s}, {shape!r})"


def live_eqns(prog: Program, outputs: Sequence[Var], em: "Emitter | None" = None):
    """The equations the outputs depend on, in program order (dead code removed)."""
    return _live(prog, outputs, em)[0]


def _live(prog: Program, outputs: Sequence[Var], em: "Emitter | None" = None, eqns=None):
    """(the live equations of ``eqns`` (default: the program's), the ids of every value the
    outputs depend on). With an emitter: what its rules read (a draw from MindSpore's own
    generator, rng "fast", reads no key, so the key's fold_in is dead code, not a side-effect
    node MindSpore would have to drop)."""
    from backends.mindspore.rules_random import reads_key
    need = {v.id for v in outputs}
    keep = []
    for eqn in reversed(prog.eqns if eqns is None else eqns):
        if any(o.id in need for o in eqn.outs):
            keep.append(eqn)
            if em is not None and eqn.op in ("random_bits", "random_words", "uniform") and not reads_key(em, eqn):
                continue
            for a in _vars(eqn.args):
                need.add(a.id)
    return keep[::-1], need


def _vars(args):
    for a in args:
        if isinstance(a, Var):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from _vars(a)


BF16_NATIVE = {"asarray", "zeros", "full", "arange", "astype", "bitcast", "comm_sum", "comm_gather"}
# ops whose float32 result on exact bf16 upcasts is itself bf16-exact (no rounding): that result
# stays the output's float32 shadow, so a chain of them casts once, not once per op
BF16_EXACT = {"getitem", "reshape", "concatenate", "stack", "pad", "transpose", "gather", "where", "neg", "abs"}


def emit(em: Emitter, prog: Program, outputs: Sequence[Var]) -> None:
    """Run the rule of every live equation (the driver of the table).

    bfloat16: MindSpore's CPU kernels mostly lack it, so every other op runs in
    float32 on exact upcasts and rounds its result back to bfloat16 — what XLA
    does for bf16 on CPU (a single + - * / sqrt rounded once from float32 is the
    correctly rounded bf16 result); ``sum`` rounds after every halving step.
    """
    from backends.mindspore.trace import Eqn
    with prog.x64_scope():  # rules take dtypes and constants from JAX: as the trace did
        _emit(em, prog, outputs, Eqn)


def _emit(em: Emitter, prog: Program, outputs: Sequence[Var], Eqn) -> None:
    eqns, em.needed = _live(prog, outputs, em)
    em.prog = prog
    em._outputs = {v.id for v in outputs}
    for eqn in eqns:
        for a in set(_vars(eqn.args)):
            em._consumers.setdefault(a.id, []).append(eqn)
    for eqn in eqns:
        emit_eqn(em, prog, eqn, Eqn)


def emit_eqn(em: Emitter, prog: Program, eqn, Eqn) -> None:
    """Run one equation's rule (bfloat16 operands through float32 shadows, as :func:`emit` says)."""
    rule = RULES.get(eqn.op)
    if rule is None:
        raise em.error(f"op {eqn.op!r} has no MindSpore lowering rule")
    em.note_outputs(eqn)
    if eqn.op in BF16_NATIVE or not any(v.dtype.name == "bfloat16" for v in list(_vars(eqn.args)) + list(eqn.outs)):
        rule(em, eqn)
        return
    if eqn.op in LOWERED_FUSED and eqn.op not in SHADOWED:  # bf16 ops round after each: lower them one by one
        em.expand(eqn)
        return

    def sub(a):
        if isinstance(a, Var) and a.dtype.name == "bfloat16":
            if a.id not in em._f32:
                em._f32[a.id] = prog.new_var(a.shape, np.float32)
                em.line(f"{em.name(em._f32[a.id])} = ops.cast({em.name(a)}, ms.float32)")
            return em._f32[a.id]
        if isinstance(a, (list, tuple)) and not isinstance(a, np.ndarray):
            return type(a)(sub(x) for x in a)
        return a

    args = tuple(sub(a) for a in eqn.args)
    outs = tuple(prog.new_var(o.shape, np.float32) if o.dtype.name == "bfloat16" else o for o in eqn.outs)
    em.needed |= {so.id for o, so in zip(eqn.outs, outs) if so is not o and em.used(o)}
    attrs = dict(eqn.attrs, round_to="bfloat16") if eqn.op in ("sum", "scatter_add") else eqn.attrs
    shadowed = Eqn(eqn.op, args, attrs, outs, eqn.out_tree)
    em.note_outputs(shadowed)
    rule(em, shadowed)
    for o, so in zip(eqn.outs, outs):
        if so is not o and em.used(o):
            if eqn.op in BF16_EXACT:
                em.carried(o, so)
            em.line(f"{em.name(o)} = ops.cast({em.name(so)}, ms.bfloat16)")  # (dropped when nothing reads it)


_CELL_TEMPLATE = '''"""Generated by backends.mindspore.lower for {who} — do not edit."""
import mindspore as ms
from mindspore import nn, ops


class Lowered(nn.Cell):
    def __init__(self, objs):
        super().__init__(auto_prefix=False)  # sub-Cells (a schedule's phases) keep their Parameters' names
        for key, value in objs.items():
            setattr(self, key, value)

    def construct(self, {args}):
{body}
'''


def cache_dir() -> Path:
    d = Path(os.environ.get("KFSIM_MS_CACHE", Path.home() / ".cache" / "kfsim" / "mindspore_lowered"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def build_cell(who: str, args: Sequence[str], body: Sequence[str], objs: dict):
    """Write the generated source to a file, import it, instantiate the Cell."""
    body = drop_unread(body)
    src = _CELL_TEMPLATE.format(who=who.replace('"', "'"), args=", ".join(args) if args else "",
                                body="\n".join("        " + b for b in body) or "        pass")
    digest = hashlib.sha1(src.encode()).hexdigest()[:16]
    path = cache_dir() / f"lowered_{digest}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(src)
        tmp.replace(path)
    modname = f"kfsim_lowered_{digest}"
    mod = sys.modules.get(modname)
    if mod is None:
        spec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        spec.loader.exec_module(mod)
    cell = mod.Lowered(objs)
    cell.source_path = str(path)
    return cell


def program_cell(prog: Program, outputs: Sequence[Var], who: str, rng="exact", rank=0, seed=0, device="CPU"):
    """A Cell computing ``outputs`` from ``prog.inputs`` (positional arguments), lowered for
    ``device`` (not CPU: native ops only; the Cell still runs wherever MindSpore was set up)."""
    em = Emitter(who, rng, rank, seed, device)
    emit(em, prog, outputs)
    args = [em.name(v) for v in prog.inputs]
    ret = "".join(em.name(v) + ", " for v in outputs)
    return build_cell(who, args, em.lines + [f"return ({ret})"], em.objs)
