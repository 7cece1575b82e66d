"""Static slicing lowers to MindSpore's fast kernels (backends.mindspore.rules_slice): a
contiguous block is one Slice, an int index a one-entry slice and a reshape, a whole axis
nothing, other slices StridedSlice; every form agrees with NumPy, over every index form."""
from __future__ import annotations

import numpy as np
import pytest

from backends.mindspore.rules_slice import index_source, row, slice_source
from backends.mindspore.trace import Program

pytest.importorskip("mindspore")

X = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
PICKS = [
    ((0,), "slice"), ((-1,), "slice"), ((slice(1, 2),), "slice"), ((0, 1), "slice"),
    ((1, 2, slice(1, 3)), "slice"), ((0, slice(1, 3)), "slice"), ((slice(0, 2),), "whole"),
    ((slice(None), -2), "strided"), ((slice(None), slice(0, 2)), "strided"),
    ((1, slice(0, 3), 3), "strided"), ((slice(0, 2), slice(None), slice(None, None, -1)), "strided"),
    ((0, slice(3, 0, -1)), "strided"), ((slice(0, 2, 2),), "slice"), ((1, slice(0, 3, 2)), "strided"),
    ((slice(-5, 9),), "whole"),
]


@pytest.mark.parametrize("index,form", PICKS, ids=[str(p) for p, _ in PICKS])
def test_slice_form(index, form):
    """The source names the op the block needs (checked on text: a wrong form is a slow one)."""
    src = index_source("x", X.shape, index, X[index].shape)
    if form == "slice":
        assert "ops.slice(x" in src and "x[" not in src, src
    elif form == "whole":
        assert src == "x", src
    else:
        assert "x[" in src and "ops.slice" not in src, src


def test_every_form_agrees_with_numpy():
    from backends.mindspore.emit import program_cell
    from backends.mindspore.lower import to_ms, to_np
    prog = Program("probe")
    v = prog.input(X.shape, X.dtype)
    picks = [p for p, _ in PICKS] + [(slice(1, 1),), (slice(3, 9),)]
    outs = [v[p] for p in picks]
    cell = program_cell(prog, outs, "slicing probe")
    for p, g in zip(picks, cell(to_ms(X))):
        want = X[p]
        assert to_np(g).shape == want.shape and to_np(g).tolist() == want.tolist(), p


def test_rows_of_a_gathered_array():
    """row(): what a GATHER/SUM-by-gather round splits its (n, ...) result with; scalars too."""
    assert row("g", (2, 5), 1) == "ops.reshape(ops.slice(g, (1, 0), (1, 5)), (5,))"
    assert row("g", (3,), 2) == "ops.reshape(ops.slice(g, (2,), (1,)), ())"
    assert row("g", (1, 7), 0) == "ops.reshape(g, (7,))"
    assert slice_source("b", (9,), [(0, 8, 1)]) == "ops.slice(b, (0,), (8,))"
    assert slice_source("b", (9,), [(0, 0, 1)]) == "b[0:0]"


def test_gathered_payloads_split_without_strided_slice():
    """Two simulated workers' int8 payloads: the exchange graph reads each worker's row of the
    stacked payloads as that worker's payload itself, with no slice at all (StridedSlice took
    370 of 660 ms of this exchange on 10.7M parameters), and the unread stacks are gone."""
    from backends.mindspore.lower import LoopbackExchange
    avals = [((64, 33), np.float32), ((7,), np.float32), ((), np.float32)]
    lx = LoopbackExchange("quantize(bits=8)", avals, n=2)
    body = open(lx._step.source_path).read().split("def construct", 1)[1]
    assert "ops.slice(" not in body and "ops.stack(" not in body, body
    assert "[0:1]" not in body and "[1:2]" not in body, body
    rng = np.random.default_rng(0)
    g = [[rng.standard_normal(s).astype(np.float32) for s, _ in avals] for _ in range(2)]
    mean, _ = lx(g, lx.init(g), 0)
    for m, a, b in zip(mean, *g):
        assert np.max(np.abs(m - (a + b) / 2)) < 0.05 * max(np.max(np.abs(a)), np.max(np.abs(b)))
