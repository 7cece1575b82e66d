"""benchmarks/bench_codec_ops.py: a spec's round trip timed op by op beside the model's price
of each op; bad input (a spec, a rows file) is one line and a non-zero exit."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench_codec_ops.py"


def run(*args):
    return subprocess.run([sys.executable, str(BENCH), *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ops_are_timed_and_priced():
    r = run("fp16()", "dgc(ratio=0.05, sample=0.5)", "--size", "1e5", "--repeat", "2")
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert "prices from the catalog's CPU profile" in out
    lines = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.startswith("  ") and ln.split()}
    # fp16's two casts and dgc's where/top_k are called through the namespace: measured and priced
    for op in ("astype", "where", "top_k", "gather"):
        calls, measured, priced = lines[op][1:4]
        assert float(calls) >= 1 and float(measured) > 0 and float(priced) > 0, lines[op]
    assert out.count("operators and Python") == 2 and "round trip" in out


def test_bad_spec_and_corrupt_rows_are_one_line(tmp_path):
    r = run("nosuch()", "--size", "1e3", "--repeat", "1")
    assert r.returncode != 0 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    bad = tmp_path / "rows.json"
    bad.write_text("{not json")
    r = run("fp16()", "--load", str(bad))
    assert r.returncode != 0 and "Traceback" not in r.stderr and "cannot read NumPy rows" in r.stderr, r.stderr
