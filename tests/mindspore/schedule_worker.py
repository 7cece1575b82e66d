"""One msrun rank of tests/mindspore/test_public_reducer.py: the public reducer on known gradients.

    schedule_worker.py OUT_DIR STEPS

For each case of CASES, ``kfsim_reducer`` on PARAMS gets rank r's gradient
``gradient(t, r, i)`` at steps t = 0..STEPS-1; rank r saves every decoded
mean and the reducer's accounting to OUT_DIR/rank<r>.npz.
"""
from __future__ import annotations

import json
import sys

import numpy as np

SHAPES = [(24, 20), (20,), (20, 6), (6,)]
# (spec, bucket cap in bytes): a warm-up schedule over 3 buckets, DGC's sparsity schedule, bf16 on the wire
CASES = [("warmup(ef(topk(ratio=0.1)), steps=3)", 550), ("dgc(ratio=0.1, warmup_epochs=2, steps_per_epoch=2)", None),
         ("bf16()", None)]


def params():
    return [np.random.default_rng(100 + i).standard_normal(s).astype(np.float32) for i, s in enumerate(SHAPES)]


def gradient(t: int, rank: int, i: int) -> np.ndarray:
    return np.random.default_rng(1000 * t + 10 * rank + i).standard_normal(SHAPES[i]).astype(np.float32)


def main() -> int:
    from backends.mindspore import kfsim_reducer   # the public API: no other set-up
    import mindspore as ms
    from mindspore.communication import get_rank, init

    ms.set_context(mode=ms.GRAPH_MODE)
    init()
    rank, steps = get_rank(), int(sys.argv[2])
    out, acct = {}, {}
    for c, (spec, cap) in enumerate(CASES):
        opts = {} if cap is None else {"bucket_bytes": cap}
        red = kfsim_reducer(spec, params(), seed=3, **opts)
        for t in range(steps):
            means = red(ms.mutable(tuple(ms.Tensor(gradient(t, rank, i)) for i in range(len(SHAPES)))))
            for i, m in enumerate(means):
                out[f"{c}_{t}_{i}"] = m.asnumpy().astype(np.float32)
            acct[f"{c}_{t}"] = red.accounting(t)
        acct[f"{c}_starts"] = list(getattr(red, "starts", [0]))
    np.savez(f"{sys.argv[1]}/rank{rank}.npz", **out)
    with open(f"{sys.argv[1]}/rank{rank}.json", "w") as f:
        json.dump(acct, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
