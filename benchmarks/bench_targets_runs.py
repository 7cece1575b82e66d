"""Issue 18's targets over several runs of ``bench_compressors.py``, judged on the median run.

    python benchmarks/bench_targets_runs.py [--runs 5] [-- bench_compressors.py options]

Each run is a fresh process of ``bench_compressors.py --targets`` (its own memory ceiling, its own
rows, its own peers). One run is not enough to call a target that sits near its line: on the
2-core development machine, three runs within two minutes read the ceiling at 39.9, 46.4 and 43.0
GB/s while natural()'s round trip took 15.1, 14.7 and 14.9 ms, so its fraction of t_min read 42,
38 and 40 %. This script prints, per target, every run's figure, the median, the range and how
many runs met the target, and judges the target on the median; likewise the JAX-over-NumPy ratio
of every compressor (its worst run) and qsgd against the PyTorch peer when PyTorch is importable
(``PYTHONPATH`` naming a directory with ``torch`` in it works: the peer is an optional extra).
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = re.compile(r"^  (\S.*?)\s+(jax|numpy)\s+([\d.]+) GB/s\s+([\d.]+)%\s+(.*)$")
BW = re.compile(r"^BW = ([\d.]+) GB/s")
RATIO = re.compile(r"^  (\S.*?)\s+([\d.]+)x\s+(met|MISSED)$")
QSGD_PEER = re.compile(r"^  qsgd 127, 512-bucket\s+([\d.]+) ms.*?\s([\d.]+) ms\s+\d+%\s+([\d.]+) ms")


def goal(verdict: str) -> tuple[str, float, int]:
    """(figure, line, sense) of the target a target line's verdict names: sense +1 for at least the
    line, -1 for at most it."""
    if "GB/s" in verdict:
        return "GB/s", 3.0, 1
    if "x quantize" in verdict:
        return "x q8", 1.5, -1
    return "%t_min", 30.0 if ">=30%" in verdict else 40.0, 1


def figure(kind: str, target: tuple) -> float:
    """One run's figure of that kind from its (backend, GB/s, fraction, verdict)."""
    if kind == "GB/s":
        return target[1]
    if kind == "x q8":
        return float(re.match(r"([\d.]+)x", target[3]).group(1))
    return 100 * target[2]


def parse(text: str) -> dict:
    """One run's ceiling, targets {spec: (backend, GB/s, fraction, verdict text)}, JAX/NumPy ratios
    and (kfsim, plain JAX, PyTorch) ms of qsgd when the PyTorch peer ran."""
    run = {"bw": None, "targets": {}, "ratios": {}, "qsgd_peer": None}
    section = ""
    for line in text.splitlines():
        if line.startswith("targets ("):
            section = "targets"
        elif line.startswith("JAX over NumPy"):
            section = "ratios"
        elif line.startswith("peers, side by side"):
            section = "peers"
        if m := BW.match(line):
            run["bw"] = float(m.group(1))
        elif section == "targets" and (m := TARGET.match(line)):
            run["targets"][m.group(1)] = (m.group(2), float(m.group(3)), float(m.group(4)) / 100, m.group(5))
        elif section == "ratios" and (m := RATIO.match(line)):
            run["ratios"][m.group(1)] = float(m.group(2))
        elif section == "peers" and (m := QSGD_PEER.match(line)):
            run["qsgd_peer"] = tuple(float(g) for g in m.groups())
    return run


def summarise(runs: list[dict]) -> list[str]:
    """The table: per target the runs' figures, median, met-in count and the median's verdict."""
    out = [f"{'target':<32} {'figure':<8} {'runs':<34} {'median':>7}  {'met in':>7}  on the median",
           "-" * 100]
    for spec in dict.fromkeys(s for r in runs for s in r["targets"]):
        have = [r["targets"][spec] for r in runs if spec in r["targets"]]
        fig, line, sense = goal(have[0][3])
        vals = [figure(fig, h) for h in have]
        ok = [(v - line) * sense >= 0 for v in vals]
        med = statistics.median(vals)
        good = (med - line) * sense >= 0
        shown = " ".join(f"{v:.3g}" for v in vals)
        out.append(f"{spec:<32} {fig:<8} {shown:<34} {med:7.3g}  {sum(ok):>3} of {len(ok):<2} "
                   f"{'met' if good else 'MISSED'}")
    worst = [max(r["ratios"].values()) for r in runs if r["ratios"]]
    if worst:
        out.append(f"JAX over NumPy, worst compressor of each run: {' '.join(f'{w:.2f}x' for w in worst)} "
                   f"(target <= 1.5x: {'met' if statistics.median(worst) <= 1.5 else 'MISSED'} on the median)")
    peer = [r["qsgd_peer"] for r in runs if r["qsgd_peer"]]
    if peer:
        faster = [t / k for k, _, t in peer]
        out.append(f"qsgd vs the PyTorch peer (its ms over kfsim's): {' '.join(f'{f:.1f}x' for f in faster)} "
                   f"(target > 1x: {'met' if statistics.median(faster) > 1 else 'MISSED'} on the median)")
    else:
        out.append("qsgd vs the PyTorch peer: not measured (no run imported torch)")
    bws = [r["bw"] for r in runs if r["bw"]]
    if bws:
        out.append(f"ceiling BW per run: {' '.join(f'{b:.1f}' for b in bws)} GB/s")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="fresh runs of bench_compressors.py --targets")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="after --: options for bench_compressors.py")
    a = ap.parse_args(argv)
    if a.runs < 1:
        ap.error(f"--runs must be >= 1, got {a.runs}")
    rest = [x for x in a.rest if x != "--"]
    runs = []
    for i in range(a.runs):
        cmd = [sys.executable, str(HERE / "bench_compressors.py"), "--targets", *rest]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"run {i + 1}: bench_compressors.py exited {r.returncode}: "
                  f"{(r.stderr.strip().splitlines() or ['no output'])[-1]}", file=sys.stderr)
            return 1
        runs.append(parse(r.stdout))
        print(f"run {i + 1} of {a.runs}: BW {runs[-1]['bw']} GB/s, {len(runs[-1]['targets'])} targets", flush=True)
    print("\n".join(summarise(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
