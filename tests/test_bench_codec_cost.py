"""benchmarks/bench_codec_cost.py runs end to end on the NumPy backend: measured rows, the
passes' spread (the noise the errors sit on), both fits' tables; bad input is one line."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.bench_module import load_bench

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench_codec_cost.py"


def _bench():
    return load_bench("bench_codec_cost")


def test_noise_is_the_slowest_pass_over_the_fastest():
    noise = _bench().noise
    assert noise({("a", 1): 1.0, ("b", 1): 2.0, ("c", 1): None}, {("a", 1): 1.5, ("b", 1): 2.0}) == \
        "median +25.0%, worst +50.0% (2 rows)"
    assert noise({}, {}) == "no rows"


def test_two_passes_print_the_spread_and_both_fits(tmp_path):
    rows = tmp_path / "rows.json"
    r = subprocess.run([sys.executable, str(BENCH), "--backend", "numpy", "--sizes", "1e5", "1e6", "--fit-size", "1e5",
                        "--passes", "2", "--repeat", "1", "--cache-speedup", "1", "--spec", "fp16()", "signsgd()",
                        "--save", str(rows)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert "# numpy: a row's slowest pass over its fastest, median +" in out and "(4 rows)" in out
    assert "## numpy: fit A:" in out and "## numpy: fit B:" in out
    assert out.count("     1e+05 ") == 2 and out.count("     1e+06 ") == 2 and "numpy fit B: all        median" in out
    # the saved rows refit without measuring; a corrupt file is one line and a non-zero exit
    again = subprocess.run([sys.executable, str(BENCH), "--backend", "numpy", "--fit-size", "1e5",
                            "--load", str(rows)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "slowest pass" not in again.stdout and "numpy fit B: all" in again.stdout
    rows.write_text("{not json")
    bad = subprocess.run([sys.executable, str(BENCH), "--backend", "numpy", "--load", str(rows)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1 and "cannot read" in bad.stderr
