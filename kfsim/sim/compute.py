"""Compute time of one iteration on one device.

    T_compute = Σ_kind FLOPs_kind · batch / (peak(precision) · efficiency(kind)),  T_fwd = T/3,  T_bwd = 2T/3
    (training ≈ 3 × forward FLOPs: backward ≈ 2 × forward)
    T_opt = 28 · N / mem_bw  (Adam: read p, g, m, v; write p, m, v — 7 fp32 words per parameter)

peak(precision): the device's peak for the run's precision (``cluster.precision``, default
"mixed" = the catalog's training peak; fp32 / tf32 / fp16 / bf16 pick that peak,
:meth:`kfsim.catalog.devices.Accelerator.compute_flops`).

Layer kinds (dense matmul, convolution, grouped and depthwise convolution,
elementwise/normalisation) and their efficiencies: :mod:`kfsim.catalog.kinds`;
a model's ``kind_flops`` (derived by its builder) splits its FLOPs by kind. A
model without a split (hand-written or imported shapes) is one kind at its
``mfu`` (or the device's): T = flops_per_sample · batch / (peak · MFU).

A cluster profile may give a measured compute time per model, per sample or
at a stated batch (``Cluster.compute_s``: (model, seconds, batch); a legacy
entry without a batch is at the model's catalog batch); it scales linearly
with the batch.
"""
from __future__ import annotations

from typing import NamedTuple

from kfsim.catalog.kinds import efficiency


class ComputeTime(NamedTuple):
    fwd: float
    bwd: float
    opt: float

    @property
    def total(self) -> float:
        return self.fwd + self.bwd + self.opt


def compute_time(model, cluster, batch: int) -> ComputeTime:
    if batch < 1:
        raise ValueError(f"batch_per_worker must be >= 1, got {batch}")
    dev = cluster.device
    opt = 28.0 * model.params / dev.mem_bw
    per_sample = cluster.measured_per_sample(model.name, model.batch)
    if per_sample is not None:
        t = per_sample * batch
    else:
        t = batch * flops_time(model, dev.compute_flops(cluster.precision), dev.mfu)
    return ComputeTime(t / 3.0, 2.0 * t / 3.0, opt)


def flops_time(model, peak: float, default_mfu: float) -> float:
    """Seconds per sample of forward + backward at ``peak`` FLOP/s: per layer kind when the
    model has a split (``kind_flops``), else all FLOPs at one utilisation."""
    if model.kind_flops is None:
        mfu = model.mfu if model.mfu is not None else default_mfu
        return model.flops_per_sample / (peak * mfu)
    return sum(f / (peak * efficiency(k, model.efficiency)) for k, f in model.kind_flops)
