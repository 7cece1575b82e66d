"""benchmarks/bench_train.py --quick runs and prints the three target ratios
side by side (a smoke test of the benchmark, not a timed assertion)."""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_bench_train_quick_prints_three_ratios():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_train.py"), "--quick"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    start = lines.index("targets (measured in this run):")
    targets = lines[start + 1:start + 4]
    for tag, line in zip(("(a)", "(b)", "(c)"), targets):
        assert line.strip().startswith(tag), targets
        assert re.search(r"\d+\.\d+x\s+\(target <= [\d.]+x", line), line
