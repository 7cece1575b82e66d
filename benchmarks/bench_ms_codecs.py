"""Hand-written MindSpore codecs vs kfsim's lowered ones vs NumPy (issue 14 item 4).

For three specs on the ~10.7M-parameter wide MLP tensors
(kfsim.launch.ms_models.wide_mlp_params(hidden), 784 -> H -> H -> 10), one
worker's encode + decode (+ EF state update), timed in one process:

* hand ms:    a hand-written MindSpore GRAPH_MODE Cell doing the same job
              (state in Parameters, updated with ops.assign);
* reducer ms: the deployed reducer, backends.mindspore.compressed_reducer(spec,
              n=1) — the Cell an msrun job runs (state in Parameters; with one
              rank its collectives are the identity, so it runs in this process),
              rng "exact" and, where the spec draws randomness (int8), "fast";
* lowered ms: kfsim's lowered program through the loopback exchange
              (backends.mindspore.lower.LoopbackExchange, n = 1, as
              benchmarks/bench_mindspore.py:codec_ms), which also copies its state
              in and out as NumPy every call;
* numpy ms:   compressors.roundtrip on backends.get("numpy") (as
              benchmarks/bench_compressors.py:make_roundtrip).

All MindSpore variants are timed the same way: NumPy gradients in as zero-copy
Tensor views (ms.Tensor.from_numpy: in a training step the gradients already are
tensors, and ms.Tensor(ndarray) copies, ~8 ms per 33.6 MB, harness cost that is
no codec's), the decoded tensors back as NumPy. Compile time is excluded (one
warm-up call); every variant of a spec is timed in turn within each of --reps
rounds (the machine's drift falls on all alike); best and median. Targets (of the deployed reducer, the faster of its RNG
modes): <= 1.3x hand, <= 3x numpy; fast RNG never slower than exact (on CPU the
fused ops are host kernels drawing threefry bits in both modes: where the two
reducers are one generated source, fast/exact is 1.00x by construction and
printed so).

The hand-written codecs:
  ef(topk(ratio=0.01)): acc = g + e; idx = topk(|acc|, k); vals = acc[idx];
      decode = scatter(idx, vals); e <- acc with acc[idx] = 0.
  quantize(bits=8, bucket=512): per 512-bucket lo = min, step = max((max-lo)/255, 2^-126),
      inv = max(1/step, 2^-126); code = floor(y) + [u < y - floor(y)], y = clip((x-lo)*inv, 0, 255),
      u ~ MindSpore UniformReal; four codes packed per int32 word; decode lo + code*step.
  powersgd(rank=4) (EF, warm start): acc = g + e; P = acc Q; P_hat = Gram-Schmidt(P)
      (one modified pass, eps 1e-8, as PyTorch's hook); Qn = acc^T P_hat; decode P_hat Qn^T;
      e <- acc - decode; Q <- Qn, columns scaled to max |entry| 1. Tensors whose
      compression rate n*m/((n+m)*r) is <= 2 (the biases) go dense, as kfsim's.

Run:  .venv/bin/python benchmarks/bench_ms_codecs.py [--hidden 2900] [--reps 5]
The machine may be shared: the load average is printed before and after.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SPECS = ["ef(topk(ratio=0.01))", "quantize(bits=8)", "powersgd(rank=4)"]
RANDOM_SPECS = {"quantize(bits=8)"}
STEADY_STEP = 1000
TINY = float(2.0 ** -126)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def timed(fns: dict, reps: int) -> dict:
    """{name: (best ms, median ms)} of every function in ``fns``, timed in turn within each
    of ``reps`` rounds, so the machine's drift falls on all of them alike."""
    for fn in fns.values():
        fn()  # compile / warm-up, excluded
    ts = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            ts[name].append(time.perf_counter() - t)
    return {name: (1e3 * min(t), 1e3 * statistics.median(t)) for name, t in ts.items()}


# ---- hand-written MindSpore Cells -------------------------------------------------------------

def make_cells():
    import mindspore as ms
    from mindspore import Parameter, ParameterTuple, Tensor, nn, ops

    class EFTopK(nn.Cell):
        def __init__(self, shapes, ratio=0.01):
            super().__init__()
            self.shapes = tuple(tuple(s) for s in shapes)
            self.ks = tuple(min(math.prod(s), max(1, math.ceil(ratio * math.prod(s)))) for s in self.shapes)
            self.res = ParameterTuple([Parameter(Tensor(np.zeros(s, np.float32)), name=f"e{i}", requires_grad=False)
                                       for i, s in enumerate(self.shapes)])

        def construct(self, *grads):
            outs = ()
            for i in range(len(self.shapes)):
                d = math.prod(self.shapes[i])
                flat = ops.reshape(grads[i] + self.res[i], (-1,))
                _, idx = ops.topk(ops.abs(flat), self.ks[i])
                vals = ops.gather(flat, idx, 0)
                idx2 = ops.reshape(idx, (-1, 1))
                dec = ops.scatter_nd(idx2, vals, (d,))
                ops.assign(self.res[i], ops.reshape(ops.tensor_scatter_update(flat, idx2, ops.zeros_like(vals)),
                                                    self.shapes[i]))
                outs = outs + (ops.reshape(dec, self.shapes[i]),)
            return outs

    class Int8(nn.Cell):
        def __init__(self, shapes, bucket=512, seed=0):
            super().__init__()
            self.shapes = tuple(tuple(s) for s in shapes)
            self.bucket = bucket
            self.nbs = tuple(-(-math.prod(s) // bucket) for s in self.shapes)
            for i in range(len(shapes)):  # one stream per tensor
                setattr(self, f"uniform{i}", ops.UniformReal(seed=seed + 1, seed2=i + 1))
            self.shifts = Tensor(np.array([0, 8, 16, 24], np.int32))

        def construct(self, *grads):
            outs = ()
            for i in range(len(self.shapes)):
                d = math.prod(self.shapes[i])
                nb, b = self.nbs[i], self.bucket
                flat = ops.reshape(grads[i], (-1,))
                if nb * b > d:  # pad with the last entry: min/max unchanged
                    flat = ops.concat((flat, ops.broadcast_to(flat[d - 1:], (nb * b - d,))))
                rows = ops.reshape(flat, (nb, b))
                lo = ops.ReduceMin(keep_dims=True)(rows, 1) + 0.0
                step = ops.maximum((ops.ReduceMax(keep_dims=True)(rows, 1) - lo) * (1.0 / 255.0), TINY)
                inv = ops.maximum(1.0 / step, TINY)
                y = ops.clamp((rows - lo) * inv, 0.0, 255.0)
                f = ops.floor(y)
                u = getattr(self, f"uniform{i}")((nb, b))
                q = ops.cast(ops.where(u < y - f, f + 1.0, f), ms.int32)
                words = ops.ReduceSum()(ops.bitwise_left_shift(ops.reshape(q, (-1, 4)), self.shifts), 1)
                # ---- decode (the wire: words, lo, step) ----
                codes = ops.bitwise_and(ops.bitwise_right_shift(ops.reshape(words, (-1, 1)), self.shifts), 255)
                dec = lo + ops.cast(ops.reshape(codes, (nb, b)), ms.float32) * step
                outs = outs + (ops.reshape(ops.reshape(dec, (-1,))[:d], self.shapes[i]),)
            return outs

    class PowerSGD(nn.Cell):
        def __init__(self, shapes, rank=4, seed=0):
            super().__init__()
            rng = np.random.default_rng(seed)
            self.shapes = tuple(tuple(s) for s in shapes)
            self.rank = rank
            self.mats = tuple((s[0], math.prod(s[1:])) for s in self.shapes)
            self.lowrank = tuple(len(s) > 0 and n * m / ((n + m) * rank) > 2.0
                                 for s, (n, m) in zip(self.shapes, self.mats))
            qs, es = [], []
            for i, (n, m) in enumerate(self.mats):
                q = rng.uniform(-1, 1, (m, rank)) if self.lowrank[i] else np.zeros((1, 1))
                qs.append(Parameter(Tensor(q.astype(np.float32)), name=f"q{i}", requires_grad=False))
                es.append(Parameter(Tensor(np.zeros((n, m), np.float32)), name=f"e{i}", requires_grad=False))
            self.qs, self.res = ParameterTuple(qs), ParameterTuple(es)

        def orth(self, p):
            cols = [p[:, j:j + 1] for j in range(self.rank)]
            for j in range(self.rank):
                c = cols[j] / (ops.sqrt(ops.ReduceSum()(cols[j] * cols[j])) + 1e-8)
                cols[j] = c
                for l in range(j + 1, self.rank):
                    cols[l] = cols[l] - ops.ReduceSum()(c * cols[l]) * c
            return ops.concat(cols, 1)

        def construct(self, *grads):
            outs = ()
            for i in range(len(self.shapes)):
                if not self.lowrank[i]:
                    outs = outs + (grads[i] + 0.0,)
                    continue
                acc = ops.reshape(grads[i], self.mats[i]) + self.res[i]
                p = self.orth(ops.matmul(acc, self.qs[i]))
                qn = ops.matmul(ops.transpose(acc, (1, 0)), p)
                dec = ops.matmul(p, ops.transpose(qn, (1, 0)))
                ops.assign(self.res[i], acc - dec)
                top = ops.ReduceMax(keep_dims=True)(ops.abs(qn), 0)
                ops.assign(self.qs[i], qn * (1.0 / ops.maximum(top, TINY)))
                outs = outs + (ops.reshape(dec, self.shapes[i]),)
            return outs

    return {"ef(topk(ratio=0.01))": EFTopK, "quantize(bits=8)": Int8, "powersgd(rank=4)": PowerSGD}


def hand_fn(spec, vals):
    import mindspore as ms
    cell = make_cells()[spec]([v.shape for v in vals])
    ms.set_context(mode=ms.GRAPH_MODE)

    def run():
        outs = cell(*[ms.Tensor.from_numpy(v) for v in vals])
        return [o.asnumpy() for o in outs]
    return run, cell


# ---- kfsim lowered and NumPy --------------------------------------------------------------------

def reducer_fn(spec, vals, rng, step: int = 0):
    """The deployed reducer of ``spec`` in its phase at ``step`` (a schedule: DGC's warm-up)."""
    import mindspore as ms

    import compressors as C
    from backends.mindspore.reducer import compressed_reducer
    cell = compressed_reducer(C.parse(spec).step(step), vals, n=1, rank=0, seed=0, rng=rng, step=step)
    ms.set_context(mode=ms.GRAPH_MODE)

    def run():  # mutable: a plain tuple of Tensors is a graph constant, recompiled on every call
        outs = cell(ms.mutable(tuple(ms.Tensor.from_numpy(v) for v in vals)))
        return [o.asnumpy() for o in outs]
    return run, cell


def lowered_fn(spec, vals, rng):
    from backends.mindspore.lower import LoopbackExchange
    lx = LoopbackExchange(spec, [(v.shape, v.dtype) for v in vals], n=1, seed=0, rng=rng)
    grads = [list(vals)]
    box = {"st": lx.init(grads), "i": 0}

    def run():
        box["i"] += 1
        mean, box["st"] = lx(grads, box["st"], box["i"])
        return mean
    return run, lx, box


def numpy_fn(spec, names, vals):
    import backends
    import compressors as C
    ops = backends.get("numpy")
    comp = C.parse(spec)
    grads = {k: ops.asarray(v) for k, v in zip(names, vals)}
    state = comp.init(ops, grads)
    keys = C.make_keys(ops, 0, STEADY_STEP)
    return lambda: C.roundtrip(ops, comp, grads, state, keys)


def verdict(ratio: float, target: float) -> str:
    return f"{ratio:.2f}x ({'met' if ratio <= target else 'MISSED'} <= {target:g}x)"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=2900)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--specs", nargs="+", default=SPECS)
    a = ap.parse_args(argv)
    if a.reps < 3:
        sys.exit("error: --reps must be at least 3")
    unknown = [s for s in a.specs if s not in SPECS]
    if unknown:
        sys.exit(f"error: no hand-written Cell for {unknown[0]!r}; choose from {SPECS}")
    from backends.mindspore.runtime import setup
    from kfsim.launch.ms_models import wide_mlp_params
    setup()
    params = wide_mlp_params(a.hidden)
    names = sorted(params)
    vals = [(params[k] * 0.01 + 0.001).astype(np.float32) for k in names]
    print(f"wide MLP 784-{a.hidden}-{a.hidden}-10: {sum(v.size for v in vals) / 1e6:.2f}M parameters, "
          f"{len(vals)} tensors; one worker, best/median of {a.reps} runs, compile excluded")
    print(f"machine is shared with other users: before: {load()}", flush=True)
    rows = []
    for spec in a.specs:
        r = {"spec": spec}
        fns = {"hand": hand_fn(spec, vals)[0]}
        for rng in (("exact", "fast") if spec in RANDOM_SPECS else ("exact",)):
            fns[rng], cell = reducer_fn(spec, vals, rng)
            r[f"{rng} source"] = cell.source_path
        fns["loopback"] = lowered_fn(spec, vals, "exact")[0]
        fns["numpy"] = numpy_fn(spec, names, vals)
        r.update(timed(fns, a.reps))
        print("  " + spec + ": " + ", ".join(f"{k} {r[k][0]:.1f} ms" for k in fns), flush=True)
        rows.append(r)
    print(f"after: {load()}")
    print()
    print("| spec | hand ms | reducer exact ms | reducer fast ms | loopback ms | numpy ms | reducer/hand "
          "| reducer/numpy | fast/exact | loopback/hand |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        low = min(r["exact"][0], r["fast"][0]) if "fast" in r else r["exact"][0]
        fast = f"{r['fast'][0]:.1f} / {r['fast'][1]:.1f}" if "fast" in r else "- (no RNG)"
        same = "fast" in r and r["fast source"] == r["exact source"]  # fused host kernels draw threefry in both
        fe = ("1.00x (met: one graph)" if same else
              f"{r['fast'][0] / r['exact'][0]:.2f}x ({'met' if r['fast'][0] <= r['exact'][0] else 'MISSED'})"
              if "fast" in r else "-")
        print(f"| {r['spec']} | {r['hand'][0]:.1f} / {r['hand'][1]:.1f} | {r['exact'][0]:.1f} / {r['exact'][1]:.1f} "
              f"| {fast} | {r['loopback'][0]:.1f} / {r['loopback'][1]:.1f} | {r['numpy'][0]:.1f} / {r['numpy'][1]:.1f} "
              f"| {verdict(low / r['hand'][0], 1.3)} | {verdict(low / r['numpy'][0], 3.0)} | {fe} "
              f"| {r['loopback'][0] / r['hand'][0]:.2f}x |")
    print("(ms: best / median; ratios from the best; reducer = the faster of its RNG modes)")


if __name__ == "__main__":
    main()
