"""Encode/decode cost of a compressor on a device, from the compressor's own op program.

Nothing here knows a compressor by name. ``compressors.cost`` traces a
compressor on one tensor (shape, dtype) into the kernels of one worker's
encode and of its decode of n payloads, each kernel with its bytes read and
written, its FLOPs (matrix products) and its cost class; this module prices
those kernels on the cluster's device:

    t(op) = max( (bytes(op) / s(op) + missed(op)) / bw(class),  flops(op) · f(class) / peak(dtype) )
            + drawn(op) / bw(rng) + segments(op) · t_segment + t_launch
    missed(op) = scattered(op) · max(0, 1 − C / table(op)) · L    (C, L: the device's cache and line bytes)
    s(op)      = 1 / (1 − h · (1 − 1/S)) if bytes(op) ≤ C / 2 (resident: ``OpCost.resident``) else 1
                 (S: the device's ``cache_speedup`` | cluster.codec.cache_speedup, measured)
    h          = min(1, (C / 2) / written(program))   (``OpCounts.resident_share``: the share
                 of a resident kernel's bytes the cache still serves once the encode, or one
                 payload's decode, writes more than half of it)
    bw(class) = stream_bw / f(class)          (device profile, kfsim.catalog.devices)
              | cluster.codec.<class>         (measured, ``kfsim calibrate``)
    t_launch  = device.launch_s | cluster.codec.op_overhead
    t_segment = cluster.codec.segment_overhead | 0   (per bucket a bucketed kernel walks:
                ``OpCost.segments``; measured by ``benchmarks/bench_codec_cost.py``)

    T_enc(tensor)    = Σ_{op ∈ encode} t(op) + t_call
    t_call           = cluster.codec.call_overhead | 0    (per coded tensor: the codec's entry)
    T_dec(tensor, n) = Σ_{op ∈ decode} t(op) + n · Σ_{op ∈ decode_per_worker} t(op)

where ``drawn(op)`` is the bytes of the random words a fused kernel draws
inside its pass (``OpCost.rng_bytes``: quantize_pack, natural_pack),
``scattered(op)`` the line transfers of a gather/scatter whose indices are
not known to ascend (hashed, sampled or rank-ordered: one per index read,
two per index updated) into an array of ``table(op)`` bytes, each a whole
line once the array outgrows the cache (``compressors.cost``,
``OpCost.missed_bytes``),
``stream_bw`` is the achievable streaming bandwidth, ``f(class)`` the
class's time multiplier (select ≈ 10 passes of radix select, gather/scatter
≈ 4 for scattered sectors, ...; documented defaults in
:data:`kfsim.catalog.devices.DEFAULT_FACTORS`), ``peak(dtype)`` the matmul
peak for the inputs' dtype, and ``decode_per_worker`` the part of decode that
grows with the number n of gathered payloads (traced at n = 2 and 3, exact
for any n ≥ 2: see ``compressors.cost``). Counts in the decode intercept
are signed, so T_dec is clamped at 0.

A tensor the compressor sends dense — one SUM round of the whole tensor in
its own dtype *and* a program that is at most the 1/n scaling of the sum
(``none()``, the small tensors a filter skips, a warm-up's dense phase;
``kfsim.sim.exchange_cost.is_dense_exchange``) — is charged nothing there:
that scaling is what an averaging all-reduce does in the collective (its
reduction cost γ). A full-size SUM payload that the compressor computes
(``x * 0.5``, a momentum update) is priced like any other program.

Costs are cached per (spec, shape, dtype) for the trace (``compressors.cost``)
and per (spec, shape, dtype, device rates) for the seconds, so the simulator
traces each compressor once per distinct tensor shape.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from compressors.cost import CLASSES, OpCounts
from compressors.cost import codec_cost as _program_cost


class Rates(NamedTuple):
    """A device's codec-kernel constants, resolved (hashable; one per cluster device + override)."""

    bw: tuple            # per class (CLASSES order): bytes/s
    factor: tuple        # per class: multiplier of the FLOP term
    flops: tuple         # ((dtype name, FLOP/s), ...) for the matmul term
    overhead: float      # seconds per op
    call: float = 0.0    # seconds per coded tensor and exchange (the codec's entry)
    cache: float = 0.0   # bytes of the last-level cache scattered accesses hit in
    line: float = 64.0   # bytes a missed access moves
    speedup: float = 1.0  # streaming rate of a kernel resident in the cache over the class's rate
    segment: float = 0.0  # seconds per bucket a bucketed kernel walks

    def peak(self, dtype: str) -> float:
        for d, f in self.flops:
            if d == dtype:
                return f
        return dict(self.flops)["float32"]


_CLASS_INDEX = {c: i for i, c in enumerate(CLASSES)}
_RNG = _CLASS_INDEX["rng"]
_RATES: dict = {}


def rates(cluster) -> Rates:
    """The device profile of ``cluster``, overridden by its measured ``cluster.codec``."""
    key = (cluster.device, cluster.codec)
    found = _RATES.get(key)
    if found is None:
        dev, over = key
        bw, fac = [], []
        for c in CLASSES:
            f = dev.factor(c)
            measured = over.rate(c)
            bw.append(float(measured) if measured is not None else dev.achievable_bw / f)
            fac.append(f)
        flops = tuple((d, float(dev.matmul_flops(d))) for d in ("float32", "float16", "bfloat16", "float64"))
        overhead = over.op_overhead if over.op_overhead is not None else dev.launch_s
        call = over.call_overhead if over.call_overhead is not None else 0.0
        speedup = over.cache_speedup if over.cache_speedup is not None else dev.cache_speedup
        segment = over.segment_overhead if over.segment_overhead is not None else 0.0
        found = _RATES[key] = Rates(tuple(bw), tuple(fac), flops, float(overhead), float(call),
                                    float(dev.cache_bytes), float(dev.line_bytes), float(speedup), float(segment))
    return found


def seconds(counts: OpCounts, r: Rates, share: float | None = None) -> float:
    """Σ_ops count · (max((bytes / s + missed) / bw(class), flops · f(class) / peak(dtype))
    + drawn / bw(rng) + segments · t_segment + overhead); ``share``: the program's
    (``OpCounts.resident_share``), by default that of ``counts``."""
    total = 0.0
    if share is None:
        share = counts.resident_share(r.cache)
    for op, k in counts.entries:
        i = _CLASS_INDEX[op.cls]
        t = (op.streamed(r.cache, r.speedup, share) + op.missed_bytes(r.cache, r.line)) / r.bw[i]
        if op.flops:
            t = max(t, op.flops * r.factor[i] / r.peak(op.flop_dtype))
        if op.rng_bytes:
            t += op.rng_bytes / r.bw[_RNG]
        if op.segments:
            t += op.segments * r.segment
        total += k * (t + r.overhead)
    return total


def decode_seconds(dec, per_worker, one, n):
    """Decode seconds of n workers' payloads: ``one`` for a lone worker (n = 1, off the line:
    ``CodecCost.decode_one``), else the line ``dec + n · per_worker`` floored at 0. Scalars or
    NumPy arrays, broadcast (per tensor, per worker count)."""
    n = np.asarray(n)
    return np.where(n == 1, one, np.maximum(dec + n * per_worker, 0.0))


class TensorCodec(NamedTuple):
    """Seconds for one tensor: encode, decode's fixed part and per gathered payload (n >= 2),
    and the decode of a worker's own payload alone (n = 1: ``CodecCost.decode_one``)."""

    enc: float
    dec: float
    dec_per_worker: float
    dec_one: float

    def decode(self, n: int) -> float:
        return float(decode_seconds(self.dec, self.dec_per_worker, self.dec_one, n))


_TENSORS: dict = {}


def reference_ops():
    """The reference binding traced programs take their shapes from (JAX)."""
    from backends.jax.ops import OPS
    return OPS


def codec_cost(comp, shape, cluster, dtype="float32") -> TensorCodec:
    """Encode/decode seconds of ``comp`` on one tensor on ``cluster``'s device."""
    return tensor_codec(comp, tuple(int(s) for s in shape), np.dtype(dtype).name, rates(cluster))


def tensor_codec(comp, shape: tuple, dtype: str, r: Rates) -> TensorCodec:
    key = (comp.spec, shape, dtype, r)
    found = _TENSORS.get(key)
    if found is None:
        cc = _program_cost(comp, shape, dtype, reference_ops())
        share = cc.decode_share(r.cache)
        found = _TENSORS[key] = TensorCodec(seconds(cc.encode, r) + r.call, seconds(cc.decode, r, share),
                                            seconds(cc.decode_per_worker, r, share),
                                            seconds(cc.decode_one, r, share))
    return found


def clear_caches() -> None:
    """Forget priced tensors and resolved rates (the traces stay: ``compressors.cost.clear_cache``)."""
    _TENSORS.clear()
    _RATES.clear()
