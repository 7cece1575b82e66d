"""Plumbing shared by combinators: wrap an inner compressor leaf by leaf.

A combinator is a function ``wrap(inner_leaf) -> Leaf``; :func:`wrapping`
turns it into a Compressor that follows the inner one's schedule (``at``,
``phase``) so warm-up and sparsity schedules keep working under it.
"""
from __future__ import annotations

from typing import Callable

from compressors.core import Compressor, Leaf


def wrapping(spec: str, inner: Compressor, wrap: Callable[[Leaf, tuple, object], Leaf],
             rebuild: Callable[[Compressor], Compressor], **props) -> Compressor:
    """Compressor whose every leaf is ``wrap(inner.for_leaf(shape, dtype), shape, dtype)``.

    ``rebuild(inner_at_step)`` re-applies the combinator to the inner
    compressor in force at a step.
    """
    if not isinstance(inner, Compressor):
        raise ValueError(f"{spec.split('(')[0]}: expects a compressor, got {inner!r}")
    if inner.paths:
        raise ValueError(f"{spec.split('(')[0]}: wraps a per-tensor plan; wrap the plan's entries instead")

    def for_leaf(shape, dtype):
        return wrap(inner.for_leaf(shape, dtype), shape, dtype)

    at = None if inner.at is None else (lambda step: rebuild(inner.step(step)))
    return Compressor(spec, for_leaf, at=at, phase=inner.phase, **props)
