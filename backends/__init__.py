"""Bindings of the compressor ops namespace (``compressors.ops.Ops``).

``get("jax")`` (default), ``get("numpy")`` and ``get("mindspore")`` return an
ops object; compressors run on whichever they are given.

Importing the package sets glibc's allocator to keep large freed blocks mapped
for reuse (:func:`backends.memory.keep_freed_memory`; ``KFSIM_KEEP_FREED_MEMORY=0``
turns that off), before any binding starts its threads, and points Numba's
on-disk cache at a directory named by the kernels' sources
(:func:`backends.kernel_cache.use_keyed_cache`), before any kernel is defined.
"""
from __future__ import annotations

import importlib

from compressors.ops import Ops
from backends.kernel_cache import use_keyed_cache
from backends.memory import keep_freed_memory

keep_freed_memory()
use_keyed_cache()

_MODULES = {"jax": "backends.jax.ops", "numpy": "backends.numpy.ops", "mindspore": "backends.mindspore.ops"}
BACKENDS = tuple(_MODULES)


def get(name: str = "jax") -> Ops:
    """The ops namespace of a backend by name."""
    if name not in _MODULES:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    return importlib.import_module(_MODULES[name]).OPS
