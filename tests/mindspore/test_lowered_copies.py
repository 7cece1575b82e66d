"""The lowering leaves out copies MindSpore's CPU kernels would make (issue 14 item 4):

* reshapes around a host kernel are folded into it (its NumPy views reshape for free,
  where a CPU Reshape of a graph input copies: 8 ms for 2900x2900 float32);
* scatter_add of float32/float64 on CPU is the NumPy backend's kernel, one pass, where
  ``tensor_scatter_add`` copies a zero buffer and slicing its dump slot off copies again;
  on another device it stays native;
* a stack of one array is a reshape (Stack copies).

Each form is checked on the emitted source (a copy back is a slowdown no other test sees)
and on its values, against NumPy, including 0-d, empty and out-of-range cases."""
from __future__ import annotations

import numpy as np
import pytest

from backends.mindspore.trace import Program

pytest.importorskip("mindspore")


def _body(cell) -> str:
    return open(cell.source_path).read().split("def construct", 1)[1]


def _cell(build, *inputs, device="CPU"):
    from backends.mindspore.emit import program_cell
    prog = Program("copies probe")
    vs = [prog.input(np.shape(x), np.asarray(x).dtype) for x in inputs]
    return program_cell(prog, build(prog, *vs), "copies probe", device=device)


def _run(cell, *inputs):
    from backends.mindspore.lower import to_ms, to_np
    return [to_np(o) for o in cell(*[to_ms(x) for x in inputs])]


def _ops():
    from backends.mindspore.trace import TracingOps
    return lambda prog: TracingOps(prog)


def test_reshapes_around_a_host_kernel_are_folded_into_it():
    """bucket_min_max of a 2-D gradient takes the gradient itself; dequantize's output is
    written in the gradient's shape: no ops.reshape of a full tensor is left."""
    import backends
    import compressors as C
    from backends.mindspore.lower import LoopbackExchange
    avals = [((40, 30), np.float32), ((7,), np.float32), ((), np.float32)]
    lx = LoopbackExchange("quantize(bits=8)", avals, n=1)
    body = _body(lx._step)
    assert "fused" in body, body  # host kernels on CPU
    assert "(1200,))" not in body and "(40, 30))" not in body, body  # neither flatten nor unflatten copies
    rng = np.random.default_rng(1)
    g = [[rng.standard_normal(s).astype(np.float32) for s, _ in avals]]
    mean, _ = lx(g, lx.init(g), 3)
    ops = backends.get("numpy")
    comp = C.parse("quantize(bits=8)")
    grads = {str(i): ops.asarray(x) for i, x in enumerate(g[0])}
    want, _ = C.roundtrip(ops, comp, grads, comp.init(ops, grads), C.make_keys(ops, 0, 3))
    for i, m in enumerate(mean):
        assert m.shape == g[0][i].shape
        np.testing.assert_array_equal(m, np.asarray(want[str(i)]))


CASES = [
    ("duplicates in order", 6, [0, 5, 0, 2, 0], [1.0, 2.0, 1e-8, 3.0, -1.0]),
    ("out of range drop", 4, [-1, 4, 9, 3, 1], [5.0, 6.0, 7.0, 8.0, 9.0]),
    ("1e38 magnitudes", 3, [1, 1, 2], [3e38, -3e38, 1.5e-38]),  # (subnormals: MindSpore threads flush them)
    ("one slot", 1, [0, 0, 0], [0.1, 0.2, 0.3]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,size,idx,vals", CASES, ids=[c[0] for c in CASES])
def test_scatter_add_host_kernel_matches_numpy(name, size, idx, vals, dtype):
    from backends.numpy.ops import OPS
    idx, vals = np.asarray(idx, np.int32), np.asarray(vals, dtype)

    def build(prog, i, v):
        return [_ops()(prog).scatter_add(size, i, v)]
    cell = _cell(build, idx, vals)
    assert "self.scat" in _body(cell) and "tensor_scatter_add" not in _body(cell)
    (got,) = _run(cell, idx, vals)
    want = OPS.scatter_add(size, idx, vals)
    assert got.dtype == want.dtype and got.shape == (size,)
    np.testing.assert_array_equal(got, want)


def test_scatter_add_output_written_in_its_readers_shape():
    """A decode scatters into the flat gradient and reshapes it: the kernel writes (3, 4)."""
    idx, vals = np.asarray([0, 11, 5], np.int32), np.asarray([1.0, 2.0, 3.0], np.float32)

    def build(prog, i, v):
        o = _ops()(prog)
        return [o.reshape(o.scatter_add(12, i, v), (3, 4))]
    cell = _cell(build, idx, vals)
    assert "ops.reshape" not in _body(cell), _body(cell)
    (got,) = _run(cell, idx, vals)
    want = np.zeros(12, np.float32)
    want[[0, 11, 5]] = [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(got, want.reshape(3, 4))


def test_scatter_add_stays_native_off_cpu():
    """For GPU/Ascend (graph inspected on CPU) no host kernel: the dump-slot scatter."""
    from backends.mindspore.device import host_kernels
    idx, vals = np.asarray([0, 2], np.int32), np.asarray([1.0, 2.0], np.float32)

    def build(prog, i, v):
        return [_ops()(prog).scatter_add(4, i, v)]
    for device in ("GPU", "Ascend"):
        body = _body(_cell(build, idx, vals, device=device))
        assert "tensor_scatter_add" in body and "self.scat" not in body, body
    assert all(op != "scatter_add" for op, _ in host_kernels("ef(topk(ratio=0.1))", [((8, 5), np.float32)], "GPU"))


def test_stack_of_one_is_a_reshape_and_scalars_stay_0d():
    x = np.float32(2.5).reshape(())
    y = np.arange(6, dtype=np.float32).reshape(2, 3)

    def build(prog, a, b):
        o = _ops()(prog)
        return [o.stack([a]), o.stack([b]), a + 1]
    cell = _cell(build, x, y)
    assert "ops.stack" not in _body(cell), _body(cell)
    s0, s1, a1 = _run(cell, x, y)
    assert s0.shape == (1,) and s0.tolist() == [2.5]
    np.testing.assert_array_equal(s1, y[None])
    assert a1.shape == () and float(a1) == 3.5  # to_ms keeps a 0-d input 0-d


@pytest.mark.parametrize("bits,cap", [([1, 0, 1, 1, 0, 1], 3), ([1, 0, 1], 5), ([0, 0, 0, 0], 2),
                                      ([1], 1), ([0, 1, 1, 0, 1, 1, 1, 0], 8)])
def test_nonzero_host_kernel_matches_numpy_and_stays_native_off_cpu(bits, cap):
    """nonzero (threshold's, DGC's selection) on CPU is the NumPy backend's kernel: the first
    ``cap`` positions, padded with the mask's size; for GPU/Ascend the native cumsum+scatter."""
    from backends.numpy.ops import OPS
    mask = np.asarray(bits, bool)

    def build(prog, m):
        return [_ops()(prog).nonzero(m, cap)]
    cell = _cell(build, mask)
    assert "self.nonzero" in _body(cell) and "tensor_scatter_add" not in _body(cell)
    (got,) = _run(cell, mask)
    want = OPS.nonzero(mask, cap)
    assert got.dtype == np.int32 and got.tolist() == want.tolist()
    native = _cell(build, mask, device="GPU")
    assert "tensor_scatter_add" in _body(native) and "self.nonzero" not in _body(native)
    (got,) = _run(native, mask)
    assert got.tolist() == want.tolist()


def test_host_kernel_edges_keep_their_native_answers():
    """The edges the host kernels must not change: a scatter into nothing, a scatter with
    constant indices (native form), an empty mask (every slot the padding 0), a 2-D mask."""
    from backends.numpy.ops import OPS
    vals = np.asarray([1.0, 2.0], np.float32)

    def into_nothing(prog, i, v):
        return [_ops()(prog).scatter_add(0, i, v)]
    (got,) = _run(_cell(into_nothing, np.asarray([0, 1], np.int32), vals), np.asarray([0, 1], np.int32), vals)
    assert got.shape == (0,) and got.dtype == np.float32

    def constant_idx(prog, v):
        return [_ops()(prog).scatter_add(4, np.asarray([1, 3], np.int32), v)]
    (got,) = _run(_cell(constant_idx, vals), vals)
    assert got.tolist() == [0.0, 1.0, 0.0, 2.0]

    for mask, cap in ((np.zeros(0, bool), 2), (np.asarray([[1, 0], [1, 1]], bool), 3)):
        def build(prog, m):
            return [_ops()(prog).nonzero(m, cap)]
        for device in ("CPU", "GPU"):
            (got,) = _run(_cell(build, mask, device=device), mask)
            assert got.tolist() == OPS.nonzero(mask, cap).tolist(), (mask.shape, device)
