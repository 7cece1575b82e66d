"""Layer kinds and how efficiently each runs: the compute model's per-kind utilisation.

    T_compute = Σ_kind FLOPs_kind · batch / (peak(precision) · efficiency(kind))

A model's builder tags every parameter tensor with the kind of layer that
owns it (:class:`kfsim.catalog.models.ModelProfile.kind_flops` sums the
FLOPs per kind); ``efficiency`` is the fraction of the precision's dense
peak that kind of layer reaches in training (forward + backward):

* ``matmul``: dense GEMMs (linear layers, attention products, embeddings);
* ``conv``: dense convolutions (cuDNN implicit GEMM on tensor cores);
* ``grouped_conv``: convolutions with 1 < groups < channels (ResNeXt):
  many thin GEMMs, a fraction of the dense rate;
* ``depthwise_conv``: groups = channels (MobileNet, EfficientNet): no reuse
  across channels, memory-bound;
* ``elementwise``: normalisation, activations, residual adds, softmax,
  dropout: memory-bound. Their FLOPs are *counted* by the builders as
  :data:`ELEMENTWISE_FLOPS` per activation element per pass (forward), so
  what the efficiency encodes is the time per activation element.

The efficiencies are fitted (least squares on log time,
``benchmarks/bench_compute.py`` prints the fit, the figures and the errors)
to NVIDIA's published single-node training throughputs (NVIDIA
DeepLearningExamples, PyTorch ConvNets README: pytorch-20.12 NGC container,
DGX A100 80GB and DGX-1 V100 16GB, images/s per 8 GPUs, mixed precision:
ResNet-50 v1.5 15977 / 7608, ResNeXt101-32x4d 7399 / 3742, EfficientNet-B0
14391 / 7664; PyTorch BERT README: pytorch:21.11 NGC, BERT-large pre-training
on one GPU, sequences/s, mixed precision: A100 80GB 580 (T=128) and 210
(T=512), V100 32GB 224 (T=128)). They are mixed-precision figures; TF32 and
FP32 runs use the same efficiencies on their own peaks (see the benchmark
for how far off that is).
"""
from __future__ import annotations

KINDS = ("matmul", "conv", "grouped_conv", "depthwise_conv", "elementwise")

# forward FLOPs booked per activation element of a normalisation layer and what follows it
# (batch/layer norm statistics ≈ 3, normalise + affine ≈ 4, activation ≈ 1, residual add /
# dropout ≈ 2): a counting convention, the fitted efficiency absorbs its absolute value
ELEMENTWISE_FLOPS = 10.0

# matmul, conv, grouped_conv, depthwise_conv: fitted to the published mixed-precision throughputs
# above (benchmarks/bench_compute.py prints the fit: 0.696, 0.239, 0.078, 0.0018). depthwise_conv
# also absorbs what EfficientNet's builder does not book (swish and the squeeze-excitation scaling
# of the expanded activations). elementwise: derived, not fitted — a normalisation + activation
# moves ≈ 24 bytes per fp16 activation element per training step (forward read + write of two
# passes, backward twice that); at the datasheet bandwidth that is 12 ps per element on an A100
# (2039 GB/s) and 27 ps on a V100 (900 GB/s); with 3 × ELEMENTWISE_FLOPS = 30 FLOPs counted per
# element, 30 / (312e12 · 12e-12) = 0.008 and 30 / (125e12 · 27e-12) = 0.009 of the fp16 peaks.
EFFICIENCY: dict[str, float] = {
    "matmul": 0.70,
    "conv": 0.24,
    "grouped_conv": 0.078,
    "depthwise_conv": 0.0018,
    "elementwise": 0.0085,
}


def conv_kind(groups: int, in_c: int, out_c: int) -> str:
    """The kind of a convolution with ``groups`` groups."""
    if groups <= 1:
        return "conv"
    if groups == in_c and out_c % in_c == 0:
        return "depthwise_conv"
    return "grouped_conv"


def efficiency(kind: str, overrides=()) -> float:
    """Efficiency of ``kind`` (``overrides``: ((kind, value), ...) replacing the defaults)."""
    for k, e in overrides:
        if k == kind:
            return float(e)
    try:
        return EFFICIENCY[kind]
    except KeyError:
        raise ValueError(f"unknown layer kind {kind!r} (known: {', '.join(KINDS)})") from None


def check_overrides(values: dict) -> dict:
    """Validate a ``{kind: efficiency}`` table (config files)."""
    for k, e in values.items():
        if k not in KINDS:
            raise ValueError(f"unknown layer kind {k!r} (known: {', '.join(KINDS)})")
        if not 0 < e <= 1:
            raise ValueError(f"efficiency of {k!r} must be in (0, 1], got {e}")
    return values
