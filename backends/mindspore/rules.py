"""The lowering table: one rule per traced op, emitting MindSpore source lines.

``RULES[op](em, eqn)`` writes Python lines (MindSpore functional ops and
primitives) that compute ``eqn.outs`` from ``eqn.args``; ``em`` (an
:class:`backends.mindspore.lower.Emitter`) names values, constants and
primitive instances. The rules live in one module per op family
(``rules_arith``, ``rules_shape``, ``rules_elementwise``, ``rules_casts``,
``rules_reduce``, ``rules_select``, ``rules_random``, ``rules_bits``,
``rules_comm``; dtype predicates in ``rules_dtypes``). Every rule reproduces
``compressors/ops.py`` exactly and works around MindSpore 2.10's CPU traps:

* float -> int casts wrap in MindSpore; ``astype`` truncates, maps NaN to 0
  and saturates with ``where`` before casting through int64;
* ``ops.topk`` is not stable: top_k sorts the int64 composite key
  ``orderkey(x) * 2**32 + (2**32 - 1 - i)``, unique, so ties go to the lowest i
  and NaN (orderkey = INT32_MAX) ranks above +inf;
* ``tensor_scatter_*`` raise out of range: indices outside ``[0, size)`` go to
  a dump slot that is sliced off;
* no uint32 ``Sub`` and a failing uint32 remainder: uint32 subtraction,
  negation and ``%`` go through int64;
* ``Maximum``/``sign`` drop NaN on CPU: NaN is put back with ``where``;
* sum uses the halving order ``s[:m/2] + s[m/2:]`` of the reference;
* AllGather takes no uint32/int8/bool/bf16: such payloads travel as int32
  (float32 for bf16) and are cast back exactly.
"""
from __future__ import annotations

from backends.mindspore import rules_arith as arith
from backends.mindspore import rules_bits as bits
from backends.mindspore import rules_casts as casts
from backends.mindspore import rules_comm as comm
from backends.mindspore import rules_elementwise as elem
from backends.mindspore import rules_fused as fused
from backends.mindspore import rules_random as rand
from backends.mindspore import rules_reduce as reduce
from backends.mindspore import rules_select as select
from backends.mindspore import rules_shape as shape
from backends.mindspore import rules_slice
from backends.mindspore.trace import LOWERED_FUSED

RULES = {
    **{op: arith.binary(op) for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lt", "le", "gt",
                                       "ge", "eq", "ne", "and", "or", "xor", "lshift", "rshift")},
    "neg": arith.unary("neg"), "invert": arith.unary("invert"), "getitem": rules_slice.getitem,
    "asarray": shape.asarray, "zeros": shape.zeros, "full": shape.full, "arange": shape.arange,
    "reshape": shape.reshape, "concatenate": shape.concatenate, "stack": shape.stack, "pad": shape.pad,
    "transpose": shape.transpose,
    "abs": elem.simple("ops.abs"), "sign": elem.sign, "sqrt": elem.simple("ops.sqrt"), "floor": elem.floor,
    "maximum": elem.extremum("max"), "minimum": elem.extremum("min"), "where": elem.where,
    "isfinite": elem.isfinite, "frexp": elem.frexp, "ldexp": elem.ldexp,
    "astype": casts.astype, "bitcast": casts.bitcast,
    "sum": reduce.sum_, "max": reduce.max_, "matmul": reduce.matmul,
    "top_k": select.top_k, "gather": select.gather, "scatter_add": select.scatter_add, "nonzero": select.nonzero,
    "fold_in": rand.fold_in, "random_bits": rand.random_bits, "random_words": rand.random_words,
    "uniform": rand.uniform,
    "pack_bits": bits.pack_bits, "unpack_bits": bits.unpack_bits,
    "comm_sum": comm.comm_sum, "comm_gather": comm.comm_gather, "comm_max": comm.comm_max,
    **{op: fused.fused() for op in LOWERED_FUSED}, "top_k_abs": fused.fused(select.top_k_abs),
}
