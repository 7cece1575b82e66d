"""Accelerators: dense peak throughput, memory bandwidth, achievable utilisation.

Peak numbers are the vendors' datasheets (dense, no sparsity). ``peak_flops``
is the mixed-precision (FP16/BF16 tensor-core) peak used for training;
``mfu`` the model-FLOPs utilisation assumed when a model gives none (the
catalog notes: large transformers reach ≈ 30–55 %, CNNs ≈ 20–25 %).
``mem_bw`` (bytes/s) sets the default speed of encode/decode kernels.
"""
from __future__ import annotations

from typing import NamedTuple


class Accelerator(NamedTuple):
    name: str
    peak_flops: float          # FLOP/s used for training (mixed precision unless stated)
    mem_bw: float              # bytes/s
    mfu: float = 0.4
    fp32_flops: float | None = None
    source: str = ""


BUILTIN: dict[str, Accelerator] = {
    "v100": Accelerator("v100", 125e12, 900e9, 0.4, 15.7e12, "NVIDIA V100 SXM2 datasheet"),
    "a100": Accelerator("a100", 312e12, 2039e9, 0.4, 19.5e12, "NVIDIA A100 SXM 80GB datasheet"),
    "h100": Accelerator("h100", 989e12, 3350e9, 0.4, 66.9e12, "NVIDIA H100 SXM5 datasheet"),
    "h200": Accelerator("h200", 989e12, 4800e9, 0.4, 66.9e12, "NVIDIA H200 SXM datasheet"),
    "rtx3090": Accelerator("rtx3090", 71e12, 936e9, 0.4, 35.6e12,
                           "NVIDIA GA102 (RTX 3090) whitepaper: 71 TFLOP/s FP16 tensor with FP32 accumulate"),
    "ascend910b": Accelerator("ascend910b", 320e12, 1.6e12, 0.4, None,
                              "Huawei Ascend 910B: ≈320 TFLOP/s FP16 (sources disagree, 280–376); memory BW unverified"),
    "cpu": Accelerator("cpu", 100e9, 20e9, 1.0, 100e9,
                       "generic CPU placeholder: give your own FLOP/s and memory bandwidth"),
}

ALIASES = {"rtx-3090": "rtx3090", "3090": "rtx3090", "910b": "ascend910b", "ascend-910b": "ascend910b"}
