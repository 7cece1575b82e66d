"""Compute model vs published training throughputs: one MFU figure (before) vs per-layer-kind
efficiencies (kfsim.catalog.kinds), side by side in one run.

    python benchmarks/bench_compute.py          (< 5 s)

References (per GPU; 8-GPU figures divided by 8), NVIDIA DeepLearningExamples:
* PyTorch/Classification/ConvNets/README.md (pytorch-20.12 NGC, images/s on 8 GPUs): DGX A100 80GB
  mixed / TF32: resnet50 15977 / 7365, resnext101-32x4d 7399 / 3193, efficientnet-b0 14391 / 8225;
  DGX-1 V100 16GB mixed / FP32: resnet50 7608 / 2851, resnext101-32x4d 3742 / 1117,
  efficientnet-b0 7664 / 4571.
* PyTorch/LanguageModeling/BERT/README.md (pytorch:21.11 NGC, BERT-large pre-training, one GPU,
  sequences/s): A100 80GB T=128 TF32 317 / mixed 580, T=512 TF32 110 / mixed 210;
  V100 32GB T=128 FP32 50 / mixed 224.

The mixed-precision rows are the fit (in sample: the efficiencies are fitted to them by least
squares on log time, printed first); TF32 / FP32 rows are out of sample (the same efficiencies
on those peaks). Batch per GPU for the optimizer term: 256 (CNNs), 64 (BERT T=128), 16 (T=512).
"""
from __future__ import annotations

import statistics

import numpy as np
from scipy.optimize import least_squares

from kfsim import catalog
from kfsim.catalog import kinds
from kfsim.catalog.models import bert, profile
from kfsim.sim.compute import compute_time

BERT512 = profile("bert-large-512", bert(24, 1024, seq=512), 1.083e12, 16, 0.40,
                  "Devlin et al. 2019, T=512 (catalog notes: 1.083 TFLOP)")
CASES = [  # model, device, precision, published samples/s per GPU, batch per GPU
    ("resnet-50", "a100", "mixed", 15977 / 8, 256), ("resnet-50", "a100", "tf32", 7365 / 8, 256),
    ("resnet-50", "v100", "mixed", 7608 / 8, 256), ("resnet-50", "v100", "fp32", 2851 / 8, 256),
    ("resnext101-32x4d", "a100", "mixed", 7399 / 8, 256), ("resnext101-32x4d", "a100", "tf32", 3193 / 8, 256),
    ("resnext101-32x4d", "v100", "mixed", 3742 / 8, 256), ("resnext101-32x4d", "v100", "fp32", 1117 / 8, 256),
    ("efficientnet-b0", "a100", "mixed", 14391 / 8, 256), ("efficientnet-b0", "a100", "tf32", 8225 / 8, 256),
    ("efficientnet-b0", "v100", "mixed", 7664 / 8, 256), ("efficientnet-b0", "v100", "fp32", 4571 / 8, 256),
    ("bert-large", "a100", "mixed", 580, 64), ("bert-large", "a100", "tf32", 317, 64),
    ("bert-large", "v100", "mixed", 224, 64), ("bert-large", "v100", "fp32", 50, 64),
    (BERT512, "a100", "mixed", 210, 16), (BERT512, "a100", "tf32", 110, 16),
]


def model_of(m):
    return catalog.get_model(m) if isinstance(m, str) else m


def throughput(model, device, precision, batch, one_mfu: bool = False, eff=None) -> float:
    m = model_of(model)
    if one_mfu:
        m = m._replace(kind_flops=None)
    elif eff is not None:
        m = m._replace(efficiency=tuple(eff.items()))
    cl = catalog.make_cluster(device, 8, 1, "pcie4", "1gbe", precision=precision)
    return batch / compute_time(m, cl, batch).total


FITTED = ("matmul", "conv", "grouped_conv", "depthwise_conv")   # elementwise: derived from bandwidth (kinds.py)


def fit() -> dict[str, float]:
    rows = [c for c in CASES if c[2] == "mixed"]

    def resid(x):
        eff = dict(kinds.EFFICIENCY, **dict(zip(FITTED, np.exp(x))))
        return [np.log(throughput(m, d, p, b, eff=eff) / ref) for m, d, p, ref, b in rows]

    x0 = np.log([kinds.EFFICIENCY[k] for k in FITTED])
    sol = least_squares(resid, x0, bounds=(np.log(1e-4), 0.0))
    return dict(kinds.EFFICIENCY, **dict(zip(FITTED, np.exp(sol.x))))


def main() -> None:
    fitted = fit()
    print("fitted efficiency per kind (least squares, mixed-precision rows) vs kfsim.catalog.kinds.EFFICIENCY:")
    for k in kinds.KINDS:
        print(f"  {k:15s} fitted {fitted[k]:.4f}   stored {kinds.EFFICIENCY[k]:.4f}")
    print()
    print(f"{'model':18s} {'device':6s} {'prec':6s} {'published':>10s} {'one-MFU':>9s} {'err':>7s} "
          f"{'per-kind':>9s} {'err':>7s}  (samples/s per GPU; err = predicted/published − 1)")
    errs = {"mixed": ([], []), "other": ([], [])}
    for m, d, p, ref, b in CASES:
        before, after = throughput(m, d, p, b, one_mfu=True), throughput(m, d, p, b)
        eb, ea = before / ref - 1, after / ref - 1
        side = errs["mixed" if p == "mixed" else "other"]
        side[0].append(abs(eb)); side[1].append(abs(ea))
        print(f"{model_of(m).name:18s} {d:6s} {p:6s} {ref:10.1f} {before:9.1f} {eb:+7.1%} {after:9.1f} {ea:+7.1%}")
    print()
    for name, (b, a) in errs.items():
        label = "mixed precision (fit)" if name == "mixed" else "TF32/FP32 (out of sample)"
        print(f"{label:27s} |err| median: one-MFU {statistics.median(b):6.1%}  per-kind {statistics.median(a):6.1%}"
              f"   worst: one-MFU {max(b):6.1%}  per-kind {max(a):6.1%}")
    dense = throughput("resnet-50", "a100", "mixed", 256)
    dw = throughput("efficientnet-b0", "a100", "mixed", 256)
    r50, eb0 = catalog.get_model("resnet-50"), catalog.get_model("efficientnet-b0")
    print(f"\nachieved TFLOP/s on A100 mixed: resnet-50 {dense * r50.flops_per_sample / 1e12:.1f}, "
          f"efficientnet-b0 {dw * eb0.flops_per_sample / 1e12:.1f} (depthwise and elementwise-heavy)")


if __name__ == "__main__":
    main()
