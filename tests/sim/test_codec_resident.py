"""Kernels resident in the cache in the codec model: which kernels stream from the cache
(``OpCost.resident``), how much faster (``cache_speedup``, device or measured ``[codec]``), that the
fit's class bytes and the simulator's seconds agree on it, and the measurement behind it."""
import numpy as np
import pytest

import compressors
from backends.jax.ops import OPS as J
from compressors import cost
from kfsim import catalog
from kfsim.catalog.schema import CodecCfg, DeviceCfg
from kfsim.sim import codec as simcodec
from kfsim.testbed import calibrate, membw

MIB = 2**20
CPU = catalog.make_cluster(device="cpu")


def with_speedup(s, **codec):
    return CPU._replace(codec=catalog.Codec(cache_speedup=s, **codec))


@pytest.mark.parametrize("cls,nbytes,cache,expect", [
    ("elementwise", 16 * MIB, 32 * MIB, True),     # exactly half the cache
    ("elementwise", 16 * MIB + 1, 32 * MIB, False),
    ("reduction", 4 * MIB, 32 * MIB, True),          # the halving sums, threaded: 2-3x faster in the cache
    ("convert", 1.0, 32 * MIB, True),
    ("elementwise", 0.0, 32 * MIB, False),           # an empty kernel streams nothing
    ("elementwise", 1.0, 0.0, False),                # no cache
    ("select", 4 * MIB, 32 * MIB, False),            # bound by its own passes, not by streaming
    ("gather/scatter", 4 * MIB, 32 * MIB, False),
    ("rng", 4 * MIB, 32 * MIB, False),
    ("pack", 4 * MIB, 32 * MIB, False),
    ("matmul", 4 * MIB, 32 * MIB, True),             # the thin products stream the matrix
])
def test_which_kernels_are_resident(cls, nbytes, cache, expect):
    op = cost.OpCost("k", cls, nbytes / 2, nbytes / 2)
    assert op.resident(cache) is expect


@pytest.mark.parametrize("shape", [(1000, 1000), (5000, 5000), (0,), ()])
@pytest.mark.parametrize("spec", ["bf16()", "signum(beta=0.9)", "ef(topk(ratio=0.1))", "quantize(bits=8, bucket=64)"])
def test_class_bytes_and_seconds_agree_on_resident_kernels(spec, shape):
    """The fit's rows (class bytes, resident bytes counted 1/s) priced at the classes' rates are the
    simulator's seconds with the same s: a class rate fitted on them is the one it prices with."""
    bw = dict(elementwise=10e9, reduction=20e9, matmul=5e9, select=2e9, gather_scatter=3e9, rng=1e9,
              pack=40e9, convert=8e9)
    c = cost.codec_cost(compressors.parse(spec), shape, np.float32, J)
    for s in (1.0, 4.0):
        r = simcodec.rates(with_speedup(s, op_overhead=0.0, **bw))
        for counts in (c.encode, c.decode_at(1)):
            by = counts.class_bytes(r.cache, r.line, s)
            assert sum(b / bw[k.replace("/", "_")] for k, b in by.items()) == pytest.approx(
                simcodec.seconds(counts, r), rel=1e-12, abs=1e-15)


def test_the_speedup_only_shortens_what_fits():
    """At 10^6 fp32 entries the elementwise kernels fit and get s times faster; at 2.5·10^7 nothing
    fits and the price is unchanged; selection gains nothing at either size."""
    comp = compressors.parse("bf16()")
    small, big = (1000, 1000), (5000, 5000)
    one, four = with_speedup(1.0), with_speedup(4.0)
    assert simcodec.codec_cost(comp, big, four) == simcodec.codec_cost(comp, big, one)
    a, b = simcodec.codec_cost(comp, small, one), simcodec.codec_cost(comp, small, four)
    r = simcodec.rates(one)
    enc = cost.codec_cost(comp, small, np.float32, J).encode
    gain = sum(k * (op.bytes_read + op.bytes_written) * (1 - 1 / 4) / r.bw[cost.CLASSES.index(op.cls)]
               for op, k in enc.entries if op.resident(r.cache))
    assert gain > 0 and a.enc - b.enc == pytest.approx(gain)
    topk = compressors.parse("topk(ratio=0.1)")   # its encode: a selection and a gather, no streaming kernel
    assert simcodec.codec_cost(topk, small, four).enc == simcodec.codec_cost(topk, small, one).enc


def test_speedup_from_the_device_or_the_measured_codec_table():
    assert catalog.get_device("cpu").cache_speedup == 1.0 == catalog.get_device("h100").cache_speedup
    assert catalog.get_device("host-cpu").cache_speedup > 1.0
    assert simcodec.rates(CPU).speedup == 1.0
    assert simcodec.rates(with_speedup(3.0)).speedup == 3.0
    dev = DeviceCfg(name="x", peak_tflops=1, mem_bw_gbs=100, cache_mib=8, cache_speedup=2.5).build()
    assert dev.cache_speedup == 2.5 and simcodec.rates(CPU._replace(device=dev)).speedup == 2.5
    assert CodecCfg(cache_speedup=3.5).build().cache_speedup == 3.5
    assert not CodecCfg(cache_speedup=3.5).build().empty
    for bad in (0.5, 0.0, -1.0):
        with pytest.raises(ValueError, match="cache_speedup"):
            DeviceCfg(name="x", peak_tflops=1, mem_bw_gbs=100, cache_speedup=bad)
        with pytest.raises(ValueError, match="cache_speedup"):
            CodecCfg(cache_speedup=bad)


def test_a_written_profile_keeps_the_speedup(tmp_path):
    from kfsim.catalog import config as cfgmod
    from kfsim.catalog.writer import codec_dict
    assert codec_dict(catalog.Codec(cache_speedup=3.25)) == {"cache_speedup": 3.25}
    path = tmp_path / "p.toml"
    path.write_text('[cluster.device]\nname = "x"\npeak_tflops = 1\nmem_bw_gbs = 50\ncache_mib = 32\n'
                    'cache_speedup = 2.0\n\n[codec]\nelementwise_gbs = 30\ncache_speedup = 3.0\n')
    cl = cfgmod.load_cluster(path)
    assert cl.device.cache_speedup == 2.0 and cl.codec.cache_speedup == 3.0
    assert simcodec.rates(cl).speedup == 3.0   # the measured table wins


def test_program_totals_weights_resident_bytes():
    spec, shape = "signum(beta=0.9)", [(1000, 1000)]
    b1, n1, _ = calibrate.program_totals(spec, shape)
    b4, n4, _ = calibrate.program_totals(spec, shape, speedup=4.0)
    cls = cost.CLASSES
    assert n1 == n4 and sum(b4) < sum(b1)
    for c, x1, x4 in zip(cls, b1, b4):
        if c in cost.STREAMING and x1:
            assert x4 < x1
        else:
            assert x4 == x1
    big = [(5000, 5000)]   # only the per-bucket scales (a few kB) fit
    assert calibrate.program_totals(spec, big, speedup=4.0)[0] == pytest.approx(calibrate.program_totals(spec, big)[0],
                                                                               rel=1e-7)


def test_copy_rate_and_cache_speedup_measure(monkeypatch):
    rate, way, rates = membw.copy_rate(1 << 20, repeat=3)
    assert rate == max(rates.values()) > 1e8 and way in rates
    monkeypatch.setattr(membw, "STREAM_BYTES", 64 << 20)   # keep the test small
    s, resident, stream = membw.cache_speedup(8 << 20, repeat=2)
    assert s >= 1.0 and resident > 0 and stream > 0
    with pytest.raises(ValueError, match="cache_bytes"):
        membw.cache_speedup(0.0)


def test_a_program_writing_past_half_the_cache_keeps_a_share_of_the_discount():
    """Up to half the cache written the resident kernels get the whole discount; past it the share
    budget / written (each byte written beyond evicts one the cache would serve), priced alike by
    the simulator and the fit's class bytes; a real program that writes 100s of MiB at 10^6 entries
    (countsketch) is priced near the streaming rate, one that writes a few MiB (bf16) not at all."""
    op = cost.OpCost("k", "elementwise", 4 * MIB, 4 * MIB)     # 8 MiB: resident in 32 MiB
    assert cost.OpCounts(((op, 2.0),)).resident_share(32 * MIB) == 1.0     # writes 8 MiB
    assert cost.OpCounts(((op, 4.0),)).resident_share(32 * MIB) == 1.0     # 16 MiB: exactly half
    five = cost.OpCounts(((op, 5.0),))                                        # 20 MiB
    assert five.resident_share(32 * MIB) == pytest.approx(16 / 20)
    assert cost.OpCounts().resident_share(32 * MIB) == 1.0                  # nothing written
    r = simcodec.rates(with_speedup(4.0, op_overhead=0.0, elementwise=10e9))
    assert r.cache == 32 * MIB
    full, none = simcodec.seconds(five, r, share=1.0), simcodec.seconds(five, r, share=0.0)
    assert none == pytest.approx(5 * 8 * MIB / 10e9) and full == pytest.approx(none / 4)
    assert simcodec.seconds(five, r) == pytest.approx(full + (1 - 16 / 20) * (none - full))
    assert five.class_bytes(r.cache, r.line, 4.0)["elementwise"] / 10e9 == pytest.approx(simcodec.seconds(five, r))
    sketch = cost.codec_cost(compressors.parse("countsketch(ratio=0.2)"), (1000, 1000), np.float32, J)
    assert sketch.encode.bytes_written > 100 * MIB and sketch.encode.resident_share(r.cache) < 0.2
    bf16 = cost.codec_cost(compressors.parse("bf16()"), (1000, 1000), np.float32, J)
    assert bf16.encode.resident_share(r.cache) == 1.0 == bf16.decode_at(1).resident_share(r.cache)


def test_the_decode_stays_linear_in_the_payloads():
    """One share for the decode (that of one payload's), so T_dec(n) = dec + n · dec_per_worker."""
    cl = with_speedup(4.0)
    c = simcodec.codec_cost(compressors.parse("quantize(bits=8, bucket=64)"), (1000, 1000), cl)
    d2, d3, d9 = c.decode(2), c.decode(3), c.decode(9)
    assert d9 - d3 == pytest.approx(6 * (d3 - d2)) and d3 > d2 > 0


def test_the_fit_prices_an_n_payload_decode_with_the_simulators_share():
    """program_totals (the fit's rows) and the simulator give a decode of n payloads the same
    share, one payload's (CodecCost.decode_share), at every n: the fit's class bytes at the
    simulator's rates are its seconds."""
    spec, shape = "signum(beta=0.9)", (1500, 1500)   # one payload's decode writes 34 MiB, each more 26
    cc = cost.codec_cost(compressors.parse(spec), shape, np.float32, J)
    r = simcodec.rates(with_speedup(4.0))
    assert cc.decode_share(r.cache) == cc.decode_at(1).resident_share(r.cache) < 1.0
    for n in (1, 4):
        fit = cc.decode_at(n).class_bytes(r.cache, r.line, 4.0, cc.decode_share(r.cache))
        own = cc.decode_at(n).class_bytes(r.cache, r.line, 4.0)
        assert sum(fit.values()) <= sum(own.values()) + 1e-6   # n payloads write more: their own share is smaller
        b4 = calibrate.program_totals(spec, [shape], n=n, speedup=4.0).class_bytes
        enc = cc.encode.class_bytes(r.cache, r.line, 4.0)
        want = [enc.get(c, 0.0) + fit.get(c, 0.0) for c in cost.CLASSES]
        assert b4 == pytest.approx(want, rel=1e-12, abs=1e-6)
