"""``gather`` on the NumPy binding, side by side in one run: NumPy's own
``numpy.take``, the binding's kernel on one core (prefetching ``AHEAD``
indices on) and on all cores (what ``ops.gather`` runs from
``PARALLEL_MIN`` indices), on a 25M-entry float32 vector with random
indices (DGC's samples, count-sketch buckets) and sorted ones (the sets
top-k and random-k send). Every variant's result is checked equal.

    .venv/bin/python benchmarks/bench_gather.py [--size N] [--repeat R]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backends.numpy import indexing  # noqa: E402


def best_ms(fn, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=float, default=25e6, help="entries of x (default 25M)")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    n = int(a.size)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32).view(np.uint32)
    print(f"# x: float32[{n:,}]; load {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores; best of {a.repeat}")
    print(f"{'indices':>24}  {'numpy.take ms':>13}  {'1 core ms':>9}  {'all cores ms':>12}  {'take / all':>10}")
    for label, m, ordered in (("random 5%", n // 20, False), ("random 20%", n // 5, False),
                              ("random 100%", n, False), ("sorted 20%", n // 5, True)):
        idx = rng.integers(0, n, m).astype(np.int32)
        if ordered:
            idx.sort()
        out = np.empty(m, np.uint32)
        want = np.take(x, idx)
        indexing._gather_serial(x, idx, out)
        assert np.array_equal(out, want)
        assert np.array_equal(indexing.gather_bits(x, idx), want)
        take = best_ms(lambda: np.take(x, idx), a.repeat)
        one = best_ms(lambda: indexing._gather_serial(x, idx, out), a.repeat)
        parts = 4 * indexing.numba.get_num_threads()
        every = best_ms(lambda: indexing._gather_parallel(x, idx, out, parts), a.repeat)
        print(f"{label + f' ({m:,})':>24}  {take:13.1f}  {one:9.1f}  {every:12.1f}  {take / every:9.2f}x")


if __name__ == "__main__":
    main()
