"""Scattered accesses in the codec model: which gathers/scatters walk memory forward (indices
from top_k_abs / nonzero / arange, through reshapes, casts, shifts, concatenation and a collective)
and which hit it at random (hashed, sampled, rank-ordered), and what a miss past the cache costs."""
import numpy as np
import pytest

import compressors
from backends.jax.ops import OPS as J
from compressors import cost
from compressors.program import Program, TracingOps
from kfsim import catalog
from kfsim.catalog.schema import DeviceCfg
from kfsim.sim import codec as simcodec

SEED = catalog.seed_cluster()


def scattered(spec, shape):
    c = cost.codec_cost(compressors.parse(spec).step(10**6), shape, np.float32, J)
    return {part: [(op.op, k * op.scattered, op.table_bytes) for op, k in getattr(c, part).entries if op.scattered]
            for part in ("encode", "decode", "decode_per_worker")}


@pytest.mark.parametrize("spec", ["topk(ratio=0.1)", "randomk(ratio=0.2)", "threshold(tau=0.5, capacity=0.3)",
                                  "ef21(topk(ratio=0.2))", "ef(topk(ratio=0.1))"])
def test_indices_in_index_order_are_not_scattered(spec):
    """Their sets come from top_k_abs / nonzero in ascending order, also after the gather round
    (the decode's scatter of the received indices)."""
    assert scattered(spec, (300, 200)) == {"encode": [], "decode": [], "decode_per_worker": []}


def test_countsketch_hashes_are_scattered():
    d, rows, ratio, width = 300 * 200, 3, 0.2, 4.0   # countsketch's defaults: rows 3, width 4
    cols = int(np.ceil(width * np.ceil(ratio * d)))
    s = scattered(f"countsketch(ratio={ratio})", (300, 200))
    assert ("scatter_add", 2.0 * rows * d, 4.0 * rows * cols) in s["encode"]     # read-modify-write
    assert [g for g in s["decode"] if g[0] == "gather" and g[2] == 4.0 * rows * cols] \
        == [("gather", float(rows * d), 4.0 * rows * cols)]   # one per row (identical kernels merged)


def test_dgc_sample_is_scattered():
    s = scattered("dgc(ratio=0.05, sample=0.5)", (300, 200))
    assert any(op == "gather" and n == 0.5 * 300 * 200 for op, n, _ in s["encode"])


def test_lptopk_encode_is_not_scattered():
    """Its index words are (i >> s) + arange: a shift by a scalar and a sum of ascending arrays."""
    assert scattered("lptopk(ratio=0.1)", (300, 200))["encode"] == []


def test_provenance_rules():
    prog = Program("test", J)
    ops = TracingOps(prog, record_fused=True)
    x = prog.input((1000,), np.float32)
    up = ops.top_k_abs(x, 10)                       # ascending
    ranked = ops.top_k(ops.abs(x), 10)[1]           # rank order
    shifted = ops.astype(up, np.int32) + 5          # a shift by a scalar keeps the order
    both = ops.concatenate([up, shifted])           # each part walks forward
    mixed = ops.concatenate([up, ranked])
    summed = up + ranked                            # ascending + unordered
    halved = ops.astype(up, np.uint32) >> ops.asarray(np.uint32(1))     # by a non-negative constant
    negated = up * -1
    wrapped = up % 7
    gathers = [ops.gather(x, i) for i in (up, ranked, shifted, both, mixed, summed, up + up, halved, negated,
                                          wrapped, up - ranked, up[2:8], up[::-1])]
    ordered = cost.ascending_vars(prog.eqns)
    got = [cost.op_cost(e, ordered).scattered for e in prog.eqns if e.op == "gather"]
    assert len(got) == len(gathers)
    assert got == [0.0, 10.0, 0.0, 0.0, 20.0, 10.0, 0.0, 0.0, 10.0, 10.0, 10.0, 0.0, 10.0]


def test_missed_lines_are_priced_past_the_cache():
    op = cost.OpCost("gather", "gather/scatter", 80.0, 40.0, scattered=10.0, table_bytes=4000.0)
    assert op.missed_bytes(4000.0, 64.0) == 0.0 == op.missed_bytes(1e9, 64.0)
    assert op.missed_bytes(1000.0, 64.0) == pytest.approx(10 * 0.75 * 64)
    assert op.missed_bytes(0.0, 32.0) == 10 * 32
    comp = compressors.parse("countsketch(ratio=0.2)")
    shape = (500, 400)   # a 3 x 160000-entry table: 1.9 MB
    big, none = (SEED._replace(device=SEED.device._replace(cache_bytes=cb, line_bytes=64.0),
                               codec=catalog.Codec(gather_scatter=1e9)) for cb in (1e9, 0.0))
    c = cost.codec_cost(comp, shape, np.float32, J)
    lines = sum(k * op.scattered * 64.0 for op, k in c.encode.entries)
    gap = simcodec.codec_cost(comp, shape, none).enc - simcodec.codec_cost(comp, shape, big).enc
    assert lines > 0 and gap == pytest.approx(lines / 1e9)
    assert c.encode.class_bytes(0.0, 64.0)["gather/scatter"] - c.encode.class_bytes()["gather/scatter"] \
        == pytest.approx(lines)


def test_device_cache_from_a_config_and_the_catalog():
    d = DeviceCfg(name="x", peak_tflops=1, mem_bw_gbs=100, cache_mib=8, line_bytes=32).build()
    assert (d.cache_bytes, d.line_bytes) == (8 * 2**20, 32)
    assert catalog.get_device("h100").cache_bytes == 50 * 2**20 and catalog.get_device("h100").line_bytes == 32
    assert catalog.get_device("host-cpu").cache_bytes == 32 * 2**20
