"""Time of local SGD / DiLoCo training (:mod:`compressors.outer`): an exchange every H / F steps.

An inner step exchanges nothing: its time is the single-worker iteration
(forward, backward, optimizer; ``predict_iteration`` with p = 1). After
inner step t where fragment f's exchange starts (``LocalSGD.starts``), its
pseudo-gradients are encoded, exchanged by the compressor's collectives and
decoded: E_f = the codec and communication time of an iteration of a model
made of fragment f's tensors only, *without* overlap with backward
(``overlap=False``: the pseudo-gradient exists only once the inner step is
done), i.e. that iteration's total minus its compute.

Overlap (streaming DiLoCo): the exchange runs while the next τ inner steps
compute, so the device waits only for what τ steps do not hide,

    exposed_f = max(0, E_f − τ · T_inner),

charged to the step where the outer update lands (t + τ). Time per step
averaged over a period of H steps: T_inner + Σ_f exposed_f / H. With τ = 0
every exchange is exposed; H = 1, F = 1 is one un-overlapped synchronous
iteration per step (not DDP's bucket pipeline: averaging parameters after
the step cannot start during backward).
"""
from __future__ import annotations

from typing import NamedTuple

from compressors.outer import LocalSGD, fragments_of


PER_TENSOR = ("tensor_shapes", "tensor_flops", "tensor_names")  # ModelProfile fields with one entry per tensor


class LocalTiming(NamedTuple):
    algo: LocalSGD
    inner_s: float          # one inner step (no exchange)
    exchange_s: tuple       # per fragment: encode + communication + decode, E_f
    exposed_s: tuple        # per fragment: max(0, E_f - tau * inner_s)
    payload_bytes: tuple    # per fragment: what one worker hands to the collectives per exchange

    def step_s(self, t: int) -> float:
        """Simulated time of inner step t, including the exposed exchange landing after it."""
        f = self.algo.lands(t)
        return self.inner_s + (0.0 if f is None else self.exposed_s[f])

    def bytes_at(self, t: int) -> int:
        """Bytes one worker sends after step t (an exchange starting there)."""
        f = self.algo.starts(t)
        return 0 if f is None else int(self.payload_bytes[f])

    @property
    def mean_step_s(self) -> float:
        """Time per step in steady state: T_inner + sum_f exposed_f / H."""
        return self.inner_s + sum(self.exposed_s) / self.algo.local_steps


def predict_local(model, cluster, compressor, workers: int, algo: LocalSGD, *,
                  batch_per_worker: int | None = None, collective: str | None = None) -> LocalTiming:
    """:class:`LocalTiming` of ``model`` (a ModelProfile, tensors in forward order) on ``cluster``."""
    from kfsim.sim.predict import as_compressor, as_model, payload_bytes, predict_iteration

    m = as_model(model)
    comp = as_compressor(compressor)
    algo = algo.check(len(m.tensor_shapes))
    batch = m.batch if batch_per_worker is None else int(batch_per_worker)
    inner = float(predict_iteration(m, cluster, "none()", 1, batch_per_worker=batch).total_s)
    exch, exposed, sent = [], [], []
    for idx in fragments_of(list(range(len(m.tensor_shapes))), algo.fragments):
        per_tensor = {f: tuple(getattr(m, f)[i] for i in idx) for f in PER_TENSOR
                      if f in m._fields and getattr(m, f) is not None}
        sub = m._replace(name=f"{m.name}[{idx[0]}:{idx[-1] + 1}]", **per_tensor)
        b = predict_iteration(sub, cluster, comp, workers, batch_per_worker=batch, collective=collective,
                              overlap=False)
        e = float(b.total_s - b.compute_s) if workers > 1 else 0.0
        exch.append(e)
        exposed.append(max(0.0, e - algo.delay * inner))
        sent.append(payload_bytes(sub, comp, workers=workers) if workers > 1 else 0)
    return LocalTiming(algo, inner, tuple(exch), tuple(exposed), tuple(sent))
