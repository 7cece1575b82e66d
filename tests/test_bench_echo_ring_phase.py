"""benchmarks/bench_echo_ring_phase.py: the fluid model of MindSpore's echo ring (the p >= 3 idle-time
diagnostic of docs/simulator.md) and its no-root command."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_module import load_bench

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench_echo_ring_phase.py"


def _bench():
    return load_bench("bench_echo_ring_phase")


@pytest.mark.parametrize("p", [2, 3, 4])
def test_in_phase_ranks_take_the_closed_forms_two_chunk_times_per_step(p):
    ends = _bench().echo_ring(p, 2 * (p - 1), [0.0] * p)
    assert ends == pytest.approx([2.0 * (k + 1) for k in range(2 * (p - 1))], abs=1e-9)


def test_one_late_rank_p2_costs_exactly_its_delay_once_and_the_ring_stays_apart():
    # rank 1 starts half a chunk-time late: its chunk and rank 0's echo then share rank 1's uplink
    ends = _bench().echo_ring(2, 12, [0.0, 0.5])
    steps = [b - a for a, b in zip(ends, ends[1:])]
    assert min(steps) >= 2.0 - 1e-9          # a port carries 2 chunks per step: never faster
    assert steps[-1] > 2.0 + 1e-3            # out of phase stays out of phase


@pytest.mark.parametrize("p", [3, 4])
def test_random_starts_never_beat_the_closed_form_and_some_lose(p):
    import random
    bench = _bench()
    worst = 0.0
    for trial in range(5):
        rng = random.Random(trial)
        ends = bench.echo_ring(p, 20, [rng.uniform(0, 1.0) for _ in range(p)])
        per_step = (ends[19] - ends[9]) / 10
        assert per_step >= 2.0 - 1e-9
        worst = max(worst, per_step)
    assert worst > 2.1


def test_model_only_runs_without_root_and_prints_the_table():
    r = subprocess.run([sys.executable, str(BENCH), "--model-only", "--trials", "2"], capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.strip() and ln.split()[0].replace(".", "").isdigit()]
    assert len(rows) == 12 and {row[1] for row in rows} == {"2", "3", "4"}
    assert all(float(row[2]) == 1.0 for row in rows if row[0] == "0.0")
