"""Model profiles from a real model definition: a JAX pytree of parameters or a MindSpore Cell.

The simulator needs each gradient tensor's shape (and, for per-tensor plans, its path name) in
forward order, plus the training FLOPs per sample (not derivable from the parameters: give it).

* :func:`from_pytree` — any JAX pytree (a Flax/Haiku params dict, a list of arrays, a
  ``jax.ShapeDtypeStruct`` tree from ``jax.eval_shape``): leaves in ``jax.tree_util``'s
  flatten order (dict keys sorted), named by ``jax.tree_util.keystr`` of their path.
* :func:`from_cell` — a ``mindspore.nn.Cell``: its trainable parameters (``trainable_params()``,
  definition order) named by the parameters' own names; ``trainable_only=False`` takes every
  parameter (``get_parameters()``, e.g. BatchNorm moving statistics, which DDP does not reduce).

The flatten order is taken as forward order; backward then visits the tensors in reverse (the
DDP bucket layout, ``kfsim.sim.inputs.model_arrays``). Both import their framework lazily.
"""
from __future__ import annotations

from kfsim.catalog.models import ModelProfile


def _profile(name, shapes, names, flops_per_sample, batch, mfu, source) -> ModelProfile:
    if not shapes:
        raise ValueError(f"model {name!r}: the definition has no parameter tensors")
    if not (flops_per_sample > 0):
        raise ValueError(f"model {name!r}: flops_per_sample must be > 0, got {flops_per_sample}")
    if int(batch) < 1:
        raise ValueError(f"model {name!r}: batch must be >= 1, got {batch}")
    if len(set(names)) != len(names):
        raise ValueError(f"model {name!r}: duplicate parameter names")
    return ModelProfile(name, [tuple(int(d) for d in s) for s in shapes], float(flops_per_sample),
                        batch=int(batch), mfu=mfu, source=source, tensor_names=tuple(names))


def from_pytree(name: str, params, flops_per_sample: float, *, batch: int = 32, mfu: float | None = None,
                source: str = "JAX pytree") -> ModelProfile:
    """A :class:`ModelProfile` whose tensors are the leaves of the pytree ``params``."""
    import jax
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    shapes = [tuple(getattr(x, "shape", ())) for _, x in leaves]
    names = [jax.tree_util.keystr(p) for p, _ in leaves]
    return _profile(name, shapes, names, flops_per_sample, batch, mfu, source)


def from_cell(name: str, cell, flops_per_sample: float, *, batch: int = 32, mfu: float | None = None,
              trainable_only: bool = True, source: str = "MindSpore Cell") -> ModelProfile:
    """A :class:`ModelProfile` whose tensors are the parameters of the MindSpore Cell ``cell``."""
    params = list(cell.trainable_params() if trainable_only else cell.get_parameters())
    return _profile(name, [tuple(p.shape) for p in params], [p.name for p in params], flops_per_sample,
                    batch, mfu, source)
