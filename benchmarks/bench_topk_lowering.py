"""The MindSpore lowering of ``top_k_abs``: its fused rule vs its composition (issue 14 item 4).

``ops.top_k_abs(x, k)`` (the k largest |x_i|, indices in ascending order) is a
fused op. The lowering records it whole (``backends.mindspore.trace.LOWERED_FUSED``)
and emits one stable top-k plus a k-entry sort; traced through its definition it
is a top-k, an n-entry mask, a cumsum and two scatters. Both graphs are built
here from the same traced call, compiled (GRAPH_MODE, CPU) and timed in one run,
interleaved, on the tensor sizes of the wide benchmark MLP; they must return the
same indices.

Run:  .venv/bin/python benchmarks/bench_topk_lowering.py [--sizes 235200,1960000,8410000] [--ratio 0.01]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def build(n: int, k: int, fused: bool):
    from backends.mindspore.emit import program_cell
    from backends.mindspore.trace import Program, TracingOps
    prog = Program(f"top_k_abs {'fused' if fused else 'composed'}")
    ops = TracingOps(prog)
    if not fused:  # the composition: every fused op traced through
        ops.record_fused = frozenset()
    x = prog.input((n,), np.float32)
    return program_cell(prog, [ops.top_k_abs(x, k)], prog.who)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="235200,1960000,8410000", help="tensor sizes (the wide MLP's, H=2900)")
    ap.add_argument("--ratio", type=float, default=0.01)
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in a.sizes.split(",")]
    except ValueError:
        sys.exit(f"error: --sizes must be comma-separated integers, got {a.sizes!r}")
    if not sizes or min(sizes) < 1 or not 0 < a.ratio <= 1 or a.reps < 3:
        sys.exit("error: sizes >= 1, 0 < ratio <= 1 and reps >= 3 are required")
    from backends.mindspore.runtime import setup
    setup()
    import mindspore as ms
    ms.set_context(mode=ms.GRAPH_MODE)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs")
    print("| n | k | composed ms | fused ms | composed/fused |")
    print("|---|---|---|---|---|")
    for n in sizes:
        k = max(1, int(np.ceil(a.ratio * n)))
        x = ms.Tensor(np.random.default_rng(n).standard_normal(n).astype(np.float32))
        cells = {"composed": build(n, k, False), "fused": build(n, k, True)}
        got = {name: c(x)[0].asnumpy() for name, c in cells.items()}  # compile, and the same answer
        if not np.array_equal(got["composed"], got["fused"]):
            sys.exit(f"error: n={n}: the fused rule and the composition pick different indices")
        ts = {name: [] for name in cells}
        for _ in range(a.reps):
            for name, c in cells.items():
                t = time.perf_counter()
                c(x)[0].asnumpy()
                ts[name].append(time.perf_counter() - t)
        comp, fused = (1e3 * min(ts[m]) for m in ("composed", "fused"))
        print(f"| {n} | {k} | {comp:.1f} (median {1e3 * statistics.median(ts['composed']):.1f}) "
              f"| {fused:.1f} (median {1e3 * statistics.median(ts['fused']):.1f}) | {comp / fused:.2f}x |", flush=True)
    print("(best of --reps, interleaved; compile excluded)")


if __name__ == "__main__":
    main()
