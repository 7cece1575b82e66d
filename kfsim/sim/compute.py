"""Compute time of one iteration on one device.

    T_compute = flops_per_sample · batch / (peak(precision) · MFU),  T_fwd = T/3,  T_bwd = 2T/3
    (training ≈ 3 × forward FLOPs: backward ≈ 2 × forward)
    T_opt = 28 · N / mem_bw  (Adam: read p, g, m, v; write p, m, v — 7 fp32 words per parameter)

peak(precision): the device's peak for the run's precision (``cluster.precision``, default
"mixed" = the catalog's training peak; fp32 / tf32 / fp16 / bf16 pick that peak,
:meth:`kfsim.catalog.devices.Accelerator.compute_flops`).

A cluster profile may give a measured compute time per model (at the
model's catalog batch); it then scales linearly with the batch.
"""
from __future__ import annotations

from typing import NamedTuple


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
    measured = cluster.measured_compute(model.name)
    if measured is not None:
        t = measured * batch / model.batch
    else:
        mfu = model.mfu if model.mfu is not None else dev.mfu
        t = model.flops_per_sample * batch / (dev.compute_flops(cluster.precision) * mfu)
    return ComputeTime(t / 3.0, 2.0 * t / 3.0, opt)
