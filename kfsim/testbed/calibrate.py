"""``kfsim calibrate``: micro-measurements on the testbed → fitted cluster profiles.

For each link rate and worker count p: collective micro-benchmarks (all-reduce
and all-gather of a few sizes) and, per MLP, the compute time per step with
the reducer removed (p processes share this host's CPU, so compute is
measured at each p). Then, per (rate, p), fit α, β, γ of the mccl echo ring
(:mod:`kfsim.testbed.fit`) and write the profile ``<name>-<rate>mbit-p<p>.toml``;
per rate, a pooled fit over all p gives ``<name>-<rate>mbit.toml``.
Measurements accumulate in ``<name>-measurements.json`` (a later run with
other rates or p adds or replaces cells), so long calibrations can be split
into short commands.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple, Sequence

from kfsim.launch import host
from kfsim.testbed import microbench
from kfsim.testbed.fit import CollectiveFit, fit_collectives
from kfsim.testbed.microbench import Measured
from kfsim.testbed.netns import Shape, Testbed
from kfsim.testbed.profile import profile_dict, write_profile
from kfsim.testbed.training import mlp_model_entry, mlp_name, run_native

DEFAULT_SIZES = (16384, 262144, 1048576, 4194304)


def measurements_path(name: str, directory: str | Path) -> Path:
    return Path(directory) / f"{name}-measurements.json"


def load_measurements(path: Path) -> dict:
    if not path.exists():
        return {"collectives": [], "compute": [], "models": {}, "steps": []}
    data = json.loads(path.read_text())
    data.setdefault("steps", [])
    for key in ("collectives", "compute", "models"):
        if key not in data:
            raise ValueError(f"{path}: missing key {key!r}: not a kfsim calibration file")
    return data


def merge(data: dict, collectives: Sequence[Measured], compute: Sequence[dict], models: dict,
          steps: Sequence[dict] = ()) -> dict:
    """Replace the (rate, p) cells / (p, model) / (p, spec, model) entries that were re-measured."""
    cells = {(m.rate_mbit, m.p) for m in collectives}
    data["collectives"] = [c for c in data["collectives"] if (c["rate_mbit"], c["p"]) not in cells] + \
        [m._asdict() for m in collectives]
    keys = {(c["p"], c["model"]) for c in compute}
    data["compute"] = [c for c in data["compute"] if (c["p"], c["model"]) not in keys] + list(compute)
    data["models"].update(models)
    if collectives or steps or compute:   # the cores the measured ranks shared (kfsim.testbed.holdout.host_share)
        data["host"] = {"cores": host.cores()}
    skeys = {(c["p"], c["spec"], c["model"]) for c in steps}
    data["steps"] = [c for c in data.get("steps", []) if (c["p"], c["spec"], c["model"]) not in skeys] + list(steps)
    return data


def measure(rates_mbit: Sequence[float], workers: Sequence[int], sizes: Sequence[int], layers_list=(),
            batch: int = 64, repeats: int = 3, log_root: str | Path | None = None, log=print,
            specs: Sequence[str] = (), hidden: int = 1400, global_batch: int = 64, imports: Sequence[str] = ()):
    """Run the micro-benchmarks; returns (collective measurements, compute entries, model entries,
    step entries). ``specs``: compressors whose codec cost to measure on the launcher's ``wide``
    MLP — p independent one-worker jobs at once, kept in step after compiling (the CPU contention
    of a p-rank job, no network; :mod:`kfsim.launch.rendezvous`), each spec and ``native``;
    codec = T(spec) − T(native). ``imports``: ``--import`` targets of the
    workers (modules registering the specs' compressors, :mod:`kfsim.imports`)."""
    if not rates_mbit and not specs and not layers_list:
        raise ValueError("nothing to measure")
    if not workers:
        raise ValueError("need at least one worker count")
    if any(p < 2 for p in workers):
        raise ValueError(f"worker counts must be >= 2, got {list(workers)}")
    if specs and any(global_batch % p for p in workers):   # before minutes of collectives are measured
        raise ValueError(f"global batch {global_batch} must be divisible by every worker count {list(workers)} "
                         f"(the codec steps split it into equal shards)")
    coll: list[Measured] = []
    compute, models, steps = [], {}, []
    with Testbed(max(workers), Shape(rates_mbit[0] if rates_mbit else 1000.0)) as tb:
        for rate in rates_mbit:
            tb.reshape(Shape(rate))
            for p in workers:
                log(f"collectives: {rate:g} Mbit/s, p={p}, sizes {list(sizes)}")
                coll += microbench.run_cell(tb, p, sizes, repeats=repeats, log_root=log_root)
        for layers in layers_list:
            models[mlp_name(layers)] = mlp_model_entry(layers, batch)
            for p in workers:
                log(f"compute: {mlp_name(layers)} batch {batch}, p={p}")
                run = run_native(tb, p, layers, batch, steps=max(repeats, 3), native=False, log_root=log_root)
                compute.append({"p": p, "model": mlp_name(layers), "batch": batch, "seconds": run.compute_s})
        if specs:
            from kfsim.testbed.compressed import run_steps, wide_model_entry, wide_name
            models[wide_name(hidden)] = wide_model_entry(hidden, global_batch)
            for p in workers:
                for spec in ["native", *specs]:
                    log(f"steps: {spec} on {wide_name(hidden)}, {p} independent workers, batch {global_batch // p}")
                    r = run_steps(tb, p, spec, hidden, global_batch, steps=max(repeats, 3) + 2, skip=2,
                                  log_root=log_root, independent=True, imports=imports)
                    steps.append({"p": p, "spec": spec, "model": wide_name(hidden), "global_batch": global_batch,
                                  "seconds": r.step_s, "all_s": r.steps_s})
    return coll, compute, models, steps


def fits(data: dict) -> dict:
    """{(rate, p or None): CollectiveFit} from a measurements dict (None = pooled over p)."""
    ms = [Measured(**c) for c in data["collectives"]]
    out: dict = {}
    for rate in sorted({m.rate_mbit for m in ms}):
        at = [m for m in ms if m.rate_mbit == rate]
        out[(rate, None)] = fit_collectives([m.sample() for m in at])
        for p in sorted({m.p for m in at}):
            out[(rate, p)] = fit_collectives([m.sample() for m in at if m.p == p])
    return out


def write_profiles(name: str, data: dict, directory: str | Path, mem_bw_gbs: float = 5.0) -> dict:
    """Write every (rate, p) and pooled profile; returns {(rate, p): path}."""
    paths = {}
    models = list(data["models"].values())
    for (rate, p), fit in fits(data).items():
        ps = [p] if p is not None else sorted({c["p"] for c in data["collectives"] if c["rate_mbit"] == rate})
        comp = {}
        pc = max(ps)   # pooled profile: compute/codecs of the largest p measured (the most contended)
        for c in data["compute"]:
            if c["p"] == pc:
                comp[c["model"]] = _compute_only(c, data["models"], mem_bw_gbs)
        scomp, codec = step_costs(data, pc, mem_bw_gbs)
        comp.update(scomp)
        suffix = "" if p is None else f"-p{p}"
        pdata = profile_dict(name, rate, fit, max(ps), mem_bw_gbs=mem_bw_gbs, compute_s=comp, models=models,
                             codec=codec,
                             source=f"kfsim calibrate ({len(data['collectives'])} collective cells)")
        pdata["name"] += suffix
        path = Path(directory) / f"{pdata['name']}.toml"
        paths[(rate, p)] = write_profile(pdata, path)
    return paths


MIN_CODEC_S = 1e-5   # a measured codec cost at or below noise is stored as this


def step_costs(data: dict, p: int, mem_bw_gbs: float = 5.0) -> tuple[dict, dict]:
    """From the independent-job step times at p: compute per model (``native``, at the catalog batch,
    less 28·N/mem_bw) and the fitted codec-kernel constants (the profile's ``[codec]`` table).

    Each measured spec's codec time C = T(spec) − T(native) is a sum over the kernels of its own op
    program (``compressors.cost``; every coded tensor's encode and its decode of one payload — the
    jobs are independent, n = 1), each kernel costing bytes / bw(class) + t_op. No compressor is
    named: the unknowns are device constants, x_c = 1 / bw(class c) and t_op, fitted to

        C_i ≈ Σ_c B_ic · x_c + N_i · t_op        (B_ic: bytes of class c in spec i; N_i: its ops)

    in two stages (:func:`fit_codec`): (1) one bandwidth scale, x_c = a · f_c with the testbed
    device's class factors f_c (:func:`kfsim.testbed.profile.testbed_device`), and t_op, by
    non-negative least squares on relative errors; (2) per class, the same least squares plus a
    weak ridge pulling each x_c to stage 1's a · f_c (weight ``RIDGE``), each class's bandwidth
    bounded to [1/100, 10] × stage 1's (bounded least squares): a class no measured program uses
    keeps stage 1's value, a class that explains a spec's extra time gets slower.
    With fewer specs than classes the split between classes a spec uses is the ridge's, so
    measure specs with different op mixes."""
    entries = [e for e in data.get("steps", []) if e["p"] == p]
    compute, rows = {}, []
    for model in sorted({e["model"] for e in entries}):
        es = {e["spec"]: e for e in entries if e["model"] == model}
        if "native" not in es:
            continue
        m = data["models"][model]
        dense = 4.0 * sum(_prod(s) for s in m["tensor_shapes"])
        base = es["native"]["seconds"]
        # measured at the per-worker batch B/p; the catalog batch is the global B
        compute[model] = max((base - 28.0 * dense / 4 / (mem_bw_gbs * 1e9)) * p, 1e-6)
        for spec, e in sorted(es.items()):
            if spec != "native":
                tot = program_totals(spec, m["tensor_shapes"])
                rows.append((max(e["seconds"] - base, MIN_CODEC_S), tot.class_bytes, tot.ops, spec))
    return compute, fit_codec(rows)


RIDGE = 1e-4   # weight of the pull of each class's 1/bw towards the one-scale fit (relative units)
FASTER, SLOWER = 10.0, 100.0   # a class's fitted bandwidth stays within [1/100, 10] × the one-scale fit


def _factor(cls: str) -> float:
    from kfsim import catalog
    return catalog.get_device("cpu").factor(cls)


class ProgramTotals(NamedTuple):
    """What one exchange's codec does (:func:`program_totals`)."""

    class_bytes: tuple    # bytes per cost class, compressors.cost.CLASSES order
    ops: float            # kernels
    segments: float       # bucket segments the bucketed kernels walk (compressors.cost.OpCost.segments)


def program_totals(spec: str, shapes, n: int = 1, speedup: float = 1.0) -> ProgramTotals:
    """Bytes per cost class, number of ops and bucket segments of one exchange of ``spec`` over
    ``shapes`` (fp32): every coded tensor's encode and its decode of n payloads, from the
    compressor's op program; ``speedup``: the cache's (``kfsim.sim.codec``), a resident
    kernel's bytes counted 1/speedup so that a fitted class rate is the streaming one."""
    import compressors
    from compressors.cost import CLASSES, codec_cost
    from kfsim.sim.codec import reference_ops
    from kfsim.sim.exchange_cost import tensor_plan
    from kfsim import catalog
    cpu = catalog.get_device("cpu")   # the device whose cache the scattered accesses are priced against
    comp = compressors.parse(spec)
    shapes = [tuple(int(d) for d in s) for s in shapes]
    plan = tensor_plan(comp, shapes)
    by_class = dict.fromkeys(CLASSES, 0.0)
    ops = segments = 0.0
    for s, coded in zip(shapes, plan.coded):
        if not coded:
            continue
        cc = codec_cost(comp, s, "float32", reference_ops())
        for counts, share in ((cc.encode, None), (cc.decode_at(n), cc.decode_share(cpu.cache_bytes))):
            for cls, b in counts.class_bytes(cpu.cache_bytes, cpu.line_bytes, speedup, share).items():
                by_class[cls] += b
            ops += counts.n_ops
            segments += counts.segments
    return ProgramTotals(tuple(by_class[c] for c in CLASSES), ops, segments)


def fit_codec(rows) -> dict:
    """``[codec]`` table from rows (C seconds, bytes per class, N ops, spec[, T coded tensors[, S
    bucket segments]]): see :func:`step_costs`. With T in every row a per-call overhead t_call
    (seconds per coded tensor, ``call_overhead_us``) joins the unknowns, and with S too a
    per-segment overhead t_seg (``segment_overhead_ns``):
    C_i ≈ Σ_c B_ic · x_c + N_i · t_op + T_i · t_call + S_i · t_seg. Empty when nothing was measured."""
    import numpy as np
    from scipy.optimize import lsq_linear, nnls
    from compressors.cost import CLASSES
    if not rows:
        return {}
    c = np.array([r[0] for r in rows])
    B = np.array([r[1] for r in rows], dtype=np.float64)
    N = np.array([r[2] for r in rows], dtype=np.float64)
    calls = all(len(r) > 4 for r in rows)
    segs = calls and all(len(r) > 5 for r in rows)
    extra = np.stack([N] + [np.array([r[i] for r in rows], dtype=np.float64) for i in (4, 5)[:calls + segs]],
                     axis=1)
    f = np.array([_factor(cls) for cls in CLASSES])
    # stage 1: x_c = a · f_c, with t_op (and t_call)
    first, _ = nnls(np.hstack([(B @ f)[:, None], extra]) / c[:, None], np.ones(len(rows)))
    a, t0 = first[0], first[1:]
    if not a > 0:   # everything explained by the overheads: fall back to the device's bandwidth
        a = 1.0 / (5e9)
    prior = a * f
    # stage 2: per-class x_c and the overheads, ridge towards stage 1 (relative units), each class's
    # bandwidth kept within [1/SLOWER, FASTER] × stage 1's
    scale_t = np.maximum(t0, 1e-6)
    lam = np.sqrt(RIDGE)
    A = np.vstack([np.hstack([B, extra]) / c[:, None],
                   lam * np.diag(np.concatenate([1.0 / prior, 1.0 / scale_t]))])
    b = np.concatenate([np.ones(len(rows)), lam * np.ones(len(CLASSES)), lam * t0 / scale_t])
    lo = np.concatenate([prior / FASTER, np.zeros(len(t0))])
    hi = np.concatenate([prior * SLOWER, np.full(len(t0), np.inf)])
    sol = lsq_linear(A, b, bounds=(lo, hi)).x
    x = sol[:len(CLASSES)]
    out = {f"{cls.replace('/', '_')}_gbs": float(1.0 / x[i] / 1e9) for i, cls in enumerate(CLASSES)}
    out["op_overhead_us"] = float(sol[len(CLASSES)]) * 1e6
    if calls:
        out["call_overhead_us"] = float(sol[len(CLASSES) + 1]) * 1e6
    if segs:
        out["segment_overhead_ns"] = float(sol[len(CLASSES) + 2]) * 1e9
    out["source"] = (f"kfsim calibrate: C = Σ_class bytes/bw(class) + t_op·n_ops"
                     f"{' + t_call·n_tensors' if calls else ''}{' + t_seg·n_segments' if segs else ''} fitted over "
                     f"{', '.join(sorted({r[3] for r in rows}))}")
    return out


def _coded_bytes(spec: str, shapes) -> float:
    """fp32 bytes of the tensors the compressor actually codes (the simulator charges codecs on those)."""
    import compressors
    from kfsim.sim.exchange_cost import tensor_plan
    plan = tensor_plan(compressors.parse(spec), [tuple(s) for s in shapes])
    return float(max((plan.dense_bytes * plan.coded).sum(), 4.0))


def _compute_only(entry: dict, models: dict, mem_bw_gbs: float) -> float:
    """Measured step without communication, less the simulator's own optimizer term 28·N/mem_bw
    (the simulator adds it back), at the model's catalog batch."""
    m = models[entry["model"]]
    n = sum(_prod(s) for s in m["tensor_shapes"])
    t = entry["seconds"] * m["batch"] / entry["batch"] - 28.0 * n / (mem_bw_gbs * 1e9)
    return max(t, 1e-6)


def _prod(s) -> int:
    out = 1
    for d in s:
        out *= int(d)
    return out


def fit_table(fitted: dict) -> list[tuple]:
    """Rows (rate, p, α µs, β ns/B, γ ns/B, efficiency, median |err|, max |err|) for printing."""
    rows = []
    for (rate, p), f in sorted(fitted.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        rows.append((rate, "all" if p is None else p, f.alpha * 1e6, f.beta * 1e9, f.gamma * 1e9,
                     f.efficiency_at(rate * 1e6 / 8), f.median_abs_error, f.max_abs_error))
    return rows


def collective_fit_of(path_or_data, rate: float, p: int | None) -> CollectiveFit:
    data = path_or_data if isinstance(path_or_data, dict) else load_measurements(Path(path_or_data))
    return fits(data)[(rate, p)]
