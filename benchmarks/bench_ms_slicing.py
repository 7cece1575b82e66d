"""MindSpore CPU slicing: StridedSlice (``x[a:b]``) vs Slice (``ops.slice``), side by side.

Why ``backends.mindspore.rules_slice`` lowers a contiguous block to Slice: StridedSlice
is slow when its result's leading axis has length 1 (a row of a gathered (n, K)
payload), and faster where the block is strided (a column). Prints best-of-reps ms for
both forms of each case and their ratio; the results are checked equal.

Run:  python benchmarks/bench_ms_slicing.py [--n 8400000] [--reps 5]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def cases(n: int):
    k = n // 2
    i32 = np.arange(n, dtype=np.int32)
    return [
        ("row 1 of (2, K)", "x[1:2]", f"ops.slice(x, (1, 0), (1, {k}))", i32.reshape(2, k)),
        ("(1, K) inner block", f"x[:, 5:{n - 5}]", f"ops.slice(x, (0, 5), (1, {n - 10}))", i32.reshape(1, n)),
        ("rows 1:3 of (4, K/4)", "x[1:3]", f"ops.slice(x, (1, 0), (2, {n // 4}))", i32.reshape(4, n // 4)),
        ("1-D prefix", f"x[:{k}]", f"ops.slice(x, (0,), ({k},))", i32),
        ("1-D middle", f"x[100:{n - 100}]", f"ops.slice(x, (100,), ({n - 200},))", i32),
        ("column of (K, 2) (stays strided)", "x[:, 1:2]", f"ops.slice(x, (0, 1), ({k}, 1))", i32.reshape(k, 2)),
    ]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8_400_000, help="elements of the sliced array")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)
    from backends.mindspore.runtime import setup
    setup()
    import mindspore as ms
    ms.set_context(mode=ms.GRAPH_MODE)
    from backends.mindspore.emit import build_cell
    cs = cases(a.n)
    print(f"{a.n / 1e6:.1f}M int32 elements, best of {a.reps}")
    print(f"{'case':34} {'StridedSlice ms':>16} {'Slice ms':>9} {'ratio':>7}")
    for i, (name, _, _, x) in enumerate(cs):
        xt, got = ms.Tensor(x), []
        for expr in cs[i][1:3]:
            cell = build_cell(f"slicing benchmark: {expr}", ["x"], [f"return {expr}"], {})
            r = cell(xt).asnumpy()
            ts = []
            for _ in range(a.reps):
                t = time.perf_counter()
                cell(xt).asnumpy()
                ts.append(time.perf_counter() - t)
            got.append((r, 1e3 * min(ts)))
        if not np.array_equal(got[0][0], got[1][0]):
            raise SystemExit(f"{name}: StridedSlice and Slice disagree")
        print(f"{name:34} {got[0][1]:16.2f} {got[1][1]:9.2f} {got[0][1] / got[1][1]:6.1f}x", flush=True)


if __name__ == "__main__":
    main()
