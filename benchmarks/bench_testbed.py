"""What MindSpore's CPU collectives put on the wire, and how well the mccl model fits, side by side.

Reads a calibration file written by ``kfsim calibrate`` (default
``profiles/testbed-measurements.json``; measuring needs root and takes
minutes, so this benchmark only reports) and prints, per (op, p, rate):

* bytes each rank sent (eth0 counters) ÷ the textbook ring's
  (all-reduce 2(p−1)/p·n, all-gather (p−1)·m), messages ≥ 256 KiB;
* the measured time ÷ the time of the echo-ring bytes at the shaped rate
  (how much of the link the ring actually uses);
* the median / worst relative error of the fitted model per weighting.

    python benchmarks/bench_testbed.py [measurements.json]
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np

from kfsim.testbed import calibrate as cal
from kfsim.testbed.fit import WEIGHTINGS, echo_factor, fit_collectives
from kfsim.testbed.microbench import Measured


def main(path: str = "profiles/testbed-measurements.json") -> None:
    data = cal.load_measurements(Path(path))
    ms = [Measured(**c) for c in data["collectives"]]
    if not ms:
        sys.exit(f"{path}: no collective measurements (run `kfsim calibrate` as root)")
    print(f"{'op':>9} {'p':>2} {'Mbit/s':>7} {'sent÷textbook':>14} {'time÷(2×textbook bytes / rate)':>31}")
    for op in ("allreduce", "allgather"):
        for p in sorted({m.p for m in ms}):
            for rate in sorted({m.rate_mbit for m in ms}):
                sel = [m for m in ms if m.op == op and m.p == p and m.rate_mbit == rate and m.nbytes >= 262144]
                if not sel:
                    continue
                ef = statistics.median(echo_factor(m.tx_per_rank, op, p, m.nbytes) for m in sel)
                tb = [2 * (2 * (p - 1) / p * m.nbytes if op == "allreduce" else (p - 1) * m.nbytes) for m in sel]
                slow = statistics.median(m.seconds / (b / (rate * 1e6 / 8)) for m, b in zip(sel, tb))
                print(f"{op:>9} {p:2d} {rate:7g} {ef:14.2f} {slow:31.2f}")
    print(f"\n{'Mbit/s':>7} {'p':>2} " + " ".join(f"{w + ' med/max':>20}" for w in WEIGHTINGS))
    for rate in sorted({m.rate_mbit for m in ms}):
        for p in sorted({m.p for m in ms if m.rate_mbit == rate}):
            cells = []
            for w in WEIGHTINGS:
                f = fit_collectives([m.sample() for m in ms if m.rate_mbit == rate and m.p == p], weighting=w)
                cells.append(f"{f.median_abs_error:9.1%}/{f.max_abs_error:6.1%}")
                big = [abs(e) for m, e in zip([m for m in ms if m.rate_mbit == rate and m.p == p], f.rel_errors)
                       if m.nbytes >= 1048576]
            print(f"{rate:7g} {p:2d} " + " ".join(f"{c:>20}" for c in cells)
                  + f"   (sqrt, ≥1 MiB: max {max(big) if big else np.nan:.1%})")


if __name__ == "__main__":
    main(*sys.argv[1:2])
