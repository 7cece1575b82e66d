"""Collective micro-benchmarks on the testbed: sizes × worker counts × link rates.

Each (rate, p) cell is one msrun job of ``workers/collective_bench.py``;
the per-call times of all ranks are combined as the *slowest rank's median*
(a collective ends when its last rank ends). Bytes sent per rank come from
the worker's own ``eth0`` counters around each call.
"""
from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path
from typing import NamedTuple, Sequence

from kfsim.testbed.fit import Sample
from kfsim.testbed.netns import Shape, Testbed
from kfsim.testbed.run import python_script, run_job, tail_logs


class Measured(NamedTuple):
    """One collective measurement: link rate, op, ranks, bytes per rank, seconds, bytes sent per rank."""

    rate_mbit: float
    op: str
    p: int
    nbytes: int
    seconds: float
    tx_per_rank: float

    def sample(self) -> Sample:
        return Sample(self.op, self.p, float(self.nbytes), self.seconds)


def combine(records: list[dict], rate_mbit: float) -> list[Measured]:
    """Rank files' records → one :class:`Measured` per (op, bytes): slowest rank's median time,
    mean over ranks of the median bytes sent."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["op"], r["bytes"], r["p"]), []).append(r)
    out = []
    for (op, nb, p), rs in sorted(groups.items()):
        t = max(statistics.median(r["times"]) for r in rs)
        tx = statistics.fmean(statistics.median(r["tx"]) for r in rs)
        out.append(Measured(rate_mbit, op, p, nb, t, tx))
    return out


def run_cell(tb: Testbed, p: int, sizes: Sequence[int], ops: Sequence[str] = ("allreduce", "allgather"),
             repeats: int = 3, log_root: str | Path | None = None, timeout_s: float = 280.0) -> list[Measured]:
    """One msrun job on the first p namespaces of ``tb`` at its current shaping."""
    if tb.shape is None:
        raise ValueError("the testbed must be shaped (Shape(rate)) to benchmark collectives")
    if p < 2:
        raise ValueError(f"collectives need p >= 2, got {p}")
    if not sizes or any(int(s) < 4 for s in sizes):
        raise ValueError(f"sizes must be bytes >= 4, got {list(sizes)}")
    root = Path(log_root or tempfile.mkdtemp(prefix="kfsim-bench-")).resolve()  # the workers run elsewhere
    cell = root / f"p{p}_{tb.shape.rate_mbit:g}mbit"
    cfg = {"out": str(cell / "res"), "sizes": [int(s) for s in sizes], "ops": list(ops),
           "repeats": int(repeats), "warmup": 1}
    res = run_job(tb, python_script("collective_bench.py"), log_dir=cell / "logs", workers=p,
                  env={"KFSIM_BENCH": json.dumps(cfg)}, timeout_s=timeout_s)
    if not res.ok:
        raise RuntimeError(f"collective benchmark failed (p={p}, {tb.shape.rate_mbit:g} Mbit/s, "
                           f"rc={res.returncodes}, timed_out={res.timed_out})\n{tail_logs(res)}")
    records = []
    for f in sorted((cell / "res").glob("rank*.json")):
        records += json.loads(f.read_text())
    if len({r["rank"] for r in records}) != p:
        raise RuntimeError(f"expected {p} rank files in {cell / 'res'}")
    return combine(records, tb.shape.rate_mbit)


def run_grid(rates_mbit: Sequence[float], workers: Sequence[int], sizes: Sequence[int],
             ops: Sequence[str] = ("allreduce", "allgather"), repeats: int = 3,
             log_root: str | Path | None = None, latency_ms: float = 0.0) -> list[Measured]:
    """All cells, on one testbed of max(workers) namespaces, reshaped per rate."""
    out: list[Measured] = []
    with Testbed(max(workers), Shape(rates_mbit[0], latency_ms)) as tb:
        for rate in rates_mbit:
            tb.reshape(Shape(rate, latency_ms))
            for p in workers:
                out += run_cell(tb, p, sizes, ops, repeats, log_root)
    return out


def save(measured: Sequence[Measured], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([m._asdict() for m in measured], indent=1))
    return path


def load(path: str | Path) -> list[Measured]:
    path = Path(path)
    if not path.exists():
        raise ValueError(f"measurement file {path} does not exist")
    try:
        return [Measured(**d) for d in json.loads(path.read_text())]
    except (TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a kfsim micro-benchmark file: {exc}") from None
