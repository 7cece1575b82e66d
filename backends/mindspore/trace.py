"""Trace a compressor into a program: the first half of the MindSpore lowering.

The tracer itself is backend-neutral and lives in :mod:`compressors.program`
(:class:`Var`, :class:`Eqn`, :class:`Program`, :class:`TracingOps`,
:class:`LoweringError`, static indexing); the names the lowering uses are
re-exported here, so ``from backends.mindspore.trace import X`` keeps working. What is specific to
the MindSpore lowering:

* the reference binding is JAX (``backends.jax``): :class:`Program` binds it
  by default, and :func:`jax_fn` is the reference function of one equation
  (``lower.reference_eval`` evaluates programs with it);
* fused ops are traced *through* their primitive composition (what gets
  compiled), except those in :data:`LOWERED_FUSED`, which have a rule of
  their own (``top_k_abs``: one top-k and a k-entry sort, where the
  composition makes four more passes over the whole tensor); static key
  arithmetic is folded with the lowering's own threefry kernels
  (``backends.mindspore.runtime``), so the constants are exactly those the
  generated code embeds.
"""
from __future__ import annotations

import numpy as np

from compressors.program import BINARY, COMM_OPS, UNARY, Eqn, LoweringError, Var, reference_fn  # noqa: F401
from compressors.program import Program as _Program
from compressors.program import TracingOps as _TracingOps
from compressors.fused import FUSED_NAMES
from compressors.ops import OP_NAMES

# fused ops recorded whole (the table has a rule for each, ``rules_fused``): all but the
# sum and the two products, which are one MindSpore op or a matmul and a subtraction anyway
LOWERED_FUSED = frozenset(FUSED_NAMES) - {"add", "matmul_nt", "matmul_tn", "sub_matmul_nt"}


def _jax_reference():
    from backends.jax.ops import OPS
    return OPS


def jax_fn(op, attrs):
    """The reference (JAX) function whose eval_shape gives the output avals."""
    return reference_fn(op, attrs, _jax_reference())


class Program(_Program):
    """A :class:`compressors.program.Program` whose reference binding is JAX."""

    def __init__(self, who: str, reference=None):
        super().__init__(who, _jax_reference() if reference is None else reference)


class TracingOps(_TracingOps):
    """The lowering's tracing ``Ops``: fused ops traced through, keys folded
    with the MindSpore runtime's threefry."""

    name = "mindspore-trace"

    def __init__(self, prog: _Program, record: frozenset = LOWERED_FUSED):
        super().__init__(prog, record_fused=record)

    def _unknown(self, op):
        return (f"{self._prog.who}: op {op!r} is not in the ops namespace "
                f"(known: {', '.join(OP_NAMES)}); the MindSpore lowering has no rule for it")

    def key(self, seed):
        from backends.mindspore.runtime import np_key
        if isinstance(seed, Var):
            raise LoweringError(f"{self._prog.who}: ops.key needs a static int seed")
        return self._const_key(np_key(seed))

    def fold_in(self, key, data):
        from backends.mindspore.runtime import np_fold_in
        origin = getattr(key, "origin", None)
        if isinstance(key, Var) and key.const is not None and not isinstance(data, Var):
            return self._const_key(np_fold_in(key.const, data), origin)
        if not isinstance(data, Var):
            data = self.asarray(np.uint32(np.int64(data) & 0xFFFFFFFF))
        return self._prog.bind("fold_in", (key, data), {}, origin=origin)


__all__ = ["BINARY", "UNARY", "COMM_OPS", "Eqn", "LOWERED_FUSED", "LoweringError", "Program", "TracingOps", "Var",
           "jax_fn"]
