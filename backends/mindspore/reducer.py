"""A compressed gradient reducer for MindSpore data-parallel training.

``CompressedReducer`` (built by :func:`compressed_reducer`) replaces
``nn.TrainOneStepCell.grad_reducer``: its ``construct(grads)`` runs, in one
compiled graph, the compressor's whole protocol for this worker

    for r in rounds:  payload_r, state = encode(g, state, keys, received[:r], r)
                      received_r = AllReduce(payload_r)      if law_r is SUM
                                   AllGather(payload_r)      if law_r is GATHER
    mean, state = decode(g, state, own, received, n)

per parameter (leaf i of the gradient tuple; keys folded with i exactly as
``Compressor.encode`` does), and returns the mean-gradient estimate the
optimizer applies. Per-worker state (EF residuals, momentum, PowerSGD Q) and
the step counter are ``Parameter(requires_grad=False)`` of the reducer, so a
checkpoint of a Cell holding net + optimizer + reducer has everything.

``collective``: ``"auto"`` (AllReduce for SUM rounds, AllGather for GATHER
rounds), ``"allgather"`` (everything gathered; SUM rounds summed in rank order,
bit-identical to ``compressors.exchange`` for any n), ``"allreduce"`` (only
for compressors whose every round is SUM; anything else is a ValueError
before training starts). The native all-reduce baseline is MindSpore's own
``nn.DistributedGradReducer`` (:func:`native_reducer`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from backends.mindspore.emit import Emitter, build_cell, emit, live_eqns, program_cell
from backends.mindspore.exchange import trace_exchange, trace_init
from backends.mindspore.lower import to_ms, to_np
from backends.mindspore.trace import LoweringError
from compressors.buckets import DEFAULT_BUCKET_BYTES
from compressors.core import Compressor, Law
from compressors.traced import COMM_OPS

COLLECTIVES = ("auto", "allgather", "allreduce")
RNG_MODES = ("exact", "fast")


def _parse(comp) -> Compressor:
    if isinstance(comp, Compressor):
        return comp
    import compressors
    return compressors.parse(comp)


def check_compatible(comp, avals, collective: str = "auto") -> None:
    """ValueError if ``comp`` cannot run over ``collective`` (checked before any worker starts)."""
    comp = _parse(comp)
    if collective not in COLLECTIVES:
        raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}, got {collective!r}")
    if collective == "allreduce":
        plans = comp.exchange_plan(abstract(avals)).leaf_rounds
        bad = sorted({r.law.value for p in plans for r in p if r.law not in (Law.SUM, Law.MAX)})
        if bad:
            raise ValueError(f"compressor {comp.spec!r} has gather-only rounds ({', '.join(bad)}); it cannot run "
                             "over all-reduce: use collective='auto' or 'allgather'")


# ops that may hold zero-size arrays in a lowered graph (constants and a reshape of one); MindSpore's CPU
# kernels fail on zero-size operands otherwise ("memcpy failed", BroadcastTo errors, SIGFPE), at run time
EMPTY_OK = ("zeros", "full", "asarray", "reshape")


def check_lowerable(comp, avals, n: int = 2) -> None:
    """Trace the protocol and init (no MindSpore needed) and check what the
    compiled graphs could not run: an op without a rule, or an op on a
    zero-size array (empty tensors take no codec ops, see
    ``compressors.core.EMPTY``; a compressor that still makes one is rejected
    here, before any worker starts, not by a crashed worker)."""
    from backends.mindspore.rules import RULES
    from compressors.traced import vars_of
    comp = _parse(comp)
    who = f"compressor {comp.spec!r}"
    iprog, ileaves, _ = trace_init(comp, avals, who + " init")
    t = trace_exchange(comp, avals, n=n, ranks=[0], seed=0, comm="collective", who=who)
    for prog, outs in ((iprog, ileaves), (t.prog, t.means[0] + t.state_out[0])):
        for eqn in live_eqns(prog, outs):
            if eqn.op not in RULES:
                raise LoweringError(f"{who}: op {eqn.op!r} has no MindSpore lowering rule")
            empty = [v for v in list(vars_of(eqn.args)) + list(eqn.outs) if v.size == 0]
            if empty and eqn.op not in EMPTY_OK:
                raise LoweringError(f"{who}: op {eqn.op!r} on a zero-size array {empty[0]!r}: MindSpore's CPU "
                                    "kernels cannot run it")


def abstract(avals) -> tuple:
    """(shape, dtype) pairs as shape-and-dtype values the compressor can plan on."""
    import jax

    return tuple(jax.ShapeDtypeStruct(tuple(s), np.dtype(d)) for s, d in avals)


def initial_state(comp, params: Sequence, *, seed: int = 0, rng: str = "exact", device: str = "CPU") -> list:
    """Fresh compressor state (flattened, NumPy) from the parameter values (as the simulator inits)."""
    comp = _parse(comp)
    avals = [(tuple(p.shape), np.dtype(np.asarray(p).dtype)) for p in params]
    prog, leaves, _ = trace_init(comp, avals, f"compressor {comp.spec!r} init")
    cell = program_cell(prog, leaves, f"compressor {comp.spec!r} init", rng, 0, seed, device)
    return [to_np(t) for t in cell.construct(*[to_ms(np.asarray(p)) for p in params])]


def compressed_reducer(comp, params: Sequence, *, n: int, rank: int, seed: int = 0, rng: str = "exact",
                       collective: str = "auto", state: Sequence | None = None, step: int = 0,
                       prefix: str = "kfsim", bucket_bytes: float = DEFAULT_BUCKET_BYTES, share_with=None,
                       device: str | None = None):
    """The reducer Cell for ``params`` (NumPy arrays or Parameters, in gradient order).

    ``state`` (flattened, NumPy) and ``step`` continue a run (phase change or resume);
    default: fresh state from ``params``. ``bucket_bytes``: the bucket cap (dense
    gradient bytes, as the simulator's); one collective per bucket and round.
    ``share_with``: another reducer whose state and step Parameters this one
    uses (one phase of a schedule; the layouts must agree).

    Accounting, per step: ``payload_bytes`` (the plan's), ``wire_bytes`` (what the
    lowered collectives take as input, in the dtypes they travel in),
    ``collectives`` and ``buckets``. ``device``: what the graph is lowered for (default: MindSpore's
    ``device_target``); not CPU: native ops only (``backends.mindspore.native``), a spec that would
    need a CPU-only host kernel is a LoweringError here (``backends.mindspore.device`` says so earlier).
    """
    import mindspore as ms
    from mindspore import Parameter

    comp = _parse(comp)
    if comp.phase is not None:  # its unstepped form is one phase only (warm-up: dense forever)
        raise ValueError(f"compressor {comp.spec!r} is scheduled: use backends.mindspore.kfsim_reducer "
                         "(one graph per phase, switched by the step counter) or pass comp.step(t)")
    if rng not in RNG_MODES:
        raise ValueError(f"rng must be one of {', '.join(RNG_MODES)}, got {rng!r}")
    device = ms.get_context("device_target") if device is None else device
    vals = [p.asnumpy() if hasattr(p, "asnumpy") else np.asarray(p) for p in params]
    avals = [(v.shape, v.dtype) for v in vals]
    check_compatible(comp, avals, collective)
    who = f"compressor {comp.spec!r}"
    t = trace_exchange(comp, avals, n=n, ranks=[rank], seed=seed, comm="collective", who=who,
                       bucket_bytes=bucket_bytes)
    if collective == "allgather":
        for eqn in t.prog.eqns:
            if eqn.op in ("comm_sum", "comm_max"):
                eqn.attrs["via"] = "allgather"
    fresh = state is None or len(state) != len(t.state_in[0]) or any(
        tuple(np.shape(s)) != v.shape for s, v in zip(state, t.state_in[0]))
    if share_with is not None:
        theirs = [getattr(share_with, f"s{j}") for j in range(share_with.n_state)]
        if [(tuple(p.shape), str(p.dtype)) for p in theirs] != [(v.shape, str(to_ms(np.zeros((), v.dtype)).dtype))
                                                                 for v in t.state_in[0]]:
            raise ValueError(f"{who}: its state layout differs from the other phase's; "
                             "a schedule must keep one state layout")
    elif fresh:
        init_vals = initial_state(comp, vals, seed=seed, rng=rng, device=device)
    else:
        init_vals = [np.asarray(s) for s in state]
    em = Emitter(who, rng, rank, seed, device)
    lines = [f"{em.name(v)} = grads[{i}]" for i, v in enumerate(t.grads[0])]
    for j, (v, name) in enumerate(zip(t.state_in[0], state_names(t, params))):
        em.objs[f"s{j}"] = theirs[j] if share_with is not None else \
            Parameter(to_ms(init_vals[j]), name=f"{prefix}.state.{name}", requires_grad=False)
        lines.append(f"{em.name(v)} = self.s{j}")
    em.objs["step"] = share_with.step if share_with is not None else \
        Parameter(ms.Tensor(np.int32(step)), name=f"{prefix}.step", requires_grad=False)
    em.objs["one"] = ms.Tensor(np.int32(1))
    lines.append(f"{em.name(t.step)} = self.step")
    em.lines = lines
    outs = t.means[0]
    emit(em, t.prog, list(outs) + list(t.state_out[0]))
    for j, (vin, vout) in enumerate(zip(t.state_in[0], t.state_out[0])):
        if vin.id != vout.id:
            em.line(f"ops.assign(self.s{j}, {em.name(vout)})")
    em.line("ops.assign_add(self.step, self.one)")
    ret = "".join(em.name(v) + ", " for v in outs)
    em.line(f"return ({ret})")
    cell = build_cell(who + f" reducer rank {rank}/{n}", ["grads"], em.lines, em.objs)
    cell.compressor, cell.n_state, cell.plan = comp, len(t.state_in[0]), t.plan
    cell.wire_bytes, cell.collectives = wire_bytes(t.prog)
    cell.payload_bytes, cell.buckets, cell.bucket_bytes = t.plan.payload_bits_at(n) // 8, len(t.plan.buckets), bucket_bytes
    return cell


def wire_bytes(prog) -> tuple[int, int]:
    """(bytes one worker's collectives take as input, in the dtypes they travel in; how many
    collectives) per step of a traced exchange program."""
    from backends.mindspore.rules_comm import wire_dtype
    comms = [e for e in prog.eqns if e.op in COMM_OPS]
    return sum(e.args[0].size * wire_dtype(e).itemsize for e in comms), len(comms)


def state_names(traced, params: Sequence) -> list[str]:
    """A name per flattened state array: the gradient's parameter name (or its
    index) and the state's field path, e.g. ``fc1.weight.residual`` — so a
    checkpoint keys compressor state by tensor and field, not by position."""
    import jax.tree_util as jtu

    from compressors.state import SEP, named_leaves
    tensors = [str(getattr(p, "name", i)) for i, p in enumerate(params)]
    state = jtu.tree_unflatten(traced.state_tree, traced.state_in[0])
    names = []
    for path, _ in named_leaves(state):
        head, _, rest = path.partition(SEP)
        names.append(".".join([tensors[int(head)]] + ([rest.replace(SEP, ".")] if rest else [])))
    return names


def reducer_state(cell) -> list:
    """The reducer's current state (flattened NumPy) and step."""
    return [to_np(getattr(cell, f"s{j}").value()) for j in range(cell.n_state)], int(cell.step.asnumpy())


def native_reducer(params, n: int):
    """MindSpore's own data-parallel all-reduce (mean over n workers): the baseline."""
    from mindspore import nn
    return nn.DistributedGradReducer(params, mean=True, degree=n)
