"""DDP-style gradient buckets (Li et al. 2020, PyTorch DDP): which tensors travel together.

Tensors are walked in *backward* order (the last defined is the first whose
gradient exists) and a bucket is closed once adding the next tensor would take
it past the cap; a tensor larger than the cap gets a bucket of its own.
Bucket 0 is the first ready. The cap counts dense gradient bytes, so the
layout is the same for every compressor (as in DDP, where buckets are fixed
before any communication hook sees them).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

DEFAULT_BUCKET_BYTES = 25 * 2**20  # DDP's bucket_cap_mb=25 (MiB)


def assign_buckets(dense_bytes: Sequence[float], cap_bytes: float = DEFAULT_BUCKET_BYTES) -> np.ndarray:
    """Per tensor (forward order), the id of its bucket (0 = first ready)."""
    if not (cap_bytes > 0):
        raise ValueError(f"bucket cap must be > 0 bytes, got {cap_bytes}")
    dense = np.asarray(dense_bytes, dtype=np.float64)
    ids = np.zeros(len(dense), dtype=np.int64)
    b, fill = 0, 0.0
    for t in range(len(dense) - 1, -1, -1):
        if fill > 0 and fill + dense[t] > cap_bytes:
            b, fill = b + 1, 0.0
        ids[t] = b
        fill += dense[t]
    return ids


def bucket_members(ids: np.ndarray) -> tuple[tuple[int, ...], ...]:
    """Leaf indices of every bucket, bucket 0 first, each in backward (ready) order."""
    n_buckets = int(ids.max()) + 1 if len(ids) else 0
    members: list[list[int]] = [[] for _ in range(n_buckets)]
    for t in range(len(ids) - 1, -1, -1):
        members[int(ids[t])].append(t)
    return tuple(tuple(m) for m in members)
