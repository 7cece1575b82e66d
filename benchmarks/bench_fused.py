"""The NumPy binding's fused kernels beside the compositions that define them, in one run.

For each fused op of the quantizers (QSGD's bucket norms too), natural
compression, the sign codecs and PowerSGD's rank-4 products (the gradient as
a 5000-column matrix), on a 25M-entry float32 gradient: the one-pass Numba kernel
(``backends.numpy``) and the reference composition (``compressors.fused.Fused``
run on the same binding's primitive ops), timed alternately (kernel,
composition, kernel, ...) so that a machine whose speed drifts affects both
alike; best of ``--repeat``. The threefry draws the stochastic kernels make
are timed alone too: the blocks they compute (``random_words``: both words of
each block) on all cores with nothing stored (``threefry.draw_blocks``), the
part of their time no kernel layout can remove on this CPU. (Until 2026-12-05
this column timed ``random_bits`` of as many words, one block per word and
every word written to memory: 2.7x the kernels' real draws.)

    .venv/bin/python benchmarks/bench_fused.py [--size N] [--repeat R]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def alternate(fns: dict, repeat: int) -> dict:
    """Best seconds of each function, calling them in turn ``repeat`` times (after one warm-up)."""
    for f in fns.values():
        f()
    best = {k: 1e9 for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            best[k] = min(best[k], time.perf_counter() - t)
    return best


def cases(NP, Fused, x):
    """(name, kernel, composition, threefry words drawn or 0)."""
    n = x.size
    key = NP.key(7)
    out = []
    for bits in (8, 4, 2):
        B = 512
        mn, mx = NP.bucket_min_max(x, B)
        top = float(2**bits - 1)
        step = np.maximum((mx - mn) * np.float32(1 / top), np.float32(2.0**-126))
        inv = (1 / step).astype(np.float32)
        words = NP.quantize_pack(x, mn, inv, B, top, bits, key)
        out.append((f"quantize_pack {bits}-bit", lambda i=inv, m=mn, b=bits, t=top: NP.quantize_pack(x, m, i, B, t, b, key),
                    lambda i=inv, m=mn, b=bits, t=top: Fused.quantize_pack(NP, x, m, i, B, t, b, key), -(-n // 2)))
        out.append((f"dequantize {bits}-bit", lambda w=words, m=mn, s=step, b=bits: NP.dequantize(w, b, n, m, s, B),
                    lambda w=words, m=mn, s=step, b=bits: Fused.dequantize(NP, w, b, n, m, s, B), 0))
    out.append(("bucket_min_max 512", lambda: NP.bucket_min_max(x, 512), lambda: Fused.bucket_min_max(NP, x, 512), 0))
    out.append(("bucket_norm 512", lambda: NP.bucket_norm(x, 512), lambda: Fused.bucket_norm(NP, x, 512), 0))
    signs, exps = NP.natural_pack(x, key)
    out.append(("natural_pack", lambda: NP.natural_pack(x, key), lambda: Fused.natural_pack(NP, x, key), n))
    out.append(("natural_unpack", lambda: NP.natural_unpack(signs, exps, n),
                lambda: Fused.natural_unpack(NP, signs, exps, n), 0))
    packed = NP.pack_signs(x)
    pos, neg = np.float32(0.5), np.float32(-0.5)
    out.append(("pack_signs", lambda: NP.pack_signs(x), lambda: Fused.pack_signs(NP, x), 0))
    out.append(("unpack_signs", lambda: NP.unpack_signs(packed, n, np.asarray(pos), np.asarray(neg)),
                lambda: Fused.unpack_signs(NP, packed, n, np.asarray(pos), np.asarray(neg)), 0))
    m = 5000 if n % 5000 == 0 else 1  # PowerSGD's rank-4 decode and EF residual, on x as an n/m x m matrix
    c = x.reshape(n // m, m)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((n // m, 4)).astype(np.float32), rng.standard_normal((m, 4)).astype(np.float32)
    out.append(("matmul_nt rank 4", lambda: NP.matmul_nt(a, b), lambda: Fused.matmul_nt(NP, a, b), 0))
    out.append(("sub_matmul_nt rank 4", lambda: NP.sub_matmul_nt(c, a, b), lambda: Fused.sub_matmul_nt(NP, c, a, b), 0))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=25_000_000, help="entries of the float32 gradient (default 25M)")
    ap.add_argument("--repeat", type=int, default=5, help="timed calls of each (best is kept)")
    args = ap.parse_args(argv)
    if args.size < 1 or args.repeat < 1:
        print("error: --size and --repeat must be at least 1", file=sys.stderr)
        return 2

    import backends
    from backends.numpy import threefry
    from compressors.fused import Fused

    NP = backends.get("numpy")
    x = np.random.default_rng(0).standard_normal(args.size).astype(np.float32)
    print(f"{args.size:,} float32 entries, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} before")
    print(f"{'fused op':<24}{'kernel ms':>11}{'composition ms':>16}{'speed-up':>10}{'threefry ms':>13}{'share':>7}")
    key = NP.key(7)
    for name, kernel, comp, draws in cases(NP, Fused, x):
        fns = {"kernel": kernel, "comp": comp}
        if draws:
            fns["rng"] = lambda d=draws: threefry.draw_blocks(-(-d // 2))   # random_words: 2 words a block
        with warnings.catch_warnings(), np.errstate(all="ignore"):  # the compositions' ldexp overflows unused
            warnings.simplefilter("ignore")
            t = alternate(fns, args.repeat)
        rng = f"{t['rng'] * 1e3:13.1f}{t['rng'] / t['kernel']:7.0%}" if draws else f"{'-':>13}{'':>7}"
        print(f"{name:<24}{t['kernel'] * 1e3:11.1f}{t['comp'] * 1e3:16.1f}{t['comp'] / t['kernel']:9.1f}x{rng}")
    print(f"load {os.getloadavg()[0]:.2f} after; 'share': the kernel's time its threefry blocks alone take "
          "(computed, not stored)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
