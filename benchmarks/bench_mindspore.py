"""MindSpore msrun benchmark: native all-reduce vs compressed reducers, on loopback.

For 2 and 4 workers (one msrun job at a time), a ~10M-parameter MLP
(784 -> H -> H -> 10, H = 2900: 10.7M parameters) on Fashion-MNIST:

* step_ms: median wall time of a training step (steps 2.., rank 0), which
  includes forward/backward, the reducer (encode, collectives, decode) and SGD;
* bytes/step: what one worker puts on the wire per step by the compressor's
  plan (dense float32 for the native all-reduce; mccl's ring itself sends
  ~2x that per rank, see docs);
* codec_ms: the compressor's encode+decode alone for one worker, compiled
  (LoopbackExchange with n = 1, no communication), timed in this process;
  codec % = codec_ms / step_ms, the reducer's own overhead.

Run:  python benchmarks/bench_mindspore.py [--hidden 2900] [--steps 8] [--workers 2 4]
Memory: compiled CPU graphs are large; 4 workers of a 10M model use several GB each.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SPECS = ["native", "ef(topk(ratio=0.01))", "quantize(bits=8)", "powersgd(rank=4)"]


def codec_ms(spec: str, hidden: int, reps: int = 3) -> float:
    from backends.mindspore.lower import LoopbackExchange
    from kfsim.launch.ms_models import wide_mlp_params
    params = wide_mlp_params(hidden)
    vals = [params[k] for k in sorted(params)]
    lx = LoopbackExchange(spec, [(v.shape, v.dtype) for v in vals], n=1, seed=0)
    grads = [[(v * 0.01 + 0.001).astype(np.float32) for v in vals]]
    st = lx.init(grads)
    lx(grads, st, 0)  # compile
    times = []
    for i in range(reps):
        t = time.perf_counter()
        _, st = lx(grads, st, i + 1)
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=2900)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--specs", nargs="+", default=SPECS)
    a = ap.parse_args(argv)
    from kfsim import records
    from kfsim.launch import launch
    from kfsim.launch.ms_models import wide_mlp_params
    nparams = sum(v.size for v in wide_mlp_params(a.hidden).values())
    print(f"model: MLP 784-{a.hidden}-{a.hidden}-10, {nparams / 1e6:.2f}M parameters; global batch {a.batch}; "
          f"{a.steps} steps per job", flush=True)
    codec = {}
    for spec in a.specs:
        if spec != "native":
            codec[spec] = codec_ms(spec, a.hidden)
            print(f"codec {spec}: {codec[spec]:.1f} ms", flush=True)
    rows = []
    for n in a.workers:
        for spec in a.specs:
            t0 = time.time()
            res = launch(spec, workers=n, model="wide", hidden=a.hidden, steps=a.steps, batch=a.batch,
                         timeout_s=900, stall_s=300)
            rec = records.read(res.record)
            step = 1e3 * statistics.median(s.time_s for s in rec.steps[2:])
            c = codec.get(spec)
            rows.append((n, spec, step, rec.steps[-1].bytes_sent, c))
            print(f"  n={n} {spec}: {step:.1f} ms/step ({time.time() - t0:.0f} s job)", flush=True)
    print()
    print(f"| workers | reducer | step ms | MB/step/worker | vs native bytes | codec ms | codec % of step |")
    print(f"|---|---|---|---|---|---|---|")
    for n, spec, step, b, c in rows:
        dense = next(r[3] for r in rows if r[0] == n and r[1] == "native") if any(
            r[0] == n and r[1] == "native" for r in rows) else b
        cs = "-" if c is None else f"{c:.1f}"
        cf = "-" if c is None else f"{100 * c / step:.0f}%"
        print(f"| {n} | {spec} | {step:.1f} | {b / 1e6:.2f} | {dense / b:.1f}x | {cs} | {cf} |")


if __name__ == "__main__":
    main()
