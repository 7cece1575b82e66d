"""The simulator's inputs, normalised once: model, cluster, compressor, DDP layout.

Shared by :mod:`kfsim.sim.predict` and :mod:`kfsim.sim.sweep`, so both price
exactly the same thing: a catalog name or :class:`ModelProfile` becomes a
hashable profile (tuples all the way down, checked), a spec string or
Compressor the compressor in force at a step (memoised per phase, so caches
keyed by it keep hitting), a name or profile path a :class:`Cluster`, and a
model its bucket layout and the backward fraction at which each bucket is ready.
"""
from __future__ import annotations

import functools

import numpy as np

import compressors
from kfsim import catalog
from kfsim.catalog import Cluster, ModelProfile
from kfsim.sim.exchange_cost import assign_buckets


def as_model(model) -> ModelProfile:
    """Catalog name or ModelProfile → a hashable ModelProfile (shapes as tuples)."""
    if isinstance(model, ModelProfile) and _is_normal(model):
        return model
    m = catalog.get_model(model)
    if _is_normal(m):
        return m
    shapes = tuple(tuple(int(d) for d in s) for s in m.tensor_shapes)
    if not shapes:
        raise ValueError(f"model {m.name!r} has no tensors")
    if m.flops_per_sample < 0:
        raise ValueError(f"model {m.name!r}: flops_per_sample must be >= 0")
    tf = None if m.tensor_flops is None else tuple(float(x) for x in m.tensor_flops)
    if tf is not None and len(tf) != len(shapes):
        raise ValueError(f"model {m.name!r}: tensor_flops has {len(tf)} entries for {len(shapes)} tensors")
    names = None if m.tensor_names is None else tuple(str(n) for n in m.tensor_names)
    if names is not None and len(names) != len(shapes):
        raise ValueError(f"model {m.name!r}: tensor_names has {len(names)} entries for {len(shapes)} tensors")
    return m._replace(tensor_shapes=shapes, tensor_flops=tf, tensor_names=names)


EXCHANGES = ("buckets", "flat")   # DDP's gradient buckets, or one flattened buffer (:func:`flattened`)


def exchanged(model, exchange: str = "buckets") -> ModelProfile:
    """``model`` as the framework exchanges it: ``buckets`` (DDP's gradient buckets, as the
    tensors are ready in backward: the model itself) or ``flat`` (:func:`flattened`)."""
    if exchange not in EXCHANGES:
        raise ValueError(f"exchange must be one of {', '.join(EXCHANGES)}, got {exchange!r}")
    return flattened(model) if exchange == "flat" else as_model(model)


def flattened(model) -> ModelProfile:
    """``model`` exchanged as one flat gradient buffer after the backward pass (a framework that
    flattens its parameters into one buffer: DeepSpeed's fp16 optimizer, whose 1-bit Adam
    compresses the flat momentum in one call): the same compute, one tensor of all parameters,
    ready when the backward pass ends (so nothing overlaps it). The name stays the model's, so a
    measured compute time of the model (``Cluster.compute_s``) still applies."""
    m = as_model(model)
    return m._replace(tensor_shapes=((m.params,),), tensor_flops=None, tensor_names=None,
                      source=f"{m.source} (exchanged as one flat buffer)".strip())


def _is_normal(m: ModelProfile) -> bool:
    """Already hashable and checked (tuples all the way down)?"""
    return (isinstance(m.tensor_shapes, tuple) and len(m.tensor_shapes) > 0
            and all(type(s) is tuple for s in m.tensor_shapes)
            and (m.tensor_flops is None or isinstance(m.tensor_flops, tuple))
            and (m.tensor_flops is None or len(m.tensor_flops) == len(m.tensor_shapes))
            and (m.tensor_names is None or (type(m.tensor_names) is tuple
                                            and len(m.tensor_names) == len(m.tensor_shapes)))
            and m.flops_per_sample >= 0)


@functools.lru_cache(maxsize=256)
def _parse(spec: str):
    return compressors.parse(spec)


_PHASES: dict = {}


def as_compressor(compressor, step: int | None = None):
    """Spec string or Compressor → the compressor in force at ``step``.

    The result is memoised per (compressor, phase_of(step)), so a training
    loop that asks every step gets the same object while the phase holds and
    :func:`predict_iteration`'s cache keeps hitting."""
    comp = _parse(compressor) if isinstance(compressor, str) else compressors.parse(compressor)
    if step is None:
        return comp
    key = (comp, comp.phase_of(step))
    found = _PHASES.get(key)
    if found is None:
        if len(_PHASES) > 4096:
            _PHASES.clear()
        found = _PHASES[key] = comp.step(step)
    return found


def as_cluster(cluster) -> Cluster:
    if isinstance(cluster, Cluster):
        return cluster
    if cluster is None or cluster == "seed" or cluster == "seed-3090":
        return catalog.seed_cluster()
    from kfsim.catalog.config import load_cluster
    return load_cluster(cluster)


@functools.lru_cache(maxsize=4096)
def model_arrays(m: ModelProfile, bucket_mb: float):
    """(bucket id per tensor, fraction of the backward pass done when each bucket is ready)."""
    dense = np.array([float(np.prod(s)) * 4 for s in m.tensor_shapes])
    ids = assign_buckets(dense, bucket_mb * 2**20)
    w = np.array(m.weights())
    # backward visits tensors in reverse: fraction done when tensor t's gradient exists
    frac_rev = np.cumsum(w[::-1])
    frac = frac_rev[::-1]
    B = int(ids.max()) + 1
    ready = np.zeros(B)
    np.maximum.at(ready, ids, frac)
    ready = np.minimum(np.maximum.accumulate(ready), 1.0)
    return ids, ready


def with_precision(cl, precision: str | None):
    """``cl`` with the run's precision (None: its own); ValueError naming the known ones."""
    from kfsim.catalog.devices import PRECISIONS
    if precision is None:
        return cl
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r} (known: {', '.join(PRECISIONS)})")
    return cl._replace(precision=precision)
