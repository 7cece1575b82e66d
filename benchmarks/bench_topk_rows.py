"""Top-k selection of simulated workers' rows beside a read of the same rows, in one run.

Simulated training with ``ef(topk(ratio=0.01))`` selects the top 1 % of every
worker's EF sum p_r = g_r + e_r; under ``jax.vmap`` one XLA custom call
(``backends.jax.host_topk``) takes all rows of a layer, shared among Numba's
threads. This times that call on ``--rows`` rows of the Fashion-MNIST MLP's
784x256 layer (200,704 entries; values with a column scale, as a layer's
gradient has), beside one read of the same rows on all cores (the memory
floor any selection pays) and ``lax.top_k`` of |x| (what XLA does on its own),
alternately, best of ``--repeat``. The NumPy binding's ``top_k_abs`` of one
25M-entry gradient follows (the ``bench_compressors.py`` top-k size).

    .venv/bin/python benchmarks/bench_topk_rows.py [--rows 16 64] [--repeat 15]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_fused import alternate  # noqa: E402


def gradient_rows(rows: int, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, n)) * rng.random((1, n))).astype(np.float32)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[16, 64], help="simulated workers (rows per call)")
    ap.add_argument("--repeat", type=int, default=15, help="timed calls of each (best is kept)")
    ap.add_argument("--ratio", type=float, default=0.01)
    args = ap.parse_args(argv)

    import jax
    import jax.numpy as jnp
    import numba

    import backends
    from backends.numpy.fused_topk import top_k_abs

    ops = backends.get("jax")  # imports backends.jax: its XLA flags, before the first computation
    n = 784 * 256
    k = max(1, int(np.ceil(args.ratio * n)))

    @numba.njit(parallel=True, cache=True)
    def read_bits(bits):  # the largest magnitude key of each row: one vectorized read
        out = np.zeros(bits.shape[0], np.int32)
        for i in numba.prange(bits.shape[0]):
            m = np.int32(0)
            for j in range(bits.shape[1]):
                m = max(m, bits[i, j] & np.int32(0x7FFFFFFF))
            out[i] = m
        return out

    def read_rows(x):
        return read_bits(x.view(np.int32))

    print(f"{numba.get_num_threads()} threads; rows of {n:,} entries, k = {k} ({args.ratio:g})")
    print(f"{'rows':>5} {'custom call ms':>15} {'read ms':>9} {'lax.top_k ms':>13} {'call/read':>10} {'lax/call':>9}")
    for rows in args.rows:
        x = gradient_rows(rows, n)
        xj = jnp.asarray(x)
        call = jax.jit(jax.vmap(lambda r: ops.top_k_abs(r, k)))
        lax = jax.jit(jax.vmap(lambda r: jax.lax.top_k(jnp.abs(r), k)[1]))
        best = alternate({"call": lambda: jax.block_until_ready(call(xj)), "read": lambda: read_rows(x),
                          "lax": lambda: jax.block_until_ready(lax(xj))}, args.repeat)
        ms = {key: 1e3 * v for key, v in best.items()}
        print(f"{rows:5d} {ms['call']:15.2f} {ms['read']:9.2f} {ms['lax']:13.2f} {ms['call'] / ms['read']:9.2f}x "
              f"{ms['lax'] / ms['call']:8.1f}x")

    big = gradient_rows(1, 25_000_000 // 5000 * 5000, seed=1).reshape(-1)
    kb = int(np.ceil(args.ratio * big.size))
    best = alternate({"select": lambda: top_k_abs(big, kb), "read": lambda: read_rows(big.reshape(50, -1))},
                     args.repeat)
    print(f"NumPy top_k_abs of {big.size:,} (k = {kb:,}): {1e3 * best['select']:.2f} ms, one read "
          f"{1e3 * best['read']:.2f} ms, {best['select'] / best['read']:.2f}x")


if __name__ == "__main__":
    main()
