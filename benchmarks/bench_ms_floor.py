"""What MindSpore's CPU runtime costs before any codec runs (issue 14 item 4's floor).

On the ~10.7M-parameter wide MLP tensors, timed interleaved in one process (best and
median of --reps rounds), each beside the NumPy work it is compared with:

* the reducer floor: a GRAPH_MODE Cell that returns its inputs and bumps a step
  counter (every kfsim reducer has one) — MindSpore then hands back copies of all
  outputs — against the Cell without the counter, and NumPy's ``none()`` round trip;
* the casts: one Cell casting float32 -> float16 -> float32 and one for bfloat16
  (MindSpore's own CPU Cast kernels), against the NumPy backend's cast kernels there
  and back (``backends.numpy.casts``), which the ``fp16()``/``bf16()`` round trips run;
* a pyfunc crossing: a host kernel that returns its input's first entry (what moving
  the tensor into a ``ops.Custom(pyfunc)`` kernel costs), against the empty graph.

Run:  .venv/bin/python benchmarks/bench_ms_floor.py [--hidden 2900] [--reps 9]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_ms_codecs import load, numpy_fn, timed  # noqa: E402


def cells():
    import mindspore as ms
    from mindspore import Parameter, nn, ops

    from backends.mindspore.runtime import custom, ms_dtype

    class Identity(nn.Cell):
        def construct(self, grads):
            return grads

    class Counted(nn.Cell):
        def __init__(self):
            super().__init__()
            self.step = Parameter(ms.Tensor(np.int32(0)), name="step", requires_grad=False)
            self.one = ms.Tensor(np.int32(1))

        def construct(self, grads):
            ops.assign_add(self.step, self.one)
            return grads

    class RoundTrip(nn.Cell):
        def __init__(self, dtype):
            super().__init__()
            self.dtype = dtype

        def construct(self, grads):
            return tuple(ops.cast(ops.cast(g, self.dtype), ms.float32) for g in grads)

    class Crossing(nn.Cell):
        def __init__(self):
            super().__init__()
            self.first = custom(lambda x: np.asarray(x).reshape(-1)[:1].copy(), lambda s: (1,),
                                lambda t: ms_dtype(np.float32))

        def construct(self, grads):
            return tuple(self.first(g) for g in grads)

    return {"identity": Identity(), "counted": Counted(), "cast fp16": RoundTrip(ms.float16),
            "cast bf16": RoundTrip(ms.bfloat16), "pyfunc in": Crossing()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=2900)
    ap.add_argument("--reps", type=int, default=9)
    a = ap.parse_args(argv)
    from backends.mindspore.runtime import setup
    setup()
    import mindspore as ms

    from backends.numpy.arrays import BF16
    from backends.numpy.casts import narrow, widen
    from kfsim.launch.ms_models import wide_mlp_params
    ms.set_context(mode=ms.GRAPH_MODE)
    params = wide_mlp_params(a.hidden)
    names = sorted(params)
    vals = [(params[k] * 0.01 + 0.001).astype(np.float32) for k in names]
    print(f"wide MLP 784-{a.hidden}-{a.hidden}-10: {sum(v.size for v in vals) / 1e6:.2f}M parameters; "
          f"best/median of {a.reps} rounds; {load()}")

    def graph(cell):
        def run():
            outs = cell(ms.mutable(tuple(ms.Tensor.from_numpy(v) for v in vals)))
            return [o.asnumpy() for o in outs]
        return run

    fns = {name: graph(cell) for name, cell in cells().items()}
    fns["numpy none()"] = numpy_fn("none()", names, vals)
    fns["numpy fp16 there and back"] = lambda: [widen(narrow(v, np.dtype(np.float16))) for v in vals]
    fns["numpy bf16 there and back"] = lambda: [widen(narrow(v, BF16)) for v in vals]
    t = timed(fns, a.reps)
    print(f"after: {load()}\n")
    print("| MindSpore CPU | ms | NumPy | ms | ratio |")
    print("|---|---|---|---|---|")
    rows = [("counted identity graph (a reducer's floor)", "counted", "numpy none()"),
            ("identity graph without a step counter", "identity", "numpy none()"),
            ("Cast float32 -> float16 -> float32", "cast fp16", "numpy fp16 there and back"),
            ("Cast float32 -> bfloat16 -> float32", "cast bf16", "numpy bf16 there and back"),
            ("every tensor into a pyfunc kernel", "pyfunc in", "numpy none()")]
    for label, ms_key, np_key in rows:
        print(f"| {label} | {t[ms_key][0]:.1f} / {t[ms_key][1]:.1f} | {np_key} | {t[np_key][0]:.1f} / "
              f"{t[np_key][1]:.1f} | {t[ms_key][0] / t[np_key][0]:.2f}x |")
    print(f"(a pyfunc crossing of all tensors costs {t['pyfunc in'][0] - t['identity'][0]:.1f} ms over the empty "
          "graph)")


if __name__ == "__main__":
    main()
