"""A fresh process whose first kernel is a cached one that calls a parallel
kernel, loaded from Numba's on-disk cache: without the thread pool started at
import of ``backends.numpy`` this crashes (numba issues #8578, #9938).

The crash needs the cache entry of the outer kernel to have been compiled in
a process that loaded the parallel callee from the cache: run 1 caches
``sum_abs``'s kernels (``term_sums`` -> ``_fold``, parallel), run 2 compiles
``sign_split_sums`` (``split_sums_into`` -> the cached ``term_sums``), run 3
loads it and calls it first."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
import numpy as np
import backends
ops = backends.get("numpy")
x = np.linspace(-1.0, 3.0, 1 << 21, dtype=np.float32)  # long enough to run threaded
if sys.argv[1] == "sum_abs":
    print(float(ops.sum_abs(x)))
else:
    print(np.asarray(ops.sign_split_sums(x, 2.0 ** -21)).tolist())
"""


def _run(cache: Path, mode: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"{mode}: exit {done.returncode}: {done.stderr[-2000:]}"
    return done


def test_first_call_of_a_cached_kernel_that_calls_a_parallel_one(tmp_path):
    _run(tmp_path, "sum_abs")
    compiled = _run(tmp_path, "split")
    assert any(tmp_path.rglob("*split_sums_into*.nbc")), "no cache entry was written"
    cached = _run(tmp_path, "split")
    assert cached.stdout == compiled.stdout
    sums = ast.literal_eval(cached.stdout)
    assert sums[1] + sums[3] == 1 << 21 and sums[4] == 0.0
