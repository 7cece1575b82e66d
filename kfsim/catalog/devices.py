"""Accelerators: peak throughput, memory bandwidth, utilisation, and the codec kernel model.

Peak numbers are the vendors' datasheets (dense, no sparsity). ``peak_flops``
is the mixed-precision (FP16/BF16 tensor-core) peak used for training;
``mfu`` the model-FLOPs utilisation assumed when a model gives none (the
catalog notes: large transformers reach ≈ 30–55 %, CNNs ≈ 20–25 %).
``mem_bw`` (bytes/s) is the datasheet memory bandwidth (the optimizer step
and the reduction cost γ use it).

Codec kernels (``kfsim.sim.codec`` evaluates a compressor's op program on
these numbers):

* ``stream_bw``: the *achievable* memory bandwidth of a streaming kernel,
  bytes/s. Default ``STREAM_FRACTION`` (0.85) × ``mem_bw``: STREAM/BabelStream
  copy and triad kernels reach ≈ 80–92 % of the HBM/GDDR datasheet number on
  recent NVIDIA and AMD GPUs (Deakin et al., "BabelStream", 2016–2022
  results), so 0.85 is a middle estimate, not a measurement of these parts.
* ``fp32_flops``, ``fp16_flops``, ``bf16_flops``: dense peak FLOP/s of a
  matmul in that input dtype (tensor cores for fp16/bf16; ``None``: fp16 and
  bf16 default to ``peak_flops`` when the part has them, fp32 to
  ``peak_flops``; float64 uses fp32's).
* ``tf32_flops``: the TF32 tensor-core peak (dense datasheet figures: A100 156, H100/H200
  494.7, RTX 3090 35.6 TFLOP/s; V100 has none). :meth:`Accelerator.compute_flops` picks the
  peak of a run's precision (``Cluster.precision``).
* ``launch_s``: per-kernel launch/dispatch overhead. GPUs: 5 µs — Volkov &
  Demmel (SC'08, "Benchmarking GPUs to tune dense linear algebra") measured
  3–7 µs per launch of an empty kernel, the figure NVIDIA's forums still
  quote; an eager framework adds its own dispatch on top (NVIDIA's Nsight
  Systems guide shows ≈ 20 µs per PyTorch element-wise op on a V100), so 5 µs
  is the floor of what a compressor pays per op, not the eager worst case.
* ``cache_bytes``, ``line_bytes``: the last-level cache a gather/scatter
  with unordered indices hits in, and what each of its misses moves (a
  cache line on CPUs, 64 B; a 32-byte sector on NVIDIA GPUs). A scattered
  access into an array of T bytes misses with probability max(0, 1 − C/T)
  (``compressors.cost``). GPUs: the L2 of the datasheet/whitepaper (V100 6 MB,
  A100 40 MB, H100/H200 SXM 50 MB, P100 4 MB, GA102 6 MB); Ascend 910B: not
  known here, 0 (every scattered access misses; set it in a config).
* ``cache_speedup``: how many times faster a kernel streams bytes that the
  last-level cache holds than ``stream_bw`` (a kernel whose bytes fit in half
  of ``cache_bytes``, ``compressors.cost.OpCost.resident``). 1 (no gain) unless
  measured: GPUs' L2 figures are not published as streaming rates. The
  development machine's (``host-cpu``) is measured: a threaded copy of a
  4 MiB array against one of 1 GiB, 180 against 45-49 GB/s (3.6-4.0).
* ``codec_factors``: per cost class (``compressors.cost.CLASSES``), the
  time multiplier over a streaming pass of the same bytes (see
  :data:`DEFAULT_FACTORS`); entries given here replace the defaults.
"""
from __future__ import annotations

from typing import NamedTuple

STREAM_FRACTION = 0.85
MIB = 1 << 20
GPU_LAUNCH_S = 5e-6

# Time multiplier per cost class, over a streaming pass of the op's bytes at stream_bw
# (and over peak FLOP/s for the matmul term). Stated assumptions, not measurements:
DEFAULT_FACTORS: dict[str, float] = {
    # arithmetic/casts/copies stream at the achievable bandwidth
    "elementwise": 1.0,
    # a one-pass reduction streams too (one read of its input)
    "reduction": 1.0,
    # thin (low-rank) GEMMs are memory-bound and reach ≈ half the bandwidth (and of peak)
    "matmul": 2.0,
    # top-k / nonzero on GPUs: radix select (torch.topk / CUB) makes ≈ 4 digit passes plus
    # histograms and a compaction ≈ 10 passes over the input — the pass count the previous
    # per-family model assumed for top-k
    "select": 10.0,
    # data-dependent addresses: a 4-byte element per 32-byte sector in the worst case (8×);
    # sorted indices (top_k_abs returns them ascending) share sectors: ≈ 4×
    "gather/scatter": 4.0,
    # threefry2x32: 20 rounds of 32-bit add/rotate/xor per two words, ALU-bound ≈ 2×
    "rng": 2.0,
    # bit (un)packing: shifts and ors at ≈ 1.5 passes (strided sub-word access)
    "pack": 1.5,
    # dtype conversions (fp16/bf16 casts, int <-> float) stream like arithmetic
    "convert": 1.0,
}


class Accelerator(NamedTuple):
    name: str
    peak_flops: float          # FLOP/s used for training (mixed precision unless stated)
    mem_bw: float              # bytes/s (datasheet)
    mfu: float = 0.4
    fp32_flops: float | None = None
    source: str = ""
    stream_bw: float | None = None      # achievable bytes/s of a streaming kernel (None: 0.85 · mem_bw)
    fp16_flops: float | None = None     # matmul peak in fp16 (None: peak_flops)
    bf16_flops: float | None = None     # matmul peak in bf16 (None: peak_flops)
    launch_s: float = GPU_LAUNCH_S      # per-kernel launch / dispatch overhead
    codec_factors: tuple = ()           # ((cost class, time multiplier), ...) replacing DEFAULT_FACTORS
    codec_source: str = ""              # where stream_bw / launch_s / factors come from
    tf32_flops: float | None = None     # TF32 tensor-core matmul peak (None: fp32's)
    cache_bytes: float = 0.0            # last-level cache scattered accesses hit in (0: none)
    line_bytes: float = 64.0            # bytes a missed scattered access moves
    cache_speedup: float = 1.0          # streaming rate from the cache over stream_bw (1: no gain assumed)

    @property
    def achievable_bw(self) -> float:
        return self.stream_bw if self.stream_bw is not None else STREAM_FRACTION * self.mem_bw

    def factor(self, cls: str) -> float:
        for c, f in self.codec_factors:
            if c == cls:
                return float(f)
        return DEFAULT_FACTORS[cls]

    def compute_flops(self, precision: str = "mixed") -> float:
        """Peak FLOP/s of a training run in ``precision`` (:data:`PRECISIONS`): "mixed" is
        ``peak_flops`` (the catalog's training figure); fp16/bf16 their tensor peaks; fp32 the
        plain fp32 peak; tf32 the TF32 tensor peak (falls back to fp32's where the part has none)."""
        if precision == "mixed":
            return self.peak_flops
        if precision in ("fp16", "bf16"):
            return self.matmul_flops("float16" if precision == "fp16" else "bfloat16")
        if precision == "tf32" and self.tf32_flops is not None:
            return self.tf32_flops
        if precision in ("fp32", "tf32"):
            return self.fp32_flops if self.fp32_flops is not None else self.peak_flops
        raise ValueError(f"unknown precision {precision!r} (known: {', '.join(PRECISIONS)})")

    def matmul_flops(self, dtype: str) -> float:
        """Peak matmul FLOP/s for inputs of ``dtype`` (a NumPy dtype name)."""
        if dtype == "float16" and self.fp16_flops is not None:
            return self.fp16_flops
        if dtype == "bfloat16" and self.bf16_flops is not None:
            return self.bf16_flops
        if dtype in ("float16", "bfloat16"):
            return self.peak_flops
        return self.fp32_flops if self.fp32_flops is not None else self.peak_flops


PRECISIONS = ("mixed", "fp32", "tf32", "fp16", "bf16")

_CPU_FACTORS = (("select", 4.0), ("gather/scatter", 2.0), ("rng", 4.0), ("pack", 2.0), ("matmul", 1.0))

BUILTIN: dict[str, Accelerator] = {
    "v100": Accelerator("v100", 125e12, 900e9, 0.4, 15.7e12, "NVIDIA V100 SXM2 datasheet",
                        fp16_flops=125e12, bf16_flops=15.7e12,   # no bf16 tensor cores: fp32 rate
                        codec_source="0.85 × datasheet bandwidth; 5 µs launch (Volkov & Demmel 2008)",
                        cache_bytes=6 * MIB, line_bytes=32),
    "a100": Accelerator("a100", 312e12, 2039e9, 0.4, 19.5e12, "NVIDIA A100 SXM 80GB datasheet",
                        fp16_flops=312e12, bf16_flops=312e12, tf32_flops=156e12,
                        codec_source="0.85 × datasheet bandwidth; 5 µs launch (Volkov & Demmel 2008)",
                        cache_bytes=40 * MIB, line_bytes=32),
    "h100": Accelerator("h100", 989e12, 3350e9, 0.4, 66.9e12, "NVIDIA H100 SXM5 datasheet",
                        fp16_flops=989e12, bf16_flops=989e12, tf32_flops=494.7e12,
                        codec_source="0.85 × datasheet bandwidth; 5 µs launch (Volkov & Demmel 2008)",
                        cache_bytes=50 * MIB, line_bytes=32),
    "h200": Accelerator("h200", 989e12, 4800e9, 0.4, 66.9e12, "NVIDIA H200 SXM datasheet",
                        fp16_flops=989e12, bf16_flops=989e12, tf32_flops=494.7e12,
                        codec_source="0.85 × datasheet bandwidth; 5 µs launch (Volkov & Demmel 2008)",
                        cache_bytes=50 * MIB, line_bytes=32),
    # Pascal (the Horovod 2018 benchmarks, kfsim validate --published): no tensor cores; fp16 runs at
    # 2 × fp32 on the SIMT units. NVIDIA Tesla P100 PCIe 16 GB datasheet: 9.3 TFLOP/s fp32,
    # 18.7 fp16, 732 GB/s HBM2 (the SXM2 part: 10.6 / 21.2).
    "p100": Accelerator("p100", 18.7e12, 732e9, 0.4, 9.3e12, "NVIDIA Tesla P100 PCIe 16 GB datasheet",
                        fp16_flops=18.7e12, bf16_flops=9.3e12,   # no bf16: fp32 rate
                        codec_source="0.85 × datasheet bandwidth; 5 µs launch (Volkov & Demmel 2008)",
                        cache_bytes=4 * MIB, line_bytes=32),
    "rtx3090": Accelerator("rtx3090", 71e12, 936e9, 0.4, 35.6e12,
                           "NVIDIA GA102 (RTX 3090) whitepaper: 71 TFLOP/s FP16 tensor with FP32 accumulate",
                           fp16_flops=71e12, bf16_flops=71e12, tf32_flops=35.6e12,
                           codec_source="0.85 × datasheet bandwidth; 5 µs launch (Volkov & Demmel 2008)",
                        cache_bytes=6 * MIB, line_bytes=32),
    "ascend910b": Accelerator("ascend910b", 320e12, 1.6e12, 0.4, None,
                              "Huawei Ascend 910B: ≈320 TFLOP/s FP16 (sources disagree, 280–376); memory BW unverified",
                              codec_source="0.85 × (unverified) bandwidth; 5 µs launch assumed as for GPUs"),
    "cpu": Accelerator("cpu", 100e9, 20e9, 1.0, 100e9,
                       "generic CPU placeholder: give your own FLOP/s and memory bandwidth",
                       stream_bw=20e9, launch_s=2e-6, codec_factors=_CPU_FACTORS,
                       codec_source="placeholder: an eager NumPy op costs ≈ 1–3 µs of dispatch",
                       cache_bytes=32 * MIB, line_bytes=64),
    # This development machine (2 vCPUs of an AMD EPYC 7003 "Milan" under KVM, AVX2 + FMA).
    # An estimate, not a measurement: fp32 peak 2 cores × 2 FMA pipes × 8 lanes × 2 FLOP × 2.45 GHz
    # ≈ 157 GFLOP/s; a 2-core slice streams ≈ 15–25 GB/s of its socket's DDR4 (20 GB/s taken);
    # an eager NumPy/Numba op dispatches in ≈ 2 µs; selection and RNG run scalar code (no radix
    # select passes: ×4, not ×10; threefry without SIMD: ×4).
    "host-cpu": Accelerator("host-cpu", 157e9, 20e9, 1.0, 157e9,
                            "estimate: 2 vCPU AMD EPYC 7003 (Milan), AVX2 FMA at 2.45 GHz",
                            stream_bw=20e9, fp16_flops=157e9, bf16_flops=157e9, launch_s=2e-6,
                            codec_factors=_CPU_FACTORS,
                            codec_source="estimate (kfsim calibrate replaces it with measured constants)",
                            cache_bytes=32 * MIB, line_bytes=64,   # lscpu: L3 32 MiB
                            cache_speedup=3.6),  # threaded copy: 4 MiB 180 GB/s, 1 GiB 49 GB/s
}

ALIASES = {"rtx-3090": "rtx3090", "3090": "rtx3090", "910b": "ascend910b", "ascend-910b": "ascend910b",
           "host": "host-cpu"}
