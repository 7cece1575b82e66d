"""Every built-in compressor's deployed MindSpore codec against its NumPy round trip
(issue 14 item 4: "every built-in compressor's lowered encode+decode ... within 3x of
the NumPy/Numba round trip on the same tensors").

For each registered leaf compressor with its default parameters, plus error feedback
around top-k, on the ~10.7M-parameter wide MLP tensors (784 -> H -> H -> 10), one
worker's encode + decode (+ state update), timed in one process, side by side: the
deployed reducer (``backends.mindspore.compressed_reducer``, n = 1: the Cell an msrun
job runs, in its phase at step STEADY_STEP; rng "exact", and "fast" where that is
another graph) and ``compressors.roundtrip`` on the NumPy/Numba backend. Gradients
enter MindSpore as zero-copy tensors; every variant of a spec is timed in turn within
each of --reps rounds (see bench_ms_codecs.py, whose timing helpers this reuses).

Run:  .venv/bin/python benchmarks/bench_ms_builtins.py [--hidden 2900] [--reps 7] [--specs S ...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_ms_codecs import STEADY_STEP, load, numpy_fn, reducer_fn, timed, verdict  # noqa: E402

TARGET = 3.0


def builtin_specs() -> list[str]:
    from compressors.registry import entries
    return [f"{e.name}()" for e in entries() if not e.combinator] + ["ef(topk(ratio=0.01))"]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=2900)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--specs", nargs="+", default=None, help="default: every built-in compressor")
    a = ap.parse_args(argv)
    if a.reps < 3:
        sys.exit("error: --reps must be at least 3")
    from backends.mindspore.runtime import setup
    from kfsim.launch.ms_models import wide_mlp_params
    setup()
    params = wide_mlp_params(a.hidden)
    names = sorted(params)
    vals = [(params[k] * 0.01 + 0.001).astype(np.float32) for k in names]
    specs = a.specs or builtin_specs()
    print(f"wide MLP 784-{a.hidden}-{a.hidden}-10: {sum(v.size for v in vals) / 1e6:.2f}M parameters; "
          f"{len(specs)} specs; one worker, best/median of {a.reps} rounds, compile excluded")
    print(f"before: {load()}", flush=True)
    rows = []
    for spec in specs:
        try:
            fns = {}
            fns["exact"], exact = reducer_fn(spec, vals, "exact", STEADY_STEP)
            fast, cell = reducer_fn(spec, vals, "fast", STEADY_STEP)
            if cell.source_path != exact.source_path:  # the spec draws randomness outside fused kernels
                fns["fast"] = fast
            fns["numpy"] = numpy_fn(spec, names, vals)
        except ValueError as exc:  # a spec the reducer refuses (e.g. a collective it cannot use)
            print(f"  {spec}: not deployable: {exc}", flush=True)
            continue
        r = {"spec": spec, **timed(fns, a.reps)}
        print("  " + spec + ": " + ", ".join(f"{k} {r[k][0]:.1f} ms" for k in fns), flush=True)
        rows.append(r)
    print(f"after: {load()}")
    print()
    print("| spec | reducer exact ms | reducer fast ms | numpy ms | reducer/numpy (faster mode) |")
    print("|---|---|---|---|---|")
    ratios = []
    for r in rows:
        low = min(r["exact"][0], r["fast"][0]) if "fast" in r else r["exact"][0]
        ratios.append(low / r["numpy"][0])
        fast = f"{r['fast'][0]:.1f} / {r['fast'][1]:.1f}" if "fast" in r else "-"
        print(f"| {r['spec']} | {r['exact'][0]:.1f} / {r['exact'][1]:.1f} | {fast} "
              f"| {r['numpy'][0]:.1f} / {r['numpy'][1]:.1f} | {verdict(ratios[-1], TARGET)} |")
    missed = sum(x > TARGET for x in ratios)
    print(f"(ms: best / median; {len(rows) - missed} of {len(rows)} within {TARGET:g}x of NumPy)")


if __name__ == "__main__":
    main()
