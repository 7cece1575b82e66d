"""Local SGD / DiLoCo: H inner steps per worker, then an outer step on the pseudo-gradient.

Douillard et al. 2023 (DiLoCo), Jaghouar et al. 2024 (OpenDiLoCo), Douillard
et al. 2025 (streaming DiLoCo). Written once against the ops namespace; the
exchange is the one runner, :func:`compressors.protocol.run`, so any
compressor (with its error feedback, kept per worker) compresses the
pseudo-gradients and any communicator carries them.

State (all named ``NamedTuple`` pytrees, checkpointable by
:func:`compressors.state.named_leaves`):

    OuterState(anchor, momentum, inflight)        shared by every worker
        anchor    θ: the parameters at each tensor's last synchronisation
        momentum  m: the outer optimizer's buffer
        inflight  the mean pseudo-gradient of the exchange in flight (zeros when none)
    WorkerState(accum, pending, inner, comp)      one per worker
        accum     a_r: sum of the inner optimizer's directions since the tensor's sync point
        pending   the part of a_r sent in the exchange in flight (zeros when none)
        inner     the inner optimizer's state (the caller's; opaque here)
        comp      the compressor's per-tensor state (EF residuals, ...)

Worker r's local parameters are *derived*: p_r = θ − η (pending_r + a_r),
η the inner learning rate, and an inner step adds its direction v (plain
SGD: the gradient) to a_r. The pseudo-gradient θ − p_r is then η·(pending_r
+ a_r); the runner exchanges it in gradient units, a_r (the η factor goes
into the outer step), which costs nothing in exactness and makes H = 1,
outer lr 1, momentum 0 *bit-identical* to per-step averaging: a_r = g_r, the
runner's mean is the per-step mean, and θ ← θ − (1·η)·mean.

Outer step (SGD with Nesterov momentum μ, PyTorch's form), per tensor:

    m ← μ m + d ;  u = d + μ m  (nesterov; u = m without) ;  θ ← θ − (λ η) u

with d the exchanged mean and λ the outer learning rate; μ = 0 gives u = d.

Streaming (F fragments, Douillard et al. 2025): the tensors are split into F
contiguous groups of equal count (forward order: tensor i of n is in
fragment i·F // n). With period P = H / F, the exchange of fragment
f = (t // P) mod F *starts* after inner step t whenever (t + 1) mod P = 0,
so every fragment is synchronised once every H steps, staggered. Overlap:
the exchange runs during the next τ = ``delay`` inner steps (0 ≤ τ < P, so
at most one exchange is in flight) and its outer update *lands* after step
t + τ. Our choice at landing: θ_f takes the outer update, and the τ steps of
local progress made meanwhile stay on top (a_r restarted at the sync point,
so p_r = θ_new − η a_r): nothing a worker computed is discarded, and τ = 0 is
plain (streaming) DiLoCo. F = 1 and τ = 0 is DiLoCo / local SGD.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

from compressors import protocol
from compressors.core import Compressor
from compressors.ops import Ops


class LocalSGD(NamedTuple):
    """The algorithm's hyper-parameters (see the module docstring)."""

    local_steps: int = 1        # H
    outer_lr: float = 1.0       # λ
    outer_momentum: float = 0.0  # μ
    fragments: int = 1          # F (streaming when > 1)
    delay: int = 0              # τ: inner steps the exchange overlaps
    nesterov: bool = True

    def check(self, tensors: int | None = None) -> "LocalSGD":
        """Itself, or a one-line ValueError naming the bad value."""
        def whole(name, v, lo):
            if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
        whole("local steps", self.local_steps, 1)
        whole("fragments", self.fragments, 1)
        whole("delay (overlap steps)", self.delay, 0)
        if not (isinstance(self.outer_lr, (int, float)) and 0 < self.outer_lr < float("inf")):
            raise ValueError(f"outer lr must be a positive finite number, got {self.outer_lr!r}")
        if not (isinstance(self.outer_momentum, (int, float)) and 0 <= self.outer_momentum < 1):
            raise ValueError(f"outer momentum must be in [0, 1), got {self.outer_momentum!r}")
        if self.local_steps % self.fragments:
            raise ValueError(f"local steps {self.local_steps} must be a multiple of fragments {self.fragments}")
        if self.delay >= self.period:
            raise ValueError(f"delay (overlap steps) {self.delay} must be below local steps / fragments = "
                             f"{self.period} (one exchange in flight at a time)")
        if tensors is not None and self.fragments > tensors:
            raise ValueError(f"fragments {self.fragments} exceeds the model's {tensors} tensors")
        return self

    @property
    def period(self) -> int:
        """Inner steps between two exchanges (of consecutive fragments): H / F."""
        return self.local_steps // self.fragments

    def starts(self, t: int) -> int | None:
        """The fragment whose exchange starts after inner step t (0-based), or None."""
        if (t + 1) % self.period:
            return None
        return (t // self.period) % self.fragments

    def lands(self, t: int) -> int | None:
        """The fragment whose outer update is applied after inner step t, or None."""
        return None if t < self.delay else self.starts(t - self.delay)


class OuterState(NamedTuple):
    anchor: Any
    momentum: Any
    inflight: Any


class WorkerState(NamedTuple):
    accum: Any
    pending: Any
    inner: Any
    comp: Any


def fragments_of(names: Sequence[str], fragments: int) -> tuple[tuple[str, ...], ...]:
    """Contiguous groups of the tensor names (forward order): tensor i of n in group i·F // n."""
    n = len(names)
    if not 1 <= fragments <= max(n, 1):
        raise ValueError(f"fragments must be in 1..{n} for {n} tensors, got {fragments}")
    return tuple(tuple(k for i, k in enumerate(names) if i * fragments // n == f) for f in range(fragments))


def _zeros(ops: Ops, tree: dict) -> dict:
    return {k: ops.zeros(tuple(v.shape), v.dtype) for k, v in tree.items()}


def init_outer(ops: Ops, params: dict) -> OuterState:
    return OuterState(dict(params), _zeros(ops, params), _zeros(ops, params))


def init_worker(ops: Ops, comp: Compressor, params: dict, inner: Any = ()) -> WorkerState:
    return WorkerState(_zeros(ops, params), _zeros(ops, params), inner, comp.init(ops, params))


def local_params(ops: Ops, lr: float, outer: OuterState, w: WorkerState) -> dict:
    """Worker r's parameters p_r = θ − η (pending_r + a_r)."""
    return {k: a - ops.asarray(lr, a.dtype) * (w.pending[k] + w.accum[k]) for k, a in outer.anchor.items()}


def accumulate(ops: Ops, w: WorkerState, direction: dict, inner: Any) -> WorkerState:
    """After an inner step with direction v (and new inner state): a_r ← a_r + v."""
    return w._replace(accum={k: ops.add(a, direction[k]) for k, a in w.accum.items()}, inner=inner)


def start(ops: Ops, comp: Compressor, outer: OuterState, workers: Sequence[WorkerState], keys: Sequence,
          names: Sequence[str], comm: protocol.Communicator | None = None):
    """Exchange fragment ``names``' pseudo-gradients a_r through the runner (LOOP workers:
    one entry per local worker; ``comm`` as :func:`compressors.protocol.run`). Returns
    (outer with the mean in flight, workers with pending = a_r and a_r = 0 on the fragment,
    the runner's :class:`~compressors.protocol.Result`)."""
    names = list(names)
    res = protocol.run(ops, comp, [{k: w.accum[k] for k in names} for w in workers],
                       [{k: w.comp[k] for k in names} for w in workers], list(keys), comm)
    outer, new = started(ops, outer, workers, names, res.mean, res.states)
    return outer, new, res


def started(ops: Ops, outer: OuterState, workers: Sequence[WorkerState], names: Sequence[str], mean: dict,
            states: Sequence[dict] | None = None):
    """The bookkeeping of :func:`start` once fragment ``names``' exchange returned ``mean`` (and the
    workers' new compressor ``states``; None: kept elsewhere, e.g. inside a lowered reducer):
    (outer with the mean in flight, workers with pending = a_r and a_r = 0 on the fragment)."""
    outer = outer._replace(inflight={**outer.inflight, **{k: mean[k] for k in names}})
    new = []
    for i, w in enumerate(workers):
        zero = _zeros(ops, {k: w.accum[k] for k in names})
        comp = w.comp if states is None else {**w.comp, **{k: states[i][k] for k in names}}
        new.append(w._replace(pending={**w.pending, **{k: w.accum[k] for k in names}},
                              accum={**w.accum, **zero}, comp=comp))
    return outer, new


def land(ops: Ops, algo: LocalSGD, lr: float, outer: OuterState, workers: Sequence[WorkerState],
         names: Sequence[str]):
    """Apply the in-flight outer update of fragment ``names``: (outer, workers)."""
    mu, step = algo.outer_momentum, float(algo.outer_lr) * float(lr)
    anchor, mom, infl = dict(outer.anchor), dict(outer.momentum), dict(outer.inflight)
    for k in names:
        d = infl[k]
        if mu:
            mom[k] = ops.asarray(mu, d.dtype) * mom[k] + d
            u = d + ops.asarray(mu, d.dtype) * mom[k] if algo.nesterov else mom[k]
        else:
            u = d
        anchor[k] = anchor[k] - ops.asarray(step, d.dtype) * u
        infl[k] = ops.zeros(tuple(d.shape), d.dtype)
    new = [w._replace(pending={**w.pending, **_zeros(ops, {k: w.pending[k] for k in names})}) for w in workers]
    return OuterState(anchor, mom, infl), new
