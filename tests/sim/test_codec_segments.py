"""Bucket segments in the codec model: how many buckets a bucketed kernel walks
(``OpCost.segments``), their price (``[codec] segment_overhead_ns``), its fit and its round trip
through a profile."""
import pytest

import compressors
from backends.jax.ops import OPS as J
from compressors import cost
from kfsim import catalog
from kfsim.catalog.schema import CodecCfg
from kfsim.sim import codec as simcodec
from kfsim.testbed import calibrate as cal

CPU = catalog.make_cluster(device="cpu")


def segments_by_op(spec, shape):
    cc = cost.trace_cost(compressors.parse(spec), shape, "float32", J)
    out = {}
    for counts in (cc.encode, cc.decode_at(2)):
        for c, k in counts.entries:
            out[c.op] = out.get(c.op, 0.0) + k * c.segments
    return out


@pytest.mark.parametrize("spec,shape,want", [
    ("quantize(bits=3, bucket=50)", (10, 100), {"minmax_quantize_pack": 20, "dequantize": 2 * 20}),
    ("quantize(bits=3, bucket=50)", (1001,), {"minmax_quantize_pack": 21, "dequantize": 2 * 21}),  # a last part-bucket
    ("quantize(bits=8, bucket=0)", (10, 100), {"minmax_quantize_pack": 1, "dequantize": 2}),       # the whole tensor
    ("qsgd(levels=4, bucket=64)", (640,), {"bucket_norm": 10, "quantize_pack": 10, "dequantize": 20}),
    ("topk(ratio=0.1)", (10, 100), {}),
    ("signsgd()", (10, 100), {"bucket_min_max": 1}),      # its finiteness check: one bucket
    ("fp16()", (10, 100), {}),
])
def test_segments_count_the_buckets_each_kernel_walks(spec, shape, want):
    got = {op: s for op, s in segments_by_op(spec, shape).items() if s}
    assert got == pytest.approx(want)


def test_an_empty_tensor_walks_no_bucket():
    assert sum(segments_by_op("quantize(bits=4, bucket=64)", (0,)).values()) == 0


def test_the_simulator_charges_each_segment():
    comp = compressors.parse("quantize(bits=3, bucket=50)")
    shape = (200, 500)
    base = simcodec.codec_cost(comp, shape, CPU)
    priced = CPU._replace(codec=catalog.Codec(segment_overhead=1e-6))
    seg = simcodec.codec_cost(comp, shape, priced)
    assert simcodec.rates(CPU).segment == 0.0 and simcodec.rates(priced).segment == 1e-6
    n = 200 * 500 // 50
    assert seg.enc - base.enc == pytest.approx(n * 1e-6)
    assert seg.decode(2) - base.decode(2) == pytest.approx(2 * n * 1e-6)
    # a compressor without buckets costs the same
    tk = compressors.parse("topk(ratio=0.01)")
    assert simcodec.codec_cost(tk, shape, priced) == simcodec.codec_cost(tk, shape, CPU)


def test_segment_overhead_in_a_profile(tmp_path):
    from kfsim.catalog import config as cfgmod
    from kfsim.catalog.writer import codec_dict
    assert CodecCfg(segment_overhead_ns=7.5).build().segment_overhead == pytest.approx(7.5e-9)
    assert not CodecCfg(segment_overhead_ns=0.0).build().empty and CodecCfg().build().empty
    assert codec_dict(catalog.Codec(segment_overhead=7.5e-9)) == {"segment_overhead_ns": pytest.approx(7.5)}
    with pytest.raises(ValueError, match="segment_overhead_ns"):
        CodecCfg(segment_overhead_ns=-1)
    path = tmp_path / "p.toml"
    path.write_text('[cluster]\ndevice = "cpu"\n\n[codec]\nsegment_overhead_ns = 12\n')
    assert simcodec.rates(cfgmod.load_cluster(path)).segment == pytest.approx(12e-9)


def test_fit_codec_recovers_a_per_segment_term():
    """Rows with T and S: t_seg is fitted beside the class bandwidths, t_op and t_call (specs with
    buckets of different sizes tell a per-bucket cost from a per-byte one)."""
    from compressors.cost import CLASSES
    cpu = catalog.get_device("cpu")
    a, t_op, t_call, t_seg = 2e-10, 3e-6, 5e-4, 2e-8
    rows = []
    for spec in ("topk(ratio=0.01)", "powersgd(rank=2)", "quantize(bits=8, bucket=64)", "quantize(bits=4, bucket=0)",
                 "qsgd(levels=15, bucket=512)", "terngrad(bucket=50)", "signsgd()", "fp16()", "randomk(ratio=0.1)"):
        for shape in ((100, 1000), (3000, 3000)):
            tot = cal.program_totals(spec, [shape])
            sec = (a * sum(b * cpu.factor(c) for b, c in zip(tot.class_bytes, CLASSES)) + t_op * tot.ops + t_call
                   + t_seg * tot.segments)
            rows.append((sec, tot.class_bytes, tot.ops, spec, 1.0, tot.segments))
    fit = cal.fit_codec(rows)
    assert fit["segment_overhead_ns"] == pytest.approx(t_seg * 1e9, rel=1e-2)
    assert fit["call_overhead_us"] == pytest.approx(t_call * 1e6, rel=1e-2)
    assert "t_seg" in fit["source"]
    assert "segment_overhead_ns" not in cal.fit_codec([r[:5] for r in rows])   # without S: no such term
