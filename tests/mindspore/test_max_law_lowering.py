"""The MAX law and integer SUM payloads in the distributed MindSpore lowering
(graph inspection; the msrun run itself is in test_msrun)."""
from __future__ import annotations

import numpy as np
import pytest

import compressors
from backends.mindspore.emit import Emitter, emit
from backends.mindspore.exchange import trace_exchange
from backends.mindspore.reducer import check_compatible
from backends.mindspore.rules_comm import int_carrier


@pytest.mark.parametrize("dtype,n,carrier", [(np.int8, 16, "float16"), (np.int8, 17, "float32"),
                                             (np.int16, 512, "float32"), (np.int16, 513, None),
                                             (np.int32, 2, None), (np.uint8, 2, None)])
def test_integer_sums_ride_an_exact_float_allreduce(dtype, n, carrier):
    assert int_carrier(dtype, n) == carrier


def _lines(spec, n):
    comp = compressors.parse(spec)
    avals = [((300,), np.dtype(np.float32)), ((7, 5), np.dtype(np.float32))]
    t = trace_exchange(comp, avals, n=n, ranks=[0], seed=0, comm="collective", who=spec)
    em = Emitter(spec)
    em.lines = [f"{em.name(v)} = grads[{i}]" for i, v in enumerate(t.grads[0])]
    em.lines += [f"{em.name(v)} = s{j}" for j, v in enumerate(t.state_in[0])] + [f"{em.name(t.step)} = step"]
    emit(em, t.prog, list(t.means[0]) + list(t.state_out[0]))
    return t, em.lines


def test_sumquant_graph_has_one_max_gather_and_a_float16_allreduce():
    t, lines = _lines("sumquant(bits=4, workers=16)", 4)
    assert [e.op for e in t.prog.eqns if e.op.startswith("comm")] == ["comm_max", "comm_sum"]
    reduce = [ln for ln in lines if "allreduce" in ln]
    gather = [ln for ln in lines if "allgather" in ln]
    assert len(reduce) == 1 and "ms.float16" in reduce[0] and "ms.int8" in reduce[0]
    assert len(gather) == 1                       # the scales: one AllGather, then a rank-order max
    assert sum("ops.maximum" in ln and "isnan" in ln for ln in lines) >= 3


def test_max_rounds_are_allowed_over_allreduce_only():
    check_compatible("sumquant()", [((64,), np.float32)], "allreduce")
    with pytest.raises(ValueError, match="gather-only"):
        check_compatible("int8()", [((64,), np.float32)], "allreduce")
