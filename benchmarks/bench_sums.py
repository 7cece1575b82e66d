"""The halving-sum kernels and the allocator setting, side by side in one run.

Prints, on a 25M-entry float32 vector: ``sum``, ``sum_abs``, ``sign_split_sums``
and ``sign_split_pack`` on the NumPy binding (its one-pass kernels) beside the
reference compositions (``compressors.fused.Fused``; for ``sign_split_pack``, the
binding's ``sign_split_sums`` and ``pack_signs`` kernels one after the other) and
``numpy.sum``; and a JAX program with a 100 MB result, with and without
``backends.memory`` (``KFSIM_KEEP_FREED_MEMORY``), in ms and page faults per call.

    .venv/bin/python benchmarks/bench_sums.py [--size N] [--repeat R]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROBE = """
import json, resource, sys, time
import backends, backends.memory as memory
import jax, jax.numpy as jnp
n, repeat = int(sys.argv[1]), int(sys.argv[2])
f = jax.jit(lambda x: x * 2.0 + 1.0)
x = jnp.ones(n, jnp.float32)
for _ in range(15):  # freed results return to the heap a few calls late
    jax.block_until_ready(f(x))
best, faults = 1e9, []
for _ in range(repeat):
    r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t = time.perf_counter(); jax.block_until_ready(f(x)); best = min(best, time.perf_counter() - t)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)
print(json.dumps({"applied": memory.applied, "ms": best * 1e3, "faults": sorted(faults)[len(faults) // 2]}))
"""


def best_ms(fn, repeat: int) -> float:
    fn()
    best = 1e9
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def allocator(n: int, repeat: int, keep: str) -> dict:
    env = dict(os.environ, KFSIM_KEEP_FREED_MEMORY=keep, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", PROBE, str(n), str(repeat)], env=env, capture_output=True,
                         text=True, timeout=600)
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=25_000_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    import backends
    from compressors.fused import Fused

    ops = backends.get("numpy")
    x = np.random.default_rng(0).standard_normal(args.size).astype(np.float32)
    scale = 2.0 ** -(args.size - 1).bit_length()
    print(f"float32 vector of {args.size:,} entries; best of {args.repeat}; load {os.getloadavg()[0]:.2f}")
    print(f"  {'op':<28} {'kernel ms':>10} {'composition ms':>15} {'ratio':>7}")
    rows = [("sum", lambda: ops.sum(x), lambda: np.sum(x)),
            ("sum_abs", lambda: ops.sum_abs(x), lambda: Fused.sum_abs(ops, x)),
            ("sign_split_sums", lambda: ops.sign_split_sums(x, scale), lambda: Fused.sign_split_sums(ops, x, scale)),
            # its composition calls the binding's kernels: sign_split_sums, then pack_signs (a second read of x)
            ("sign_split_pack", lambda: ops.sign_split_pack(x, scale), lambda: Fused.sign_split_pack(ops, x, scale))]
    for name, kernel, ref in rows:
        k, r = best_ms(kernel, args.repeat), best_ms(ref, args.repeat)
        label = f"{name} (vs numpy.sum)" if name == "sum" else name
        print(f"  {label:<28} {k:10.2f} {r:15.2f} {r / k:6.1f}x")
    print(f"\nJAX x*2+1 on {args.size:,} entries (a {4 * args.size / 1e6:.0f} MB result per call):")
    res = {keep: allocator(args.size, args.repeat, keep) for keep in ("1", "0")}
    for keep, label in (("1", "backends.memory on"), ("0", "KFSIM_KEEP_FREED_MEMORY=0")):
        r = res[keep]
        if "error" in r:
            print(f"  {label:<28} failed: {r['error']}")
        else:
            print(f"  {label:<28} {r['ms']:8.2f} ms  {r['faults']:8d} page faults per call (median)")
    if all("ms" in r for r in res.values()):
        print(f"  ratio off / on: {res['0']['ms'] / res['1']['ms']:.1f}x")


if __name__ == "__main__":
    main()
