"""Compressor state by name: stable, readable paths for the arrays of a state pytree.

Every stateful compressor keeps a ``typing.NamedTuple`` per tensor
(``EFState(inner, residual)``, ``PowerSGDState(q)``, ...), stateless ones
``()``, and the whole-tree state is a pytree of those. :func:`named_leaves`
names each array by its path: dict keys, sequence indices and NamedTuple
field names joined with ``/`` (``w1/residual``, ``0/inner/q``); the names do
not depend on the order in which a pytree flattens, so a mapping of them
(e.g. a checkpoint) is rebuilt into a state with :func:`load_named` from a
fresh template, with a one-line ``ValueError`` naming the first path that
does not fit.

Pure: only ``jax.tree_util`` (pytree flattening, no JAX arrays needed) and
NumPy.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

State = Any
SEP = "/"


def _key_name(key: Any) -> str:
    import jax.tree_util as jtu

    if isinstance(key, jtu.DictKey):
        return str(key.key)
    if isinstance(key, jtu.SequenceKey):
        return str(key.idx)
    if isinstance(key, jtu.GetAttrKey):
        return str(key.name)
    if isinstance(key, jtu.FlattenedIndexKey):
        return str(key.key)
    return str(key)


def path_name(path: tuple) -> str:
    """The ``/``-joined name of a ``tree_flatten_with_path`` key path ('' for the root)."""
    return SEP.join(_key_name(k) for k in path)


def _flatten_named(state: State) -> tuple[list[tuple[str, Any]], Any]:
    import jax.tree_util as jtu

    pairs, treedef = jtu.tree_flatten_with_path(state)
    named = [(path_name(path), leaf) for path, leaf in pairs]
    seen: set[str] = set()
    for name, _ in named:
        if name in seen:
            raise ValueError(f"state path {name!r} names two leaves (a key contains {SEP!r}?)")
        seen.add(name)
    return named, treedef


def named_leaves(state: State) -> list[tuple[str, Any]]:
    """[(path name, array)] for every leaf of ``state``, in flattening order:
    ``{"w1": EFState((), e)}`` gives ``[("w1/residual", e)]``."""
    return _flatten_named(state)[0]


def _shape(a: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in (a.shape if hasattr(a, "shape") else np.shape(a)))


def _dtype(a: Any) -> np.dtype:
    return np.dtype(a.dtype if hasattr(a, "dtype") else np.asarray(a).dtype)


def load_named(template_state: State, named: Mapping[str, Any]) -> State:
    """A state of ``template_state``'s structure with the arrays of ``named``
    (path name -> array, as :func:`named_leaves` names them), each checked
    for presence, shape and dtype against the template's leaf; the arrays
    are placed as given (convert them afterwards if needed).

    Raises ValueError (one line naming the path) for a missing leaf, an
    unexpected name, or a shape or dtype that differs from the template.
    """
    import jax.tree_util as jtu

    pairs, treedef = _flatten_named(template_state)
    leaves = []
    for name, ref in pairs:
        if name not in named:
            raise ValueError(f"state leaf {name!r} is missing")
        a = named[name]
        got, want = _shape(a), _shape(ref)
        if got != want:
            raise ValueError(f"state leaf {name!r}: shape {got} vs {want} expected")
        got_t, want_t = _dtype(a), _dtype(ref)
        if got_t != want_t:
            raise ValueError(f"state leaf {name!r}: dtype {got_t} vs {want_t} expected")
        leaves.append(a)
    if len(named) != len(pairs):
        known = {name for name, _ in pairs}
        extra = sorted(k for k in named if k not in known)
        raise ValueError(f"state leaf {extra[0]!r} is unexpected"
                         + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""))
    return jtu.tree_unflatten(treedef, leaves)
