"""Edge inputs of the conformance matrix (``tests/test_edge_matrix.py``, and
lowered MindSpore in ``tests/mindspore/test_lowered_edges.py``).

One pytree per dtype holds every input kind, so one exchange covers them all
(leaves are independent: a leaf's keys are folded with its index, buckets
fuse payloads without mixing values):

* ``empty`` (0,) and ``empty2d`` (0, 3): no elements — ``compressors.core.EMPTY``;
* ``scalar`` () and ``one`` (1,) (ordinary values: ``tests/test_conformance.py``);
* ``huge`` (4, 3, 5): finite entries of magnitude 2^(E-1)..2^E, ``E = HUGE_EXP``:
  within 1/32..1/16 of the largest finite value (float16: 2048..4096;
  float32, bf16: 1.1e37..2.1e37; float64: the float32 range, since scales
  travel as float32). A compressor that squares or sums before scaling
  overflows here; one whose own estimate stays in range must not (60
  entries: even a whole-tensor L2 norm, < 7.8 · 2^E, is finite).

``huge`` is ``down`` (the same entries, magnitude 0.5..1) times 2^E exactly,
so a positively homogeneous compressor (C(2^E x) = 2^E C(x)) must give
2^E times its result on ``down``: a check that an overflow did not turn
into a finite, wrong answer.
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16, np.dtype(np.float64)]
KINDS = {"empty": (0,), "empty2d": (0, 3), "scalar": (), "one": (1,), "huge": (4, 3, 5)}
EMPTY_KINDS = ("empty", "empty2d")
FULL = os.environ.get("KFSIM_EDGE_FULL") == "1"


def matrix(specs) -> list:
    """(spec, dtype) cases of the default suite: every spec in float32 and, in
    turn, one of float16 / bfloat16 / float64 (each dtype meets a third of the
    specs, every codec family meets each); ``KFSIM_EDGE_FULL=1``: every pair."""
    others = DTYPES[1:]
    return [(s, d) for i, s in enumerate(specs) for d in DTYPES
            if FULL or d == DTYPES[0] or d == others[i % len(others)]]

# Wire formats that saturate by design (documented): an fp16 cast of a value
# beyond 65504 is ±inf (compressors/cast.py), lptopk's fp16 values are
# clipped to ±65504 (compressors/lptopk.py). Their ``huge`` results stay
# within what fp16 carries; everything else must stay finite.
SATURATING_WIRE = ("fp16",)


def huge_exp(dtype) -> int:
    """E with 2^E <= max / 16 of the dtype (float64: of float32)."""
    top = min(float(ml_dtypes.finfo(dtype).max), float(np.finfo(np.float32).max))
    return int(np.floor(np.log2(top))) - 3


def saturates(spec: str, dtype) -> bool:
    """Whether ``spec`` may send ``huge`` entries of ``dtype`` as ±inf."""
    return np.dtype(dtype) != np.float16 and any(w in spec for w in SATURATING_WIRE)


def gradients(step: int, worker: int, dtype, scaled: bool = True) -> dict:
    """One worker's gradients at one step, every kind; ``scaled=False`` gives
    ``huge`` divided by 2^E (the ``down`` tree)."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng([step, worker, 11])
    out = {k: rng.standard_normal(s).astype(dtype) for k, s in KINDS.items() if k != "huge"}
    down = (rng.uniform(0.5, 1.0, KINDS["huge"]) * np.where(rng.random(KINDS["huge"]) < 0.5, -1, 1)).astype(dtype)
    out["huge"] = (down.astype(np.float64) * 2.0 ** huge_exp(dtype)).astype(dtype) if scaled else down
    return out
