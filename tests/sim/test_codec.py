"""Codec cost from a compressor's own op program: counts, scaling with n and size, pricing, caching."""
import math
import uuid

import numpy as np
import pytest

import compressors
from backends.jax.ops import OPS as J
from compressors import cost
from compressors.core import Compressor, Law, fixed, mean_of, single_round
from compressors.fused import FUSED_NAMES
from compressors.ops import OP_NAMES
from compressors.program import trace_codec
from compressors.registry import register, unregister
from kfsim import catalog
from kfsim.sim import codec as simcodec
from kfsim.sim.exchange_cost import exchange_time
from kfsim.sim.predict import predict_iteration

SEED = catalog.seed_cluster()
N = 1000


def counts(spec, shape=(N,), dtype=np.float32):
    return cost.codec_cost(compressors.parse(spec), shape, dtype, J)


def test_none_has_no_encode_and_only_the_mean_in_decode():
    c = counts("none")
    assert c.encode.n_ops == 0 and c.encode.bytes == 0
    assert c.decode.ops() == {"mul": 1.0}                       # the 1/n scaling of the sum
    assert (c.decode.bytes_read, c.decode.bytes_written) == (4 * N, 4 * N)
    assert c.decode_per_worker.n_ops == 0 and c.decode_per_worker.bytes == 0
    # the simulator charges a dense tensor nothing: the exchange is the bare all-reduce
    p = predict_iteration("resnet-18", SEED, "none", 8)
    assert p.codec_s == 0.0


def test_fp16_encode_reads_4n_writes_2n():
    c = counts("fp16")
    assert c.encode.ops() == {"astype": 1.0}
    assert (c.encode.bytes_read, c.encode.bytes_written) == (4 * N, 2 * N)
    assert c.encode.by_class() == {"convert": cost.ClassTotals(1.0, 4 * N, 2 * N, 0.0)}   # a cast is a conversion
    # decode: cast back (2N -> 4N) and the 1/n scaling (4N -> 4N)
    assert (c.decode.bytes_read, c.decode.bytes_written, c.decode.n_ops) == (6 * N, 8 * N, 2)
    assert c.decode_per_worker.n_ops == 0


def test_topk_selects_with_one_fused_op_and_decodes_each_payload():
    k = 10
    c = counts("topk(ratio=0.01)")
    assert c.encode.ops() == {"top_k_abs": 1.0, "gather": 1.0}
    sel = c.encode.by_class()["select"]
    assert (sel.count, sel.bytes_read, sel.bytes_written) == (1.0, 4 * N, 4 * k)   # |x| once, k int32 out
    g = c.encode.by_class()["gather/scatter"]
    assert (g.bytes_read, g.bytes_written) == (4 * k + 4 * k, 4 * k)             # indices + the k values only
    # one scatter of all n·k pairs: its reads grow by one payload (k values + k indices) per worker
    assert c.decode_per_worker.bytes_read == 8 * k and c.decode_per_worker.n_ops == 0
    # traced through its composition (the lowering's view), top_k_abs is three ops
    traced = trace_codec(compressors.parse("topk(ratio=0.01)"), (N,), np.float32, J, record_fused=False)
    assert {"top_k", "scatter_add", "nonzero"} <= {e.op for e in traced.encode}


@pytest.mark.parametrize("spec", ["qsgd(levels=15, bucket=64)", "signsgd", "topk(ratio=0.05)", "ef(topk(ratio=0.1))"])
def test_decode_is_linear_in_n(spec):
    """decode + n · decode_per_worker equals a trace at n = 4 and 7 (loops and vectorised decodes)."""
    c = counts(spec, (300,))
    for n in (4, 7):
        direct = cost.OpCounts.of(trace_codec(compressors.parse(spec), (300,), np.float32, J, n=n).decode)
        line = c.decode_at(n)
        assert line.n_ops == pytest.approx(direct.n_ops)
        assert line.bytes_read == pytest.approx(direct.bytes_read)
        assert line.bytes_written == pytest.approx(direct.bytes_written)


@pytest.mark.parametrize("spec", ["onebit()", "topk(ratio=0.05)", "qsgd(levels=15, bucket=64)"])
def test_a_lone_worker_decodes_its_own_payload(spec):
    """n = 1 is off the line (mean_of skips the 1/n scaling there): decode_at(1) is a trace at
    n = 1, and the simulator prices a lone worker's decode with it."""
    c = counts(spec, (300,))
    direct = cost.OpCounts.of(trace_codec(compressors.parse(spec), (300,), np.float32, J, n=1).decode)
    assert c.decode_at(1).ops() == direct.ops() and c.decode_at(1).bytes == pytest.approx(direct.bytes)
    line = c.decode.plus(c.decode_per_worker)   # the line at n = 1: one 1/n scaling of 300 entries more
    assert line.ops()["mul"] == direct.ops().get("mul", 0) + 1 and line.bytes == pytest.approx(direct.bytes + 2400)
    r = simcodec.rates(SEED)
    t = simcodec.codec_cost(compressors.parse(spec), (300,), SEED)
    assert t.decode(1) == pytest.approx(simcodec.seconds(c.decode_one, r, c.decode_share(r.cache)), rel=1e-12)
    assert t.decode(1) < t.dec + t.dec_per_worker and t.decode(2) == pytest.approx(t.dec + 2 * t.dec_per_worker)


def test_powersgd_flops_hand_computed():
    n, m, r = 256, 128, 4
    c = counts("powersgd(rank=4)", (n, m))
    assert c.encode.ops()["matmul"] == 1 == c.encode.ops()["matmul_tn"]  # P = M Q, then Q = Mᵀ P̂
    assert c.encode.ops().get("transpose", 0) == 2             # of P (n x r) in Gram-Schmidt; no copy of Mᵀ
    assert c.encode.flops == 2 * (2 * n * m * r)
    assert c.encode.by_class()["matmul"].flops == c.encode.flops
    # decode: the residual M - P̂ Qᵀ (sub_matmul_nt) and the estimate P̂ (Q/n)ᵀ (matmul_nt)
    assert c.decode.ops()["sub_matmul_nt"] == 1 and c.decode.ops()["matmul_nt"] == 1
    assert c.decode.flops == (2 * n * m * r + n * m) + 2 * n * m * r
    assert c.decode_per_worker.n_ops == 0                       # SUM rounds: nothing per worker


def test_every_op_has_a_cost_class():
    assert set(OP_NAMES) | set(FUSED_NAMES) <= set(cost.OP_CLASS)
    assert set(cost.OP_CLASS.values()) <= set(cost.CLASSES) | {cost.FREE}


def test_costs_scale_with_tensor_size():
    small, big = counts("ef(topk(ratio=0.01))", (1000,)), counts("ef(topk(ratio=0.01))", (100_000,))
    assert big.encode.n_ops == small.encode.n_ops
    assert big.encode.bytes == pytest.approx(100 * small.encode.bytes, rel=1e-9)
    comp = compressors.parse("ef(topk(ratio=0.01))")
    ts, tb = simcodec.codec_cost(comp, (1000,), SEED), simcodec.codec_cost(comp, (100_000,), SEED)
    assert tb.enc > ts.enc > 0 and tb.decode(16) > ts.decode(16) > 0
    assert tb.enc < 100 * ts.enc           # small tensors pay the per-op launch overhead
    # large tensors are bandwidth-bound: 10x the bytes is close to 10x the time
    t7, t8 = simcodec.codec_cost(comp, (10_000_000,), SEED), simcodec.codec_cost(comp, (100_000_000,), SEED)
    assert t8.enc / t7.enc == pytest.approx(10, rel=0.03)


# -- a user-written compressor: priced from its program, no table entry --------------------------

TAG = uuid.uuid4().hex[:8]
HALF, SCALED_SIGN = f"user_half_{TAG}", f"user_scaled_sign_{TAG}"


def _user_half() -> Compressor:
    """x / 2 on the wire, summed (one elementwise op)."""
    leaf = single_round(law=Law.SUM, bits=lambda shape, dtype: 32 * math.prod(shape),
                        compress=lambda ops, x, state, keys: (x * 0.5, state),
                        decompress=lambda ops, payload, x: payload * 2.0)
    return Compressor(f"{HALF}()", fixed(leaf))


def _user_scaled_sign() -> Compressor:
    """max|x| · sign(x), gathered: abs, max, sign, mul per tensor; decoded per payload."""
    def compress(ops, x, state, keys):
        flat = ops.reshape(x, (-1,))
        return (ops.sign(flat), ops.max(ops.abs(flat))), state

    def aggregate(ops, received, x, n):
        signs, scales = received
        total = signs[0] * scales[0]
        for i in range(1, n):
            total = total + signs[i] * scales[i]
        return mean_of(ops, ops.reshape(total, x.shape), n)

    leaf = single_round(law=Law.GATHER, bits=lambda shape, dtype: 32 * math.prod(shape) + 32,
                        compress=compress, decompress=None, aggregate=aggregate)
    return Compressor(f"{SCALED_SIGN}()", fixed(leaf))


@pytest.fixture(scope="module", autouse=True)
def user_compressors():
    """Registered for this module's tests only: other tests enumerate the registry."""
    register(HALF)(_user_half)
    register(SCALED_SIGN)(_user_scaled_sign)
    yield
    unregister(HALF)
    unregister(SCALED_SIGN)


def test_user_compressor_is_priced_from_its_program():
    half, ssign = counts(f"{HALF}()"), counts(f"{SCALED_SIGN}()")
    assert half.encode.ops() == {"mul": 1.0}
    assert (half.encode.bytes_read, half.encode.bytes_written) == (4 * N, 4 * N)
    assert ssign.encode.ops() == {"sign": 1.0, "abs": 1.0, "max": 1.0}
    assert ssign.encode.by_class()["reduction"].count == 1
    # gathered: each payload is multiplied and added once
    assert ssign.decode_per_worker.ops() == {"mul": 1.0, "add": 1.0}
    assert half.decode_per_worker.n_ops == 0
    # a different program, a different cost; no default cost for either
    a = simcodec.codec_cost(compressors.parse(f"{HALF}()"), (N,), SEED)
    b = simcodec.codec_cost(compressors.parse(f"{SCALED_SIGN}()"), (N,), SEED)
    assert a != b and a.enc > 0 and b.enc > a.enc and b.decode(8) > b.decode(2)
    bh = predict_iteration("resnet-18", SEED, f"{HALF}()", 8)
    bs = predict_iteration("resnet-18", SEED, f"{SCALED_SIGN}()", 8)
    assert 0 < bh.codec_s != bs.codec_s


# -- pricing on a device ------------------------------------------------------------------------

def test_seconds_follow_the_roofline_formula():
    dev = SEED.device
    comp = compressors.parse("fp16")
    t = simcodec.codec_cost(comp, (N,), SEED)
    bw = dev.achievable_bw
    assert bw == pytest.approx(0.85 * 936e9)
    assert t.enc == pytest.approx(6 * N / bw + dev.launch_s)
    assert t.dec == pytest.approx(14 * N / bw + 2 * dev.launch_s) and t.dec_per_worker == 0
    top = simcodec.codec_cost(compressors.parse("topk(ratio=0.01)"), (N,), SEED)
    k = 10
    select = (4 * N + 4 * k) * dev.factor("select") / bw
    gather = (12 * k) * dev.factor("gather/scatter") / bw
    assert top.enc == pytest.approx(select + gather + 2 * dev.launch_s)
    # matmul: max(bytes / bw, flops · f / peak); a wide fp32 product on a slow-FLOP device is compute-bound
    slow = SEED._replace(device=dev._replace(fp32_flops=1e9))
    ps = compressors.parse("powersgd(rank=4)")
    assert simcodec.codec_cost(ps, (256, 128), slow).enc > simcodec.codec_cost(ps, (256, 128), SEED).enc


@pytest.mark.parametrize("spec, d, per", [("quantize(bits=8, bucket=64)", 1001, 4), ("qsgd(levels=15, bucket=64)", 1001, 4),
                                          ("natural()", 1001, 2)])
def test_random_words_drawn_inside_a_fused_kernel_are_priced_as_rng(spec, d, per):
    """quantize_pack draws one threefry block per four entries and natural_pack one per two: the
    kernel stays one op of its class, and 4 bytes per block are added in the rng class."""
    c = counts(spec, (d,))
    drawn = [(op, k) for op, k in c.encode.entries if op.rng_bytes]
    assert len(drawn) == 1 and drawn[0][1] == 1.0
    op = drawn[0][0]
    assert op.cls == "pack" and op.rng_bytes == 4 * -(-d // per)
    totals = c.encode.by_class()
    plain = sum(k * o.bytes_written for o, k in c.encode.entries if o.cls == "rng")
    assert totals["rng"].bytes_written == plain + op.rng_bytes
    assert totals["rng"].count == sum(k for o, k in c.encode.entries if o.cls == "rng")  # no extra op
    assert c.encode.class_bytes()["rng"] == totals["rng"].bytes_read + totals["rng"].bytes_written
    comp = compressors.parse(spec)
    fast, slow = (SEED._replace(codec=catalog.Codec(rng=bw)) for bw in (1e15, 1e9))
    gap = simcodec.codec_cost(comp, (d,), slow).enc - simcodec.codec_cost(comp, (d,), fast).enc
    rng_bytes = totals["rng"].bytes_read + totals["rng"].bytes_written
    assert gap == pytest.approx(rng_bytes * (1 / 1e9 - 1 / 1e15))
    assert not any(o.rng_bytes for o, _ in counts("fp16").encode.entries)


def test_random_words_are_priced_per_threefry_block():
    """random_words takes both words of a block: the rng class prices half the bytes of random_bits'
    one word per block (4 bytes per block computed)."""
    from compressors.program import Program, TracingOps
    for n in (0, 1, 2, 7, 1000):
        prog = Program("test", J)
        ops = TracingOps(prog)
        key = prog.input((2,), np.uint32)
        ops.random_words(key, (n,)), ops.random_bits(key, (n,))
        got = {e.op: cost.op_cost(e) for e in prog.eqns if e.op in ("random_words", "random_bits")}
        assert got["random_words"].cls == got["random_bits"].cls == "rng"
        assert got["random_words"].bytes_written == 4 * -(-n // 2)
        assert got["random_bits"].bytes_written == 4 * n


def test_cluster_codec_overrides_the_device():
    comp = compressors.parse("topk(ratio=0.01)")
    base = simcodec.codec_cost(comp, (100_000,), SEED)
    slow_select = SEED._replace(codec=catalog.Codec(select=1e9))
    assert simcodec.codec_cost(comp, (100_000,), slow_select).enc > 10 * base.enc
    no_launch = SEED._replace(codec=catalog.Codec(op_overhead=0.0))
    got = simcodec.codec_cost(comp, (100_000,), no_launch)
    assert got.enc == pytest.approx(base.enc - 2 * SEED.device.launch_s)
    fast_dev = SEED._replace(device=SEED.device._replace(stream_bw=2 * SEED.device.achievable_bw, launch_s=0.0))
    assert simcodec.codec_cost(comp, (100_000,), fast_dev).enc == pytest.approx(got.enc / 2)
    with pytest.raises(TypeError, match="op program"):
        SEED.codec("topk")


def test_trace_once_per_shape(monkeypatch):
    calls = []
    real = cost.trace_cost
    monkeypatch.setattr(cost, "trace_cost", lambda *a: calls.append(a[1]) or real(*a))
    spec = f"{HALF}()"
    comp = compressors.parse(spec)
    shapes = [(7, 3), (7, 3), (11,), (7, 3)]
    cost._CACHE.pop((comp.spec, (7, 3), "float32", "jax"), None)
    cost._CACHE.pop((comp.spec, (11,), "float32", "jax"), None)
    simcodec.clear_caches()
    for cl in (SEED, SEED._replace(device=catalog.get_device("a100")), SEED._replace(codec=catalog.Codec(pack=1e9))):
        for _ in range(3):
            exchange_time(comp, shapes, 4, cl)
    assert sorted(calls) == [(7, 3), (11,)]


def test_one_bucket_codec_is_the_sum_of_tensors():
    comp = compressors.parse("ef(topk(ratio=0.01))")
    shapes = [(1024, 1024), (1024,), (4096, 1024)]
    p = 16
    per = [simcodec.codec_cost(comp, s, SEED) for s in shapes]
    expect = sum(t.enc + t.decode(p) for t in per)
    from kfsim.sim import algorithms
    from kfsim.sim.exchange_cost import bucket_cost, tensor_plan
    plan = tensor_plan(comp, shapes, cluster=SEED)
    bc = bucket_cost(plan, np.zeros(3, dtype=np.int64), p, "ring", algorithms.net_params(SEED))
    assert bc.enc.sum() + bc.dec.sum() == pytest.approx(expect)
    with pytest.raises(ValueError, match="priced"):
        bucket_cost(tensor_plan(comp, shapes), np.zeros(3, dtype=np.int64), p, "ring", algorithms.net_params(SEED))


def test_casts_are_priced_in_the_convert_class():
    """astype is its own class (a backend's casts may run on other kernels than its arithmetic:
    NumPy's are threaded, its ufuncs are not); a measured convert rate prices fp16's cast only."""
    comp = compressors.parse("fp16()")
    fast, slow = (SEED._replace(codec=catalog.Codec(convert=bw)) for bw in (1e15, 1e9))
    gap = simcodec.codec_cost(comp, (N,), slow).enc - simcodec.codec_cost(comp, (N,), fast).enc
    assert gap == pytest.approx(6 * N * (1 / 1e9 - 1 / 1e15))
    assert cost.OP_CLASS["astype"] == "convert" and "convert" in cost.CLASSES
    from kfsim.catalog.schema import CodecCfg
    assert CodecCfg(convert_gbs=2.0).build().convert == 2e9
