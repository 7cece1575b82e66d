"""Deep Gradient Compression (Lin et al. 2018).

Per worker and tensor, with momentum m, gradient g (clipped first):

    g <- g · min(1, clip / ||g||_2)              local gradient clipping (clip = 0: off)
    u <- m · u + g                               momentum correction
    v <- v + u                                   local accumulation
    thr = the value keeping a fraction `ratio` of a random sample of |v|
    S  = the (at most) k = ceil(ratio · d) largest |v_i| among |v_i| >= thr
    send v_S;   u_S <- 0,  v_S <- 0              momentum factor masking

The decoded mean of the sparse v_S already contains momentum: apply it with
plain SGD (no second momentum), as in the paper.

Threshold sampling: s = ceil(sample · d) positions drawn with the worker key
(with replacement; sample = 1 uses all of |v|, the exact k-th largest);
thr is the ceil(ratio · s)-th largest sampled |v|. At most 2k entries with
|v_i| >= thr > 0 (the first by index if more pass) are candidates, and an
exact top-k keeps the k largest; fewer than k are sent when fewer pass.
Unsent entries keep accumulating in v, so nothing is lost.

Sparsity warm-up: the ratio in force in epoch e < warmup_epochs is
max(ratio, (0.25, 0.0625, 0.015625, 0.004)[e]) (0.004 again beyond the 4th),
then `ratio`; an epoch is `steps_per_epoch` steps (0 disables warm-up). The
payload shape changes with it: `at(step)` is the dgc in force (a plain
dgc(ratio=r, ..., warmup_epochs=0, steps_per_epoch=0)), `phase(step)` the
warm-up stage (warmup_epochs once warm-up is over). Like other scheduled
compressors the factory returns the step-0 compressor (with the schedule).

Wire format (k for the ratio in force): values x.dtype[k] = v_S (0 in
padding), indices int32[k] (padding: d) — the layout of topk. Gather.

Per-tensor state: DGCState(momentum, residual) = (u, v), both flat (d,) in
the compute dtype (float32 for fp16/bf16): momentum is the corrected
momentum u, residual the locally accumulated, not yet sent v.

Non-finite input: NaN/±inf entries of v are always candidates, ranked first,
and a NaN/inf anywhere in v makes every sent value NaN (padding included),
so the decoded tensor is never silently finite.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from compressors import quant as Q
from compressors.core import Compressor, check, compute_dtype, fixed, upcast
from compressors.ops import Array
from compressors.registry import canonical, register
from compressors.topk import keep_count, sparse_leaf

WARMUP_RATIOS = (0.25, 0.0625, 0.015625, 0.004)


class DGCState(NamedTuple):
    """DGC per tensor, flat (d,) in the compute dtype: the momentum u and
    the accumulated residual v (entries not sent yet)."""

    momentum: Array
    residual: Array


def _sampled_threshold(ops, a, ratio, sample, key):
    """The ceil(ratio·s)-th largest of s sampled |v| (all of them when s = d)."""
    d = a.size
    s = keep_count(sample, d)
    if s < d:
        pos = ops.astype(ops.floor(ops.uniform(key, (s,)) * float(d)), np.int32)
        a = ops.gather(a, ops.minimum(pos, d - 1))
    keep = keep_count(ratio, s)
    return ops.top_k(a, keep)[0][keep - 1]


def _dgc_leaf(ratio: float, momentum: float, clip: float, sample: float):
    def init(ops, x):
        zeros = ops.zeros((x.size,), compute_dtype(x.dtype))
        return DGCState(zeros, zeros)

    def compress(ops, x, state, keys):
        u, v = state
        d, k = x.size, keep_count(ratio, x.size)
        if k == 0:
            return (ops.reshape(x, (-1,)), ops.zeros((0,), np.int32)), state
        g = upcast(ops, ops.reshape(x, (-1,)))
        if clip > 0:
            norm = ops.bucket_norm(g, 0)[0]
            g = g * ops.where(norm > clip, clip / norm, 1.0)
        u = u * momentum + g
        v = v + u
        a = ops.abs(v)
        thr = _sampled_threshold(ops, a, ratio, sample, keys.worker)
        cand = ops.nonzero(((a >= thr) & (a > 0)) | ~ops.isfinite(a), min(d, 2 * k))
        _, pos = ops.top_k(ops.gather(a, cand), k)
        idx = ops.gather(cand, pos)
        sent = ops.scatter_add(d, idx, ops.full((k,), 1.0, v.dtype)) > 0
        values = ops.astype(ops.gather(v, idx), x.dtype) + Q.poison(ops, v, x.dtype)
        return (values, idx), DGCState(ops.where(sent, 0.0, u), ops.where(sent, 0.0, v))

    return sparse_leaf(compress, ratio, init=init)


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _count(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


@register("dgc", paper="Lin et al. 2018, Deep Gradient Compression")
def dgc(ratio: float = 0.001, momentum: float = 0.9, clip: float = 0.0, sample: float = 0.01,
        warmup_epochs: int = 4, steps_per_epoch: int = 0) -> Compressor:
    """Deep Gradient Compression: momentum-corrected, masked, sampled-threshold top-k with warm-up."""
    check(_number(ratio) and 0 < ratio <= 1, f"dgc: ratio must be in (0, 1], got {ratio!r}")
    check(_number(momentum) and 0 <= momentum < 1, f"dgc: momentum must be in [0, 1), got {momentum!r}")
    check(_number(clip) and clip >= 0, f"dgc: clip must be a finite number >= 0 (0 = off), got {clip!r}")
    check(_number(sample) and 0 < sample <= 1, f"dgc: sample must be in (0, 1], got {sample!r}")
    check(_count(warmup_epochs), f"dgc: warmup_epochs must be an int >= 0, got {warmup_epochs!r}")
    check(_count(steps_per_epoch), f"dgc: steps_per_epoch must be an int >= 0 (0 = no warm-up), "
          f"got {steps_per_epoch!r}")
    spec = canonical("dgc", ratio=ratio, momentum=momentum, clip=clip, sample=sample,
                     warmup_epochs=warmup_epochs, steps_per_epoch=steps_per_epoch)

    def plain(r: float, name: str) -> Compressor:
        leaf = _dgc_leaf(float(r), float(momentum), float(clip), float(sample))
        return Compressor(name, fixed(leaf), doc="deep gradient compression")

    if warmup_epochs == 0 or steps_per_epoch == 0:
        return plain(ratio, spec)
    stages = [plain(r, canonical("dgc", ratio=r, momentum=momentum, clip=clip, sample=sample,
                                 warmup_epochs=0, steps_per_epoch=0))
              for r in [max(ratio, WARMUP_RATIOS[min(e, 3)]) for e in range(warmup_epochs)] + [ratio]]

    def phase(step: int) -> int:
        return min(max(step, 0) // steps_per_epoch, warmup_epochs)

    def at(step: int) -> Compressor:
        return stages[phase(step)]

    return stages[0]._replace(spec=spec, at=at, phase=phase)
