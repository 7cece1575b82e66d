"""Native data-parallel MLP training on the testbed (``workers/train_native.py``), and its model profile.

The MLP ``layers = [d0, d1, …, dk]`` is ``Dense(d0→d1), ReLU, …, Dense(dk−1→dk)``;
its catalog entry lists MindSpore's tensor shapes (weight (out, in), bias
(out,)) in forward order, ``flops_per_sample = 6·Σ in·out`` (forward 2·in·out,
backward twice that) and the batch.
"""
from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path
from typing import NamedTuple, Sequence

from kfsim.launch.host import share
from kfsim.testbed.netns import Testbed
from kfsim.testbed.run import python_script, run_job, tail_logs


def mlp_name(layers: Sequence[int]) -> str:
    return "mlp-" + "-".join(str(int(d)) for d in layers)


def parse_layers(text: str) -> list[int]:
    try:
        layers = [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"layers must be comma-separated integers, got {text!r}") from None
    if len(layers) < 2 or any(d < 1 for d in layers):
        raise ValueError(f"layers needs >= 2 positive sizes, got {text!r}")
    return layers


def mlp_model_entry(layers: Sequence[int], batch: int) -> dict:
    """A ``[[models]]`` entry of the profile schema for the MLP."""
    shapes, flops = [], 0.0
    for a, b in zip(layers[:-1], layers[1:]):
        shapes += [[int(b), int(a)], [int(b)]]
        flops += 6.0 * a * b
    return {"name": mlp_name(layers), "tensor_shapes": shapes, "flops_per_sample": flops, "batch": int(batch),
            "source": "kfsim testbed MLP (MindSpore Dense layers)"}


def mlp_params(layers: Sequence[int]) -> int:
    return sum(a * b + b for a, b in zip(layers[:-1], layers[1:]))


class TrainRun(NamedTuple):
    """One native training run: per-step medians over steps, worst rank."""

    p: int
    rate_mbit: float
    layers: tuple
    batch: int
    step_s: float           # median step time (slowest rank)
    compute_s: float        # median step time with the reducer replaced by the identity
    tx_per_step: float      # bytes sent per worker per step (mean over ranks of the median)
    loss: float             # last loss, mean over ranks
    per_rank: list

    @property
    def comm_s(self) -> float:
        return max(self.step_s - self.compute_s, 0.0)


def run_native(tb: Testbed, p: int, layers: Sequence[int], batch: int = 64, steps: int = 4, warmup: int = 1,
               compute_only: bool = True, native: bool = True, log_root: str | Path | None = None, timeout_s: float = 280.0) -> TrainRun:
    if tb.shape is None:
        raise ValueError("the testbed must be shaped")
    root = Path(log_root or tempfile.mkdtemp(prefix="kfsim-train-")).resolve()  # the workers run elsewhere
    cell = root / f"native_p{p}_{tb.shape.rate_mbit:g}mbit_{mlp_name(layers)}"
    cfg = {"out": str(cell / "res"), "op_threads": share(p),
           "layers": list(map(int, layers)), "batch": int(batch), "steps": int(steps),
           "warmup": int(warmup), "compute_only": bool(compute_only),
           "native": bool(native)}
    res = run_job(tb, python_script("train_native.py"), log_dir=cell / "logs", workers=p,
                  env={"KFSIM_TRAIN": json.dumps(cfg)}, timeout_s=timeout_s)
    if not res.ok:
        raise RuntimeError(f"training run failed (p={p}, {tb.shape.rate_mbit:g} Mbit/s, rc={res.returncodes}, "
                           f"timed_out={res.timed_out})\n{tail_logs(res)}")
    ranks = [json.loads(f.read_text()) for f in sorted((cell / "res").glob("rank*.json"))]
    if len(ranks) != p:
        raise RuntimeError(f"expected {p} rank files in {cell / 'res'}, got {len(ranks)}")
    step = max(statistics.median(r["step_s"]) for r in ranks) if native else 0.0
    comp = max(statistics.median(r["compute_s"]) for r in ranks) if compute_only else 0.0
    tx = statistics.fmean(statistics.median(r["tx"]) for r in ranks) if native else 0.0
    loss = statistics.fmean(r["loss"][-1] for r in ranks) if native else float("nan")
    return TrainRun(p, tb.shape.rate_mbit, tuple(layers), batch, step, comp, tx, loss, ranks)
