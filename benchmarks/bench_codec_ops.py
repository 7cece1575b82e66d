"""Where a codec's time goes, op by op: measured on the NumPy binding beside the codec model's price.

    python benchmarks/bench_codec_ops.py SPEC [SPEC ...] [--size 1e6] [--load rows.json] [--repeat 9]

For each spec, one worker's round trip (encode, then decode; ``bench_codec_cost``'s row) runs
through a proxy of the NumPy binding that times every call of an ops-namespace function
(``ops.where``, ``ops.top_k``, the fused kernels, ...), summed per op name over ``--repeat``
round trips; beside each op, the simulator's price of that op's kernels in the traced program
(``kfsim.sim.codec.seconds`` of its entries, encode and one payload's decode), on the CPU
cluster that ``bench_codec_cost``'s fit B gives for the rows of ``--load`` (a ``--save`` file), or
on the catalog's CPU profile without one. Arithmetic written with Python operators on arrays
(``a * b``) does not pass through the namespace: its time is in the "operators and Python"
line (the round trip less the timed ops), and its price under the op names the trace gives it
(``mul``, ``add``, ...) with no measured figure.

This is how the rows that ``bench_codec_cost`` mispredicts were traced to a kernel on
2026-12-06: dgc's ``where(mask, 0.0, u)`` took np.where's scalar path (3.6 ms on 1e6 entries
against 0.12 through the select kernel), sumquant's row max np.max over rows of 64 (0.92 ms
against 0.11), fp16's casts a bit-twiddling loop the CPU's conversion replaced.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_codec_cost import fitted_cluster, shape_of  # noqa: E402
from bench_compressors import STEADY_STEP  # noqa: E402


class Timed:
    """The binding with every public function call timed into ``seconds`` and ``calls``."""

    def __init__(self, ops):
        self._ops = ops
        self.seconds: dict = collections.defaultdict(float)
        self.calls: collections.Counter = collections.Counter()

    def __getattr__(self, name):
        f = getattr(self._ops, name)
        if name.startswith("_") or not callable(f) or isinstance(f, type):
            return f

        def timed(*args, **kwargs):
            t = time.perf_counter()
            out = f(*args, **kwargs)
            self.seconds[name] += time.perf_counter() - t
            self.calls[name] += 1
            return out
        return timed


def priced_ops(comp, shape, cluster) -> tuple[dict, float]:
    """Seconds per op name of ``comp``'s traced encode and decode(n = 1), and the per-call term."""
    from compressors.cost import OpCounts
    from compressors.cost import codec_cost as program_cost
    from kfsim.sim.codec import rates, reference_ops, seconds
    r = rates(cluster)
    cc = program_cost(comp, shape, "float32", reference_ops())
    out: dict = collections.defaultdict(float)
    for part, share in ((cc.encode, cc.encode.resident_share(r.cache)), (cc.decode_at(1), cc.decode_share(r.cache))):
        for op, k in part.entries:
            out[op.op] += seconds(OpCounts(((op, k),)), r, share)
    return out, r.call


def cluster_for(load: Path | None):
    from kfsim import catalog
    if load is None:
        return catalog.make_cluster(device="cpu"), "the catalog's CPU profile"
    try:
        saved = json.loads(load.read_text())
        rows = [(float(t), tuple(sh), str(sp)) for t, sh, sp, sz in saved["numpy"] if sz in (1e5, 2.5e7)]
        speedup = float(saved.get("cache_speedup") or 1.0)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.exit(f"bench_codec_ops: cannot read NumPy rows from {load}: {type(exc).__name__}: {exc}")
    if not rows:
        sys.exit(f"bench_codec_ops: {load} holds no NumPy rows at 1e5 and 2.5e7 to fit")
    cluster, _ = fitted_cluster(rows, True, speedup, segments=True)
    return cluster, f"fit B of {load}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", nargs="+")
    ap.add_argument("--size", type=float, default=1e6, help="elements of the near-square float32 gradient")
    ap.add_argument("--load", type=Path, default=None, help="bench_codec_cost --save rows to fit the prices on")
    ap.add_argument("--repeat", type=int, default=9)
    a = ap.parse_args(argv)
    if a.size < 1 or a.repeat < 1:
        ap.error("--size and --repeat must be at least 1")
    import backends
    import compressors as C
    cluster, source = cluster_for(a.load)
    ops = backends.get("numpy")
    shape = shape_of(a.size)
    print(f"# {a.size:g} float32 entries {shape}; prices from {source}; ms per round trip, best of "
          f"{a.repeat} (total) and mean of {a.repeat} (per op)")
    for spec in a.spec:
        try:
            comp = C.parse(spec).step(STEADY_STEP)
        except ValueError as exc:
            sys.exit(f"bench_codec_ops: {exc}")
        priced, call = priced_ops(comp, shape, cluster)
        g = {"g": ops.asarray(np.random.default_rng(0).standard_normal(shape).astype(np.float32))}
        state = comp.init(ops, g)
        keys = C.make_keys(ops, 0, STEADY_STEP)
        timed = Timed(ops)
        for _ in range(2):
            C.roundtrip(ops, comp, g, state, keys)
        best = min(_once(lambda: C.roundtrip(ops, comp, g, state, keys)) for _ in range(a.repeat))
        proxied = sum(_once(lambda: C.roundtrip(timed, comp, g, state, keys)) for _ in range(a.repeat)) / a.repeat
        per = {k: v / a.repeat for k, v in timed.seconds.items()}
        print(f"\n{spec}: round trip {best * 1e3:.3f} ms (through the proxy {proxied * 1e3:.3f}), "
              f"priced {(sum(priced.values()) + call) * 1e3:.3f} ms")
        print(f"  {'op':>22} {'calls':>6} {'measured ms':>12} {'priced ms':>10}")
        for name in sorted(set(per) | set(priced), key=lambda n: -max(per.get(n, 0.0), priced.get(n, 0.0))):
            m = f"{per[name] * 1e3:12.3f}" if name in per else f"{'-':>12}"
            print(f"  {name:>22} {timed.calls[name] / a.repeat:6.1f} {m} {priced.get(name, 0.0) * 1e3:10.3f}")
        print(f"  {'operators and Python':>22} {'':>6} {(proxied - sum(per.values())) * 1e3:12.3f} {call * 1e3:10.3f}"
              f"   (priced: the per-call term)")


def _once(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
