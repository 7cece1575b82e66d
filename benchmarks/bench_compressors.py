"""Compressor round-trip throughput on every backend, against the machine's
memory-copy ceiling measured in the same run.

    python benchmarks/bench_compressors.py [--size N] [--quick] [--targets] [--spec S ...] [--backend B ...]

What is measured, per spec and backend: one worker (n = 1) compresses and
decompresses one float32 gradient leaf, a square matrix of N elements
(default N = 25M, a 5000 x 5000 matrix, so PowerSGD works on a real matrix),
through the Compressor API (``compressors.roundtrip``: every round's
``encode``, then ``decode``). On JAX the whole round trip is one
``jax.jit``-compiled function (compile time excluded); on NumPy it runs as
written. Time t_rt is the best of ``--repeat`` runs in the steady state, after
:func:`warm_up` (the first calls of a fresh process, and NumPy calls for a
few seconds after heavy JAX work, run up to 5-10x slower), over ``--passes`` passes of all rows,
each row's best kept: back-to-back runs share a burst of noise (one row of two runs: 12.9, 18.5 ms).

The ceiling is the machine's memory bandwidth, measured once per run with all
cores: the best of several copies of a >= 1 GiB array (``--copy-gib``) by
``numpy.copyto`` on one thread, ``numpy.copyto`` split over one thread per core,
and a Numba ``prange`` loop; BW = bytes read + written per second of the
fastest. A round trip must at least read the 4 N gradient bytes, write its
payload P (bytes on the wire, from the compressor's plan: all rounds), read the
payload back and write the 4 N decoded bytes:

    t_min = (8 N + 2 P) / BW          %t_min = t_min / t_rt   (100 %: at the ceiling)
    throughput = 4 N / t_rt           [GB/s of fp32 gradient]

Stochastic compressors draw from the bit-exact JAX stream (threefry-2x32, 20 rounds per
block: ``backends.numpy.threefry``). The ``draws`` column is the time of computing the
encode's blocks alone (counted from its op program, ``compressors.cost``) on all cores with
nothing stored; the targets list prints, for such a compressor, the best fraction of t_min
a round trip could reach with them: t_min / (t_min + t_draws) if the draws run after the
memory traffic, t_min / max(t_min, t_draws) if they hide under it entirely.

(a gradient small enough to stay in the caches, e.g. ``--quick``'s 4 MB, can beat
this DRAM ceiling: %t_min > 100 % there means "cache-resident", not an error).

The machine load (``os.getloadavg``, 1 min) is printed with the ceiling and on
every row: on a shared machine other processes take bandwidth and cores.
Peers (``--no-peers`` skips them), timed the same way on the same gradient and
printed side by side with the best backend: a plain JAX implementation
(jax.jit) of the fp16 cast, 8-bit bucketed quantisation (scale max|x|/127 per
512 values) and top-k 1 % (``jax.lax.top_k`` of |x|, scatter back), and the
same three on PyTorch CPU when ``import torch`` works (else skipped with a message).
The issue's targets (2-core machine, best backend, 25M fp32): the
elementwise compressors (fp16, bf16, the sign family, int-n, natural,
terngrad) >= 40 % of t_min; qsgd within 1.5x of ``quantize`` at the same
bits (and faster than the PyTorch peer); top-k 1 % >= 30 % of t_min;
PowerSGD rank 4 on 5000 x 5000 >= 3 GB/s of gradient; and on every
compressor JAX within 1.5x of NumPy (the ``jax/np`` column).

Scheduled compressors (warm-up, DGC) are measured in their steady state
(step 1000). Specs come from ``tests/specs.py`` plus the target specs below.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import backends  # noqa: E402
import compressors as C  # noqa: E402

# (spec, target kind) for the targets
TARGET_SPECS = [
    ("fp16()", "elementwise"),
    ("bf16()", "elementwise"),
    ("quantize(bits=8, bucket=512)", "elementwise"),
    ("quantize(bits=4, bucket=512)", "elementwise"),
    ("signsgd()", "elementwise"),
    ("scaledsign()", "elementwise"),
    ("onebit()", "elementwise"),
    ("natural()", "elementwise"),
    ("terngrad()", "elementwise"),
    ("qsgd(levels=127, bucket=512)", "qsgd"),
    ("topk(ratio=0.01)", "topk"),
    ("powersgd(rank=4)", "powersgd"),
]
QSGD_PAIR = {"qsgd(levels=127, bucket=512)": "quantize(bits=8, bucket=512)"}  # the same 8-bit codes
JAX_OVER_NUMPY_MAX = 1.5
STEADY_STEP = 1000
WARMUP_CALLS = 5
WARMUP_S = 15.0


def example_specs() -> list[str]:
    """tests/specs.py:EXAMPLE_SPECS, loaded by path (benchmarks/ is no package)."""
    path = ROOT / "tests" / "specs.py"
    spec = importlib.util.spec_from_file_location("_kfsim_example_specs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return list(mod.EXAMPLE_SPECS)


def warm_up(fn) -> None:
    """Compile, then call until the timings settle: at least WARMUP_CALLS calls
    and the last one within 25 % of the fastest (at most WARMUP_S seconds).
    The first calls of a fresh process, and NumPy calls for a few seconds
    after heavy JAX work, run up to 5-10x slower."""
    fn()
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < WARMUP_S:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
        if len(times) >= WARMUP_CALLS and times[-1] <= 1.25 * min(times):
            return


def load() -> float:
    return os.getloadavg()[0]


from kfsim.testbed.membw import best_time  # noqa: E402  (the benchmarks' timer)
from backends.numpy.threefry import draw_seconds  # noqa: E402  (the draws' arithmetic alone)


def memory_bandwidth(gib: float, repeat: int) -> tuple[float, str, dict]:
    """Best copy rate (bytes read + written per second) of a >= ``gib`` GiB float32 array, all cores."""
    from kfsim.testbed.membw import copy_rate
    return copy_rate(gib * 2**30, max(repeat, 5))


def payload_bytes(comp: C.Compressor, shape) -> float:
    """Bytes one worker puts on the wire for this leaf (all rounds of its plan)."""
    return sum(r.bits for r in comp.plan(tuple(shape), np.dtype(np.float32))) / 8.0


def drawn_blocks(comp: C.Compressor, shape) -> float:
    """Threefry blocks one worker's encode computes (the rng class of its op program, 4 bytes
    per block: ``compressors.cost``; draws inside fused kernels included)."""
    from compressors.cost import codec_cost
    from kfsim.sim.codec import reference_ops
    rng = codec_cost(comp, tuple(shape), "float32", reference_ops()).encode.by_class().get("rng")
    return 0.0 if rng is None else (rng.bytes_read + rng.bytes_written) / 4.0


def make_roundtrip(backend: str, comp: C.Compressor, grad_np: np.ndarray):
    """A zero-argument function running one round trip (result ready)."""
    ops = backends.get(backend)
    grads = {"g": ops.asarray(grad_np)}
    state = comp.init(ops, grads)
    keys = C.make_keys(ops, 0, STEADY_STEP)
    if backend == "jax":
        import jax

        fn = jax.jit(lambda g, s, k: C.roundtrip(ops, comp, g, s, k))
        return lambda: jax.block_until_ready(fn(grads, state, keys))
    return lambda: C.roundtrip(ops, comp, grads, state, keys)


def target_of(spec: str) -> str | None:
    for s, kind in TARGET_SPECS:
        if s == spec:
            return kind
    return None


def verdict(kind: str | None, gbps: float, frac: float, vs_quantize: float | None = None) -> str:
    if kind == "elementwise":
        return f"target >=40%: {'met' if frac >= 0.40 else 'MISSED'}"
    if kind == "topk":
        return f"target >=30%: {'met' if frac >= 0.30 else 'MISSED'}"
    if kind == "powersgd":
        return f"target >=3 GB/s: {'met' if gbps >= 3 else 'MISSED'}"
    if kind == "qsgd" and vs_quantize is not None:
        return f"{vs_quantize:.2f}x quantize(bits=8), target <=1.5x: {'met' if vs_quantize <= 1.5 else 'MISSED'}"
    return ""


PEER_OPS = {"fp16()": "fp16 cast", "quantize(bits=8, bucket=512)": "int8 SR, 512-bucket", "topk(ratio=0.01)": "top-k 1%",
            "qsgd(levels=127, bucket=512)": "qsgd 127, 512-bucket"}


def peer_roundtrips(lib: str, grad: np.ndarray) -> dict:
    """{spec: (round trip, payload bytes)} of a plain ``lib`` (jax | torch) implementation of PEER_OPS."""
    n = grad.size
    k = max(1, int(0.01 * n))
    pad = -n % 512
    nb = (n + pad) // 512
    pay = {"fp16()": 2.0 * n, "quantize(bits=8, bucket=512)": n + 8.0 * nb, "topk(ratio=0.01)": 8.0 * k,
           "qsgd(levels=127, bucket=512)": n + 4.0 * nb}
    if lib == "jax":
        import jax
        import jax.numpy as jnp

        def q8(g, key):  # kfsim's quantize(bits=8): a min-max grid per bucket, stochastic rounding
            b = jnp.pad(g.reshape(-1), (0, pad)).reshape(-1, 512)
            lo = jnp.min(b, axis=1, keepdims=True)
            step = jnp.maximum((jnp.max(b, axis=1, keepdims=True) - lo) / 255.0, 2.0**-126)
            y = (b - lo) / step
            q = (jnp.floor(y) + (jax.random.uniform(key, b.shape) < y - jnp.floor(y))).astype(jnp.uint8)
            return (lo + q.astype(jnp.float32) * step).reshape(-1)[:n].reshape(g.shape)

        def topk(g):
            f = g.reshape(-1)
            _, idx = jax.lax.top_k(jnp.abs(f), k)
            return jnp.zeros_like(f).at[idx].set(f[idx]).reshape(g.shape)

        def qsgd(g, key):
            b = jnp.pad(g.reshape(-1), (0, pad)).reshape(-1, 512)
            norm = jnp.sqrt(jnp.sum(b * b, axis=1, keepdims=True))
            y = jnp.abs(b) * (127.0 / jnp.where(norm > 0, norm, 1.0))
            xi = jnp.floor(y) + (jax.random.uniform(key, b.shape) < y - jnp.floor(y))
            code = (xi.astype(jnp.int8) * jnp.sign(b).astype(jnp.int8))  # the 8-bit wire codes
            return (code.astype(jnp.float32) * (norm / 127.0)).reshape(-1)[:n].reshape(g.shape)

        x = jnp.asarray(grad)
        key = jax.random.PRNGKey(0)
        fns = {"fp16()": lambda g: g.astype(jnp.float16).astype(jnp.float32),
               "quantize(bits=8, bucket=512)": lambda g: q8(g, key), "topk(ratio=0.01)": topk,
               "qsgd(levels=127, bucket=512)": lambda g: qsgd(g, key)}
        return {s: ((lambda f=jax.jit(f): jax.block_until_ready(f(x))), pay[s]) for s, f in fns.items()}
    import torch

    x = torch.from_numpy(grad)

    def tq8():
        b = torch.nn.functional.pad(x.reshape(-1), (0, pad)).view(-1, 512)
        lo = b.amin(dim=1, keepdim=True)
        step = torch.clamp((b.amax(dim=1, keepdim=True) - lo) / 255.0, min=2.0**-126)
        y = (b - lo) / step
        q = (y.floor() + (torch.rand_like(y) < y - y.floor())).to(torch.uint8)
        return (lo + q.float() * step).reshape(-1)[:n].reshape(x.shape)

    def ttopk():
        f = x.reshape(-1)
        idx = f.abs().topk(k).indices
        out = torch.zeros_like(f)
        out[idx] = f[idx]
        return out.reshape(x.shape)

    def tqsgd():
        b = torch.nn.functional.pad(x.reshape(-1), (0, pad)).view(-1, 512)
        norm = b.norm(dim=1, keepdim=True)
        y = b.abs() * (127.0 / torch.where(norm > 0, norm, torch.ones_like(norm)))
        xi = y.floor() + (torch.rand_like(y) < y - y.floor())
        code = xi.to(torch.int8) * b.sign().to(torch.int8)  # the 8-bit wire codes
        return (code.float() * (norm / 127.0)).reshape(-1)[:n].reshape(x.shape)

    return {"fp16()": (lambda: x.half().float(), pay["fp16()"]), "quantize(bits=8, bucket=512)": (tq8, pay["quantize(bits=8, bucket=512)"]),
            "topk(ratio=0.01)": (ttopk, pay["topk(ratio=0.01)"]), "qsgd(levels=127, bucket=512)": (tqsgd, pay["qsgd(levels=127, bucket=512)"])}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=25_000_000, help="elements of the gradient (default 25M)")
    p.add_argument("--quick", action="store_true", help="1M elements, one timed run, target specs only")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per measurement (best is kept)")
    p.add_argument("--passes", type=int, default=2,
                   help="passes over every row, each row's best kept (a burst of machine noise hits one pass)")
    p.add_argument("--targets", action="store_true", help="only the issue's target specs")
    p.add_argument("--spec", action="append", help="only these specs (repeatable)")
    p.add_argument("--backend", action="append", choices=["jax", "numpy"], help="only these backends")
    p.add_argument("--copy-gib", type=float, default=1.0, help="size of the ceiling's copy in GiB (>= 1)")
    p.add_argument("--no-peers", action="store_true", help="skip the plain-JAX and PyTorch peers")
    args = p.parse_args(argv)

    size, repeat = args.size, args.repeat
    specs = [s for s, _ in TARGET_SPECS]
    if args.quick:
        size, repeat = min(size, 1_000_000), 1
    elif not args.targets:
        specs += [s for s in example_specs() if s not in specs]
    if args.spec:
        specs = args.spec
    names = args.backend or ["jax", "numpy"]
    for spec in specs:
        try:
            C.parse(spec)
        except ValueError as exc:
            p.error(str(exc))
    if args.passes < 1:
        p.error(f"--passes must be >= 1, got {args.passes}")
    side = math.isqrt(size)
    n = side * side
    grad = np.random.default_rng(1).standard_normal((side, side), dtype=np.float32)

    l0 = load()
    bw, how, rates = memory_bandwidth(max(args.copy_gib, 1.0), repeat)
    print(f"gradient: float32 {side}x{side} = {n:,} elements ({4 * n / 1e6:.0f} MB); "
          f"{os.cpu_count()} cores, load {l0:.2f} before / {load():.2f} after the ceiling")
    print("memory ceiling, copy of a {:.0f} GiB array (read + written bytes/s): ".format(max(args.copy_gib, 1.0))
          + ", ".join(f"{k} {v / 1e9:.1f} GB/s" for k, v in rates.items()))
    print(f"BW = {bw / 1e9:.1f} GB/s ({how}); t_min = (8 N + 2 P) / BW = {8 * n / bw * 1e3:.2f} ms + 2 P / BW")
    print()
    header = (f"{'spec':<58} {'backend':<7} {'ms':>9} {'GB/s':>7} {'P MB':>8} {'t_min':>7} {'%t_min':>6} "
              f"{'load':>5} {'ratio':>7} {'draws':>7}")
    print(header)
    print("-" * len(header))
    best: dict[str, tuple[float, float, str, float]] = {}
    times: dict[tuple[str, str], float] = {}
    draws: dict[float, float] = {}    # threefry blocks -> seconds of computing them (all cores)
    floors: dict[str, tuple[float, float]] = {}   # spec -> (t_rng, t_min)
    rows: dict[tuple[str, str], str] = {}   # (spec, backend) -> its printed row (the best pass's)
    for _ in range(args.passes):
        for spec in specs:
            comp = C.parse(spec).step(STEADY_STEP)
            ratio = comp.ratio((side, side), np.float32)
            P = payload_bytes(comp, (side, side))
            t_min = (8.0 * n + 2.0 * P) / bw
            blocks = drawn_blocks(comp, (side, side))
            if blocks:
                draws[blocks] = min(draw_seconds(blocks, repeat), draws.get(blocks, math.inf))
                floors[spec] = (draws[blocks], t_min)
            t_rng = draws.get(blocks, 0.0)
            for backend in names:
                try:
                    run = make_roundtrip(backend, comp, grad)
                    warm_up(run)
                    t = best_time(run, repeat)
                except Exception as exc:  # report and go on with the next one
                    rows.setdefault((spec, backend), f"{spec:<58} {backend:<7} failed: {type(exc).__name__}: {exc}"[:160])
                    continue
                if t >= times.get((spec, backend), math.inf):
                    continue
                gbps = 4 * n / t / 1e9
                frac = t_min / t
                times[(spec, backend)] = t
                if spec not in best or gbps > best[spec][0]:
                    best[spec] = (gbps, frac, backend, t)
                rows[spec, backend] = (f"{spec:<58} {backend:<7} {t * 1e3:9.1f} {gbps:7.2f} {P / 1e6:8.2f} "
                                       f"{t_min * 1e3:7.2f} {100 * frac:5.0f}% {load():5.2f} {ratio:7.1f} "
                                       f"{t_rng * 1e3:7.2f}")
    for row in rows.values():
        print(row)
    print()
    print("targets (best backend; % of t_min):")
    for spec, kind in TARGET_SPECS:
        if spec in best:
            gbps, frac, backend, t = best[spec]
            pair = QSGD_PAIR.get(spec)
            vs = t / best[pair][3] if pair in best else None
            print(f"  {spec:<40} {backend:<6} {gbps:6.2f} GB/s {100 * frac:5.1f}%  {verdict(kind, gbps, frac, vs)}")
            if spec in floors:
                t_rng, t_min = floors[spec]
                print(f"  {'':<40} {'':<6} draws {t_rng * 1e3:.2f} ms ({100 * t_rng / t:.0f}% of its "
                      f"{t * 1e3:.2f} ms); best possible with them: {100 * t_min / (t_min + t_rng):.0f}% "
                      f"(after the traffic) to {100 * t_min / max(t_min, t_rng):.0f}% (hidden under it)")
    ratios = {s_: times[(s_, "jax")] / times[(s_, "numpy")] for s_ in specs
              if (s_, "jax") in times and (s_, "numpy") in times}
    if ratios:
        within = [s_ for s_, r in ratios.items() if r <= JAX_OVER_NUMPY_MAX]
        print(f"\nJAX over NumPy (target <= {JAX_OVER_NUMPY_MAX}x): {len(within)} of {len(ratios)} within; "
              f"median {float(np.median(list(ratios.values()))):.2f}x")
        for s_, r in sorted(ratios.items(), key=lambda kv: -kv[1]):
            print(f"  {s_:<58} {r:6.2f}x  {'met' if r <= JAX_OVER_NUMPY_MAX else 'MISSED'}")
    if not args.no_peers:
        peers(grad, bw, best, repeat)


def peers(grad, bw, best, repeat) -> None:
    n = grad.size
    cols = {}
    for lib, label in (("jax", "plain JAX (jit)"), ("torch", "PyTorch CPU")):
        try:
            fns = peer_roundtrips(lib, grad)
        except ImportError as exc:
            print(f"\npeer {label}: skipped ({type(exc).__name__}: {exc})")
            continue
        cols[label] = {}
        for spec, (fn, P) in fns.items():
            try:
                warm_up(fn)
                cols[label][spec] = (best_time(fn, repeat), P)
            except Exception as exc:  # report and go on
                print(f"peer {label} {spec}: failed: {type(exc).__name__}: {str(exc)[:80]}")
    print(f"\npeers, side by side (ms and % of t_min for each one's own payload; load {load():.2f}):")
    head = f"  {'op':<22} {'kfsim best':>22}" + "".join(f" {label:>22}" for label in cols)
    print(head)
    for spec, op in PEER_OPS.items():
        row = f"  {op:<22} "
        if spec in best:
            _, frac, backend, t = best[spec]
            row += f"{t * 1e3:8.1f} ms {100 * frac:4.0f}% {backend:<5}"
        else:
            row += f"{'-':>22}"
        for label, res in cols.items():
            if spec in res:
                t, P = res[spec]
                row += f" {t * 1e3:11.1f} ms {100 * (8.0 * n + 2 * P) / bw / t:5.0f}%  "
            else:
                row += f" {'-':>22}"
        print(row)
    print("  (a fused peer can pass 100%: XLA runs cast-and-back as one loop, its payload never in memory)")


if __name__ == "__main__":
    main()
