"""Lower any compressor to compiled MindSpore code (GRAPH_MODE Cells).

Three steps, jax2tf style:

1. **trace** (``backends.mindspore.trace``): run the compressor's pure
   functions on a tracing ``Ops``; get a straight-line :class:`Program`.
   The whole exchange is traced — init, every round's encode, the
   communication of each payload leaf by its round's law, and decode — so
   one compiled graph does a full step.
2. **emit** (this file + ``backends.mindspore.rules.RULES``): walk the program,
   dead code removed, and ask the table's rule for each op to write MindSpore
   source lines. An op without a rule raises :class:`LoweringError` naming
   the op and the compressor, at lowering time.
3. **compile**: the source becomes a ``nn.Cell`` subclass in a real file
   (graph mode reads source files), so ``cell(...)`` compiles under
   GRAPH_MODE; state lives in ``Parameter`` s updated with ``ops.assign``.

Communication: the exchange is the runner (``compressors.protocol.run``).
``comm="collective"`` traces one worker per process (``rank`` of ``n``) with
a traced communicator that fuses each bucket's payloads per round and law
into one flat buffer per dtype and emits one ``AllReduce`` (SUM) or
``AllGather`` (GATHER) per buffer; ``comm="loopback"`` traces all n workers
into one graph with the runner's in-process loopback (used by the
conformance tests).

RNG: ``rng="exact"`` reproduces JAX's threefry bits (host kernel inside the
graph); ``rng="fast"`` uses MindSpore's ``UniformInt``/``UniformReal`` seeded
from (seed, rank for worker keys, call site): statistically equivalent, the
shared-key draws agree across ranks, but the values differ from JAX and the
generator state is not in the checkpoint (a resumed run is not bit-identical).

What is not graph-compiled: nothing in the step. The host kernels (threefry,
float<->int bit casts, frexp/ldexp) are ``ops.Custom(pyfunc)`` nodes inside
the graph; ``init`` (run once) executes the same generated code in PyNative.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np

from backends.mindspore.rules import RULES
from backends.mindspore.trace import LoweringError, Program, TracingOps, Var
from compressors import protocol
from compressors.buckets import DEFAULT_BUCKET_BYTES
from compressors.core import Compressor, Keys

MS_DTYPES = {"float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8",
             "uint16", "uint32", "uint64", "bool"}


def _dt(dtype) -> str:
    name = np.dtype(dtype).name
    return "ms.bool_" if name == "bool" else f"ms.{name}"


class Emitter:
    """Names values, holds constants and primitives, collects source lines."""

    def __init__(self, who: str, rng: str = "exact", rank: int = 0, seed: int = 0):
        self.who, self.rng, self.rank, self.seed = who, rng, rank, seed
        self.lines: list[str] = []
        self.objs: dict[str, Any] = {}
        self._scalars: dict = {}
        self._n = 0

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


def live_eqns(prog: Program, outputs: Sequence[Var]):
    """The equations the outputs depend on, in program order (dead code removed)."""
    need = {v.id for v in outputs}
    keep = []
    for eqn in reversed(prog.eqns):
        if any(o.id in need for o in eqn.outs):
            keep.append(eqn)
            for a in _vars(eqn.args):
                need.add(a.id)
    return keep[::-1]


def _vars(args):
    for a in args:
        if isinstance(a, Var):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from _vars(a)


BF16_NATIVE = {"asarray", "zeros", "full", "arange", "astype", "bitcast", "comm_sum", "comm_gather"}


def emit(em: Emitter, prog: Program, outputs: Sequence[Var]) -> None:
    """Run the rule of every live equation (the driver of the table).

    bfloat16: MindSpore's CPU kernels mostly lack it, so every other op runs in
    float32 on exact upcasts and rounds its result back to bfloat16 — what XLA
    does for bf16 on CPU (a single + - * / sqrt rounded once from float32 is the
    correctly rounded bf16 result); ``sum`` rounds after every halving step.
    """
    from backends.mindspore.trace import Eqn
    for eqn in live_eqns(prog, outputs):
        rule = RULES.get(eqn.op)
        if rule is None:
            raise em.error(f"op {eqn.op!r} has no MindSpore lowering rule")
        if eqn.op in BF16_NATIVE or not any(v.dtype.name == "bfloat16" for v in list(_vars(eqn.args)) + list(eqn.outs)):
            rule(em, eqn)
            continue
        shadow = {}

        def sub(a):
            if isinstance(a, Var) and a.dtype.name == "bfloat16":
                if a.id not in shadow:
                    shadow[a.id] = prog.new_var(a.shape, np.float32)
                    em.line(f"{em.name(shadow[a.id])} = ops.cast({em.name(a)}, ms.float32)")
                return shadow[a.id]
            if isinstance(a, (list, tuple)) and not isinstance(a, np.ndarray):
                return type(a)(sub(x) for x in a)
            return a

        args = tuple(sub(a) for a in eqn.args)
        outs = tuple(prog.new_var(o.shape, np.float32) if o.dtype.name == "bfloat16" else o for o in eqn.outs)
        attrs = dict(eqn.attrs, round_to="bfloat16") if eqn.op in ("sum", "scatter_add") else eqn.attrs
        rule(em, Eqn(eqn.op, args, attrs, outs, eqn.out_tree))
        for o, so in zip(eqn.outs, outs):
            if so is not o:
                em.line(f"{em.name(o)} = ops.cast({em.name(so)}, ms.bfloat16)")


_CELL_TEMPLATE = '''"""Generated by backends.mindspore.lower for {who} — do not edit."""
import mindspore as ms
from mindspore import nn, ops


class Lowered(nn.Cell):
    def __init__(self, objs):
        super().__init__()
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


def program_cell(prog: Program, outputs: Sequence[Var], who: str, rng="exact", rank=0, seed=0):
    """A Cell computing ``outputs`` from ``prog.inputs`` (positional arguments)."""
    em = Emitter(who, rng, rank, seed)
    emit(em, prog, outputs)
    args = [em.name(v) for v in prog.inputs]
    ret = "".join(em.name(v) + ", " for v in outputs)
    return build_cell(who, args, em.lines + [f"return ({ret})"], em.objs)


# ---------------------------------------------------------------------------------------------
# Tracing a whole exchange
# ---------------------------------------------------------------------------------------------

class Traced(NamedTuple):
    prog: Program
    grads: list            # per local worker: list of input Vars (flattened leaves)
    state_in: list         # per local worker: list of input Vars (flattened state)
    step: Var
    means: list            # [output Vars of the mean (flattened leaves), as worker 0 decodes it]
    state_out: list        # per local worker: output Vars
    state_tree: Any
    plan: Any              # the compressor's ExchangePlan (buckets, collectives, bits)


def _flat(tree):
    import jax.tree_util as jtu
    return jtu.tree_flatten(tree)


def trace_init(comp: Compressor, avals, who: str):
    """Program: grads -> fresh state (flattened)."""
    prog = Program(who)
    ops = TracingOps(prog)
    grads = tuple(prog.input(s, d) for s, d in avals)
    state = comp.init(ops, grads)
    leaves, tree = _flat(state)
    for leaf in leaves:
        if not isinstance(leaf, Var):
            raise LoweringError(f"{who}: state leaf {leaf!r} is not an array (state must be arrays)")
    return prog, list(leaves), tree


class TracedWorkers(protocol.Loop):
    """The runner's LOOP workers, each with its own counter of random call
    sites (fast RNG seeds a draw by rank and site, so worker w's k-th draw is
    the same whether it is traced alone or beside the others)."""

    def __init__(self, prog: Program, count: int):
        self.prog, self.sites = prog, [0] * count

    def call(self, w, fn, *args):
        self.prog.rng_sites = self.sites[w]
        try:
            return fn(*args)
        finally:
            self.sites[w] = self.prog.rng_sites


class TracedCollective:
    """The communicator of a traced worker: per bucket, round and law the
    payloads are fused into one flat buffer per dtype (``protocol.fuse``) and
    each buffer becomes one ``comm_sum`` (AllReduce) or ``comm_gather``
    (AllGather) equation; empty buffers are not sent."""

    def __init__(self, prog: Program, n: int):
        self.prog, self.n = prog, n

    def _collect(self, ops, arrays, op: str, lead: tuple):
        bufs, segs = protocol.fuse(ops, [a[0] for a in arrays])
        got = [self.prog.bind(op, (b,), {"n": self.n}) if b.size else ops.zeros(lead + (0,), b.dtype)
               for b in bufs]
        return protocol.split(ops, got, segs, lead)

    def sum(self, ops, arrays):
        return self._collect(ops, arrays, "comm_sum", ())

    def gather(self, ops, arrays):
        return self._collect(ops, arrays, "comm_gather", (self.n,))


def trace_exchange(comp: Compressor, avals, *, n: int, ranks: Sequence[int], seed: int, comm: str,
                   who: str, bucket_bytes: float = DEFAULT_BUCKET_BYTES) -> Traced:
    """Trace one step of the protocol (the runner) for the local workers ``ranks``."""
    if comm not in ("collective", "loopback"):
        raise ValueError(f"comm must be 'collective' or 'loopback', got {comm!r}")
    _, init_leaves, tree = trace_init(comp, avals, who)
    prog = Program(who)
    ops = TracingOps(prog)
    grads = [tuple(prog.input(s, d) for s, d in avals) for _ in ranks]
    state_in = [[prog.input(v.shape, v.dtype) for v in init_leaves] for _ in ranks]
    states = [_unflat(tree, s) for s in state_in]
    step = prog.input((), np.int32)
    shared = ops.fold_in(ops.key(seed), step)
    shared.origin = ("shared",)
    keys = []
    for r in ranks:
        w = ops.fold_in(shared, r + 1)
        w.origin = ("worker", r)
        keys.append(Keys(w, shared))
    communicator = protocol.Loopback(n) if comm == "loopback" else TracedCollective(prog, n)
    res = protocol.run(ops, comp, grads, states, keys, communicator,
                       workers=TracedWorkers(prog, len(ranks)), bucket_bytes=bucket_bytes)
    means, outs = [list(_flat(res.mean)[0])], []
    for st in res.states:
        sleaves, stree = _flat(st)
        if stree != tree:
            raise LoweringError(f"{who}: decode returned a state of another structure ({stree} vs {tree})")
        outs.append(list(sleaves))
    return Traced(prog, [list(g) for g in grads], state_in, step, means, outs, tree, res.plan)


def _unflat(tree, leaves):
    import jax.tree_util as jtu
    return jtu.tree_unflatten(tree, leaves)


# ---------------------------------------------------------------------------------------------
# Lowered objects
# ---------------------------------------------------------------------------------------------

def _avals(tree_or_avals):
    out = []
    for a in tree_or_avals:
        if isinstance(a, tuple) and len(a) == 2 and not hasattr(a, "shape"):
            out.append((tuple(int(s) for s in a[0]), np.dtype(a[1])))
        else:
            out.append((tuple(int(s) for s in a.shape), np.dtype(getattr(a, "dtype", np.float32).__str__()
                                                               if not isinstance(a, np.ndarray) else a.dtype)))
    return out


def _who(comp) -> str:
    return f"compressor {comp.spec!r}"


class LoopbackExchange:
    """n workers in one compiled graph, combined as ``compressors.exchange`` does.

    ``init(grads_per_worker)`` -> states; ``__call__(grads_per_worker, states, step)`` ->
    (mean as seen by worker 0, new states). Arrays are NumPy in and out.
    """

    def __init__(self, comp: Compressor, avals, n: int, seed: int = 0, rng: str = "exact", mode: str = "graph"):
        import mindspore as ms
        from backends.mindspore.runtime import setup
        setup()
        comp = comp if isinstance(comp, Compressor) else __import__("compressors").parse(comp)
        self.comp, self.avals, self.n = comp, _avals(avals), n
        who = _who(comp)
        iprog, ileaves, self.tree = trace_init(comp, self.avals, who)
        self._init = program_cell(iprog, ileaves, who + " init", rng, 0, seed)
        t = trace_exchange(comp, self.avals, n=n, ranks=range(n), seed=seed, comm="loopback", who=who)
        self.traced = t
        outs = t.means[0] + [v for s in t.state_out for v in s]
        # inputs in order: grads of each worker, states of each worker, step
        t.prog.inputs[:] = [v for g in t.grads for v in g] + [v for s in t.state_in for v in s] + [t.step]
        self._step = program_cell(t.prog, outs, who, rng, 0, seed)
        self._mode = mode
        if mode == "graph":
            ms.set_context(mode=ms.GRAPH_MODE)

    def init(self, grads_per_worker):
        out = []
        for g in grads_per_worker:
            res = self._init.construct(*[to_ms(x) for x in g])
            out.append([to_np(r) for r in res])
        return out

    def __call__(self, grads_per_worker, states, step: int):
        import mindspore as ms
        args = [to_ms(x) for g in grads_per_worker for x in g] + [to_ms(x) for s in states for x in s] \
            + [ms.Tensor(np.int32(step))]
        res = self._step(*args) if self._mode == "graph" else self._step.construct(*args)
        res = [to_np(r) for r in res]
        k = len(self.traced.means[0])
        ns = len(self.traced.state_out[0])
        mean = res[:k]
        states = [res[k + w * ns: k + (w + 1) * ns] for w in range(self.n)]
        return mean, states


def to_ms(x):
    import mindspore as ms
    x = np.asarray(x)
    if x.dtype.name == "bfloat16":
        from mindspore import ops
        return ops.cast(ms.Tensor(x.astype(np.float32)), ms.bfloat16)
    return ms.Tensor(np.array(x, order="C"))


def to_np(t):
    import mindspore as ms
    if t.dtype == ms.bfloat16:
        import ml_dtypes
        from mindspore import ops
        return ops.cast(t, ms.float32).asnumpy().astype(ml_dtypes.bfloat16)
    return t.asnumpy()


def reference_eval(prog: Program, inputs: Sequence[Any]) -> dict:
    """Evaluate a traced program with the JAX reference binding, op by op.

    Returns {var id: value}; with :func:`first_mismatch` this finds the first op
    whose MindSpore lowering disagrees with the reference (a debugging aid).
    """
    import jax.numpy as jnp

    from backends.mindspore.trace import jax_fn
    env = {v.id: jnp.asarray(x) for v, x in zip(prog.inputs, inputs)}

    def val(a):
        if isinstance(a, Var):
            return env[a.id]
        if isinstance(a, (list, tuple)) and not isinstance(a, np.ndarray):
            return type(a)(val(x) for x in a)
        return a

    for eqn in prog.eqns:
        out = jax_fn(eqn.op, eqn.attrs)(*[val(a) for a in eqn.args])
        outs = (out,) if eqn.out_tree == "one" else tuple(out)
        for v, o in zip(eqn.outs, outs):
            env[v.id] = o
    return env


def first_mismatch(prog: Program, inputs: Sequence[Any], who: str = "debug"):
    """(eqn, reference value, MindSpore value) of the first op that differs, else None."""
    ref = reference_eval(prog, inputs)
    outs = [v for e in live_eqns(prog, [v for e in prog.eqns for v in e.outs]) for v in e.outs]
    cell = program_cell(prog, outs, who)
    got = cell(*[to_ms(x) for x in inputs])
    by_id = {v.id: g for v, g in zip(outs, got)}
    for eqn in prog.eqns:
        for v in eqn.outs:
            a, b = np.asarray(ref[v.id]), to_np(by_id[v.id])
            if a.size != b.size or not np.array_equal(a.ravel(), b.ravel(), equal_nan=True):
                return eqn, a, b
    return None
