"""Local SGD / DiLoCo: a real 2-worker msrun job against the simulation, side by side.

Per pseudo-gradient compressor: the largest |loss difference| over the steps
and the largest |θ difference| at the end (θ = the outer parameters, from
rank 0's final checkpoint), next to the per-step compressors' tolerance
(``tests/mindspore/test_msrun.py::TOL``, ``LOSS_TOL`` for uncompressed), and
the job's wall time. Setting: fmnist-mlp, 2 workers, global batch 64, lr 0.1,
seed 0, exact RNG; default H = 4, two streaming fragments, overlap 1, outer
lr 0.7, Nesterov momentum 0.9 (``tests/mindspore/test_msrun_local.py``).

    .venv/bin/python benchmarks/bench_local_msrun.py [--steps 8] [--specs "none();ef(topk(ratio=0.01))"]
        [--local-steps 4 --fragments 2 --overlap-steps 1 --outer-lr 0.7 --outer-momentum 0.9]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tolerances and set-up are the tests'


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--specs", default="none();ef(topk(ratio=0.01))")
    p.add_argument("--local-steps", type=int, default=4)
    p.add_argument("--fragments", type=int, default=2)
    p.add_argument("--overlap-steps", type=int, default=1)
    p.add_argument("--outer-lr", type=float, default=0.7)
    p.add_argument("--outer-momentum", type=float, default=0.9)
    a = p.parse_args(argv)
    from kfsim.train.config import local_algo
    algo = local_algo(a.local_steps, a.outer_lr, a.outer_momentum, a.fragments, a.overlap_steps)

    from kfsim import records
    from kfsim.launch import launch
    from tests.mindspore.test_msrun import LOSS_TOL, TOL
    from tests.mindspore.test_msrun_local import checkpoint_arrays, simulate

    print(f"local SGD {dict(algo._asdict())}, {a.steps} steps, 2 workers")
    print(f"{'pseudo-gradient compressor':30s} {'max |dloss|':>12s} {'max |dtheta|':>13s} {'tolerance':>10s} "
          f"{'job wall s':>10s}")
    for spec in [s.strip() for s in a.specs.split(";") if s.strip()]:
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            t0 = time.time()
            res = launch(spec, workers=2, steps=a.steps, batch=64, seed=0, rng="exact", local=algo,
                         record=d / "ms.jsonl", log_dir=d / "logs", ckpt_dir=d / "ck", ckpt_every=a.steps,
                         timeout_s=600)
            wall = time.time() - t0
            rec = records.read(res.record)
            real = checkpoint_arrays(d / "ck" / f"rank0.step{a.steps}.ckpt")
        sim = simulate(spec, algo, a.steps)
        dloss = max(abs(x.loss - y.loss) for x, y in zip(rec.steps, sim.steps))
        dtheta = max(float(np.max(np.abs(real[f"local.anchor.{k}"] - np.asarray(v))))
                     for k, v in sim.state.outer.anchor.items())
        print(f"{spec:30s} {dloss:12.3g} {dtheta:13.3g} {TOL.get(spec, LOSS_TOL):10.0e} {wall:10.1f}")


if __name__ == "__main__":
    main()
