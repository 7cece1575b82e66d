"""Example spec strings covering every registered compressor and combinator.

Cross-backend conformance and the generic contract tests run over this list;
``test_registry`` fails when a registered name has no example here.
"""
EXAMPLE_SPECS = [
    "none()",
    "fp16()",
    "bf16()",
    "quantize(bits=8, bucket=64)",
    "quantize(bits=3, bucket=50)",
    "quantize(bits=1, bucket=64)",
    "int8()",
    "int4()",
    "qsgd(levels=127, bucket=64)",
    "qsgd(levels=4, bucket=0)",
    "terngrad()",
    "natural()",
    "topk(ratio=0.1)",
    "randomk(ratio=0.2)",
    "randomk(ratio=0.2, scale=False)",
    "threshold(tau=0.5, capacity=0.3)",
    "dgc(ratio=0.05, sample=0.5)",
    "dgc(ratio=0.05, sample=0.5, warmup_epochs=2, steps_per_epoch=1)",
    "signsgd()",
    "signum(beta=0.9)",
    "scaledsign()",
    "efsignsgd()",
    "onebit()",
    "powersgd(rank=2)",
    "powersgd(rank=1, warm_start=False, ef=False, min_compression=0.0)",
    "ef(topk(ratio=0.1))",
    "ef(quantize(bits=4, bucket=64))",
    "ef21(topk(ratio=0.2))",
    "momentum(topk(ratio=0.1), beta=0.5)",
    "filter(topk(ratio=0.1), min_size=50, min_ndim=2)",
    "warmup(ef(topk(ratio=0.1)), steps=1)",
]
