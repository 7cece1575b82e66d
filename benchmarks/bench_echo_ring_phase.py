"""Where the mccl echo ring's wire idles at p >= 3: loss, or ranks out of phase?

The testbed's large collectives at p = 3 and 4 keep each link busy for only 52-70 % of the call
(bytes sent / (rate · time)), against 72-88 % at p = 2 (docs/simulator.md, held-out validation).
This script gives the two measurements behind what docs/simulator.md says about it:

1. **Measured** (needs root: network namespaces): a 4 MiB all-reduce and all-gather at p = 2 and
   p = 3 on one shaped testbed (``kfsim.testbed.microbench.run_cell``), with every link end's
   ``tc -s qdisc`` counters (bytes, packets, drops, overlimits: how often the token bucket held
   a packet back) and each namespace's TCP retransmissions and timeouts (``nstat``) around each
   cell. Drops or retransmissions would make the idle time loss recovery; none, with the hub's
   ports (a receiver's downlink) over their limit far more often at p = 3, makes it two senders
   meeting at one receiver.
2. **Model** (no root): MindSpore's CPU ring all-reduce (``AllReduceLauncher::RingAllReduce``:
   each step sends a chunk to the next rank, receives one from the previous, and ends when both
   the receipt and the echo of its own chunk are in; a rank echoes a chunk once all of it has
   arrived) run as a fluid model on ports of one rate, each rank an uplink and a downlink shared
   max-min fairly (:func:`kfsim.sim.maxmin.maxmin_rates`). Ranks that start in phase take 2
   chunk-times per step, the closed form. Ranks started up to ``spread`` chunk-times apart stay
   apart: the per-step time, steps 10-30 of a 30-step run, is printed over ``--trials`` random
   starts per (spread, p).

    sudo .venv/bin/python benchmarks/bench_echo_ring_phase.py [--rate 50] [--size 4194304]
    .venv/bin/python benchmarks/bench_echo_ring_phase.py --model-only
"""
from __future__ import annotations

import argparse
import random
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from kfsim.sim.maxmin import maxmin_rates  # noqa: E402

QDISC = re.compile(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+)")
TCP = ("TcpRetransSegs", "TcpExtTCPTimeouts", "TcpExtTCPFastRetrans")


def echo_ring(p: int, steps: int, starts: list[float]) -> list[float]:
    """Fluid echo ring, chunk = 1 unit at rate 1: the time each rank finishes each step."""
    flows: list[list] = []          # [src, dst, left, kind, step]
    received: set = set()
    echoed: set = set()
    wake = [(s, i, 0) for i, s in enumerate(starts)]   # (time, rank, step it starts)
    ends: dict[tuple[int, int], float] = {}
    t = 0.0
    while wake or flows:
        if flows:   # ports: uplink i = i, downlink i = p + i
            idx = np.array([[f[0], p + f[1]] for f in flows]).ravel()
            rates = maxmin_rates(np.arange(0, 2 * len(flows) + 1, 2), idx, np.ones(2 * p))
            dt_flow = min(f[2] / r for f, r in zip(flows, rates))
        else:
            rates, dt_flow = [], float("inf")
        wake.sort()
        dt = min(dt_flow, wake[0][0] - t) if wake else dt_flow
        for f, r in zip(flows, rates):
            f[2] -= r * dt
        t += dt
        done = [f for f in flows if f[2] <= 1e-12]
        flows = [f for f in flows if f[2] > 1e-12]
        for src, dst, _, kind, k in done:   # dst: the rank this flow completes something for
            if kind == "chunk":   # the receiver has it all: echo it back
                received.add((dst, k))
                flows.append([dst, src, 1.0, "echo", k])
            else:
                echoed.add((dst, k))
            if (dst, k) in received and (dst, k) in echoed:
                ends[dst, k] = t
                if k + 1 < steps:
                    wake.append((t, dst, k + 1))
        while wake and wake[0][0] <= t + 1e-15:
            _, i, k = wake.pop(0)
            flows.append([i, (i + 1) % p, 1.0, "chunk", k])
    return [max(ends[i, k] for i in range(p)) for k in range(steps)]


def model(trials: int) -> None:
    print("model: fluid echo ring, per-step time / 2 chunk-times (steps 10-30), ranks started up to "
          "`spread` chunk-times apart")
    print(f"{'spread':>7} {'p':>3} {'mean':>6} {'min':>6} {'max':>6}")
    for spread in (0.0, 0.1, 0.5, 2.0):
        for p in (2, 3, 4):
            ratios = []
            for trial in range(trials if spread else 1):
                rng = random.Random(1000 + trial)
                ends = echo_ring(p, 30, [rng.uniform(0, spread) for _ in range(p)])
                ratios.append((ends[29] - ends[9]) / 20 / 2)
            print(f"{spread:7.1f} {p:3d} {statistics.fmean(ratios):6.3f} {min(ratios):6.3f} {max(ratios):6.3f}")


def counters(tb) -> dict:
    from kfsim.testbed.netns import HUB, worker_ns
    out = {}
    for i in range(tb.workers):
        for ns, dev in ((worker_ns(i), "eth0"), (HUB, f"h{i}")):
            text = subprocess.run(["ip", "netns", "exec", ns, "tc", "-s", "qdisc", "show", "dev", dev],
                                  capture_output=True, text=True).stdout
            m = QDISC.search(text)
            out[f"{'up' if dev == 'eth0' else 'down'}{i}"] = np.array([int(v) for v in m.groups()]) if m else None
        text = subprocess.run(["ip", "netns", "exec", worker_ns(i), "nstat", "-az", *TCP],
                              capture_output=True, text=True).stdout
        out[f"tcp{i}"] = np.array([int(dict(ln.split()[:2] for ln in text.splitlines()[1:] if ln.split())
                                        .get(k, 0)) for k in TCP])
    return out


def measured(rate: float, size: int, repeats: int) -> None:
    from kfsim.testbed.microbench import run_cell
    from kfsim.testbed.netns import Shape, Testbed, require
    require()
    with Testbed(3, Shape(rate)) as tb:
        for p in (2, 3):
            before = counters(tb)
            cells = run_cell(tb, p, [size], repeats=repeats)
            after = counters(tb)
            print(f"p={p}, {rate:g} Mbit/s:")
            for c in cells:
                print(f"  {c.op} {c.nbytes / 2**20:g} MiB: {c.seconds:.3f} s, {c.tx_per_rank / 1e6:.2f} MB sent "
                      f"per rank, wire busy {c.tx_per_rank / (rate * 1e6 / 8) / c.seconds:.0%}")
            for i in range(p):
                up, down, tcp = (after[k] - before[k] for k in (f"up{i}", f"down{i}", f"tcp{i}"))
                print(f"  rank {i}: uplink {up[0] / 1e6:.1f} MB, {up[2]} dropped, {up[3]} overlimits; "
                      f"downlink {down[0] / 1e6:.1f} MB, {down[2]} dropped, {down[3]} overlimits; "
                      + ", ".join(f"{k} {v}" for k, v in zip(TCP, tcp)))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=50.0, help="link rate, Mbit/s")
    ap.add_argument("--size", type=int, default=4 * 2**20, help="bytes per rank")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trials", type=int, default=30, help="random starts per (spread, p) in the model")
    ap.add_argument("--model-only", action="store_true", help="skip the testbed (no root needed)")
    a = ap.parse_args(argv)
    if not a.model_only:
        measured(a.rate, a.size, a.repeats)
    model(a.trials)


if __name__ == "__main__":
    main()
