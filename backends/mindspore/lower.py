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
graph); ``rng="fast"`` in a graph for GPU/Ascend uses MindSpore's
``UniformInt``/``UniformReal`` seeded from (seed, rank for worker keys, call
site): statistically equivalent, the shared-key draws agree across ranks, but
the values differ from JAX and the generator state is not in the checkpoint (a
resumed run is not bit-identical). On CPU the exact host kernels are the faster
ones, so there ``fast`` is ``exact`` (``backends.mindspore.rules_random``).

What is not graph-compiled: nothing in the step. On CPU the host kernels
(threefry, float<->int bit casts, frexp/ldexp, and every fused op of
``compressors.fused`` as the NumPy backend's one-pass kernel:
``backends.mindspore.rules_fused``) are ``ops.Custom(pyfunc)`` nodes inside
the graph; lowered for another ``device`` they are native ops
(``backends.mindspore.native``) and the one host-only kernel left (bf16
scatter-add) is refused (``backends.mindspore.device``); ``init``
(run once) executes the same generated code in PyNative.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from backends.mindspore.emit import live_eqns, program_cell
from backends.mindspore.exchange import trace_exchange, trace_init
from backends.mindspore.trace import Program, Var
from compressors.core import Compressor

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
    (mean as seen by worker 0, new states). Arrays are NumPy in and out. A scheduled
    compressor runs the graph of the phase ``step`` is in (one per phase, built on first use). ``device``: the
    device the graphs are lowered for (not CPU: native ops only), whatever device runs them.
    """

    def __init__(self, comp: Compressor, avals, n: int, seed: int = 0, rng: str = "exact", mode: str = "graph",
                 device: str = "CPU"):
        import mindspore as ms
        from backends.mindspore.runtime import setup
        setup()
        comp = comp if isinstance(comp, Compressor) else __import__("compressors").parse(comp)
        self.comp, self.avals, self.n = comp, _avals(avals), n
        who = _who(comp)
        iprog, ileaves, self.tree = trace_init(comp, self.avals, who)
        self._init = program_cell(iprog, ileaves, who + " init", rng, 0, seed, device)
        self._lower = (n, seed, who, rng, device)
        self.traced, self._step = self._graph(comp)
        # a scheduled compressor (warmup, DGC's schedule) gets one graph per phase, built on
        # first use and sharing the state, as backends.mindspore.data_parallel does
        self._phases = {self._phase(0): (self.traced, self._step)}
        self._mode = mode
        if mode == "graph":
            ms.set_context(mode=ms.GRAPH_MODE)

    def init(self, grads_per_worker):
        out = []
        for g in grads_per_worker:
            res = self._init.construct(*[to_ms(x) for x in g])
            out.append([to_np(r) for r in res])
        return out

    def _graph(self, comp):
        n, seed, who, rng, device = self._lower
        t = trace_exchange(comp, self.avals, n=n, ranks=range(n), seed=seed, comm="loopback", who=who)
        outs = t.means[0] + [v for s in t.state_out for v in s]
        # inputs in order: grads of each worker, states of each worker, step
        t.prog.inputs[:] = [v for g in t.grads for v in g] + [v for s in t.state_in for v in s] + [t.step]
        return t, program_cell(t.prog, outs, who, rng, 0, seed, device)

    def _phase(self, step: int):
        """The phase ``step`` falls in (None for an unscheduled compressor: one graph)."""
        return None if self.comp.phase is None else self.comp.phase_of(int(step))

    def _phase_graph(self, step: int):
        """(traced, cell) of the phase ``step`` falls in."""
        key = self._phase(step)
        if key not in self._phases:
            self._phases[key] = self._graph(self.comp.step(int(step)))
        return self._phases[key]

    def _args(self, grads_per_worker, states, step: int) -> list:
        import mindspore as ms
        return [to_ms(x) for g in grads_per_worker for x in g] + [to_ms(x) for s in states for x in s] \
            + [ms.Tensor(np.int32(step))]

    def resident(self, grads_per_worker, states, step: int):
        """A no-argument callable that runs ``step``'s graph on these inputs, made MindSpore
        tensors once, and waits for it (its outputs stay MindSpore tensors): the exchange as a
        training graph runs it, without the NumPy copies in and out of :meth:`__call__`."""
        import mindspore as ms
        _, cell = self._phase_graph(step)
        args = self._args(grads_per_worker, states, step)

        def run():
            out = self._run(cell, args)
            ms.runtime.synchronize()
            return out
        return run

    def _run(self, cell, args):
        return cell(*args) if self._mode == "graph" else cell.construct(*args)

    def __call__(self, grads_per_worker, states, step: int):
        traced, cell = self._phase_graph(step)
        res = self._run(cell, self._args(grads_per_worker, states, step))
        res = [to_np(r) for r in res]
        k = len(traced.means[0])
        ns = len(traced.state_out[0])
        mean = res[:k]
        states = [res[k + w * ns: k + (w + 1) * ns] for w in range(self.n)]
        return mean, states


def to_ms(x):
    import mindspore as ms
    x = np.asarray(x)
    if x.dtype.name == "bfloat16":
        from mindspore import ops
        return ops.cast(ms.Tensor(x.astype(np.float32)), ms.bfloat16)
    # one copy (MindSpore's), none of NumPy's unless strided (ascontiguousarray would make 0-d 1-d)
    return ms.Tensor(x if x.flags.c_contiguous else np.array(x, order="C"))


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
