"""Fused ops in the CPU graph are the NumPy backend's kernels (``backends.mindspore.rules_fused``);
lowered for another device they are their compositions. Both must give the same bits.
Also the StridedSlice forms the getitem rule avoids, and the dead key draws rng "fast" drops."""
from __future__ import annotations

import numpy as np
import pytest

from backends.mindspore.lower import LoopbackExchange
from backends.mindspore.trace import Program, TracingOps

SPECS = ["int8", "quantize(bits=3, bucket=0)", "qsgd(levels=4)", "terngrad()", "signsgd()", "onebit()",
         "natural()", "ef(topk(ratio=0.05))", "countsketch()"]


def _grads(seed, huge=3e38):
    rng = np.random.default_rng(seed)
    big = rng.standard_normal((70, 90)).astype(np.float32)
    big[3, :7] = 0.0                                   # ties at zero, a constant stretch
    big[5, 1] = huge                                  # near the float32 maximum
    # the smallest normal magnitudes (subnormals are outside the bit contract: docs/ops.md)
    tiny = (np.sign(rng.standard_normal(9)) * (1 + np.abs(rng.standard_normal(9))) * 2e-38).astype(np.float32)
    return [big, tiny]


@pytest.mark.parametrize("spec", SPECS)
def test_host_kernels_on_cpu_equal_the_compositions_bit_for_bit(spec):
    """Two workers, two steps: the CPU graph (host kernels) and the graph lowered for GPU (the
    compositions, native ops only; it runs here on CPU) give the same mean and state bits."""
    _compare(spec, 3e38)


def test_qsgd_near_the_float32_maximum_on_the_cpu_graph():
    """A bucket holding 3e38: bucket_norm's scale 2**-128 is subnormal, which MindSpore's kernel
    threads flush; the kernel scales in two normal factors (it decoded 0 where JAX gives inf)."""
    _compare("qsgd(levels=4)", 3e38)


def _compare(spec, huge):
    avals = [((70, 90), np.float32), ((9,), np.float32)]
    cpu = LoopbackExchange(spec, avals, n=2)
    gpu = LoopbackExchange(spec, avals, n=2, device="GPU")
    src_cpu, src_gpu = open(cpu._step.source_path).read(), open(gpu._step.source_path).read()
    assert "self.fused" in src_cpu and "self.fused" not in src_gpu
    grads = [_grads(1, huge), _grads(2, huge)]
    sc, sg = cpu.init(grads), gpu.init(grads)
    for step in range(2):
        mc, sc = cpu(grads, sc, step)
        mg, sg = gpu(grads, sg, step)
        for a, b in zip(mc + [x for s in sc for x in s], mg + [x for s in sg for x in s]):
            assert a.dtype == b.dtype and a.shape == b.shape
            _same(a, b, (spec, step))


def _same(a, b, what):
    """Bit for bit, except near the subnormal range: a quantizer's decode ``lo + code * step`` of
    the tiny tensor can cancel to a subnormal, which MindSpore flushes and NumPy keeps (outside
    the bit contract), and the mean of two workers carries that on. Entries of magnitude at least
    NEAR_TINY (in either result) are compared bit for bit, smaller ones to within the smallest
    normal; the big tensor's entries (around 1) are all compared bit for bit."""
    if a.dtype.kind != "f":
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), what
        return
    tiny = np.finfo(a.dtype).tiny
    near = (np.abs(a) < NEAR_TINY * tiny) & (np.abs(b) < NEAR_TINY * tiny)
    assert np.array_equal(_ftz(a[~near]).view(np.uint8), _ftz(b[~near]).view(np.uint8)), what
    assert np.all(np.abs(a[near].astype(np.float64) - b[near]) < tiny), what


NEAR_TINY = 64


def _ftz(a):
    """Subnormal results flushed to a zero of their sign: MindSpore's CPU kernels (and XLA) flush
    them, the NumPy kernels keep them; both are outside the bit contract (docs/ops.md)."""
    if a.dtype.kind != "f":
        return a
    return np.where(np.abs(a) < np.finfo(a.dtype).tiny, np.copysign(np.zeros_like(a), a), a)


def test_getitem_lowers_int_indices_and_whole_slices_without_strided_slice_shrinks():
    """x[0] becomes a one-entry slice and a reshape; a slice of a whole axis disappears; negative
    ints and negative steps keep their meaning."""
    from backends.mindspore.emit import program_cell
    from backends.mindspore.lower import to_ms, to_np
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    prog = Program("probe")
    v = prog.input(x.shape, x.dtype)
    picks = [(0,), (-1,), (slice(None), -2), (1, slice(0, 3), 3), (slice(0, 2), slice(None), slice(None, None, -1)),
             (slice(0, 2),), (0, slice(3, 0, -1)), (slice(1, 1),)]
    outs = [v[p] for p in picks]
    cell = program_cell(prog, outs, "getitem probe")
    src = open(cell.source_path).read()
    got = cell(to_ms(x))
    for p, g in zip(picks, got):
        want = x[p]
        assert to_np(g).shape == want.shape and to_np(g).tolist() == want.tolist(), p
    body = src.split("def construct", 1)[1]
    assert "v1[0]" not in body and "v1[-1]" not in body and "v1[0:2]" not in body, body


def test_fast_rng_emits_no_dead_key_derivation():
    """rng "fast" in a native graph draws from MindSpore's generators: the key derivation nothing
    reads is not in the graph (MindSpore would drop it, warning "Some side effect nodes were
    eliminated"). On CPU "fast" is the exact host kernels (faster there): the same graph."""
    avals = [((500,), np.float32)]
    exact = LoopbackExchange("randomk(ratio=0.1)", avals, n=2, rng="exact", device="GPU")
    fast = LoopbackExchange("randomk(ratio=0.1)", avals, n=2, rng="fast", device="GPU")
    exact_src, fast_src = (open(x._step.source_path).read() for x in (exact, fast))
    assert "= self.uint" in fast_src or "(self.uint" in fast_src
    assert "self.uint" not in exact_src  # MindSpore's UniformInt
    assert exact_src.count("ops.bitwise_xor(") > fast_src.count("ops.bitwise_xor(")  # threefry's rounds
    on_cpu = [LoopbackExchange("randomk(ratio=0.1)", avals, n=2, rng=r) for r in ("exact", "fast")]
    assert on_cpu[0]._step.source_path == on_cpu[1]._step.source_path
    g = [[np.linspace(-1, 1, 500, dtype=np.float32)]] * 2
    mean, _ = fast(g, fast.init(g), 0)
    assert np.count_nonzero(mean[0]) > 0


def test_a_transposed_left_operand_is_read_in_place():
    """M^T P lowers to one MatMul(transpose_a) of M (its transpose is dead code) and agrees
    with NumPy to float32 rounding."""
    from backends.mindspore.emit import program_cell
    from backends.mindspore.lower import to_ms, to_np
    rng = np.random.default_rng(0)
    m, p = rng.standard_normal((30, 20)).astype(np.float32), rng.standard_normal((30, 4)).astype(np.float32)
    prog = Program("probe")
    vm, vp = prog.input(m.shape, m.dtype), prog.input(p.shape, p.dtype)
    ops = TracingOps(prog)
    out = ops.matmul(ops.transpose(vm), vp)
    cell = program_cell(prog, [out], "matmul probe")
    assert "self.mm" in open(cell.source_path).read()
    got = to_np(cell(to_ms(m), to_ms(p))[0])
    np.testing.assert_allclose(got, m.T.astype(np.float64) @ p, rtol=1e-5, atol=1e-5)
