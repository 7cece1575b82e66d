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
from typing import Sequence

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
    skeys = {(c["p"], c["spec"], c["model"]) for c in steps}
    data["steps"] = [c for c in data.get("steps", []) if (c["p"], c["spec"], c["model"]) not in skeys] + list(steps)
    return data


def measure(rates_mbit: Sequence[float], workers: Sequence[int], sizes: Sequence[int], layers_list=(),
            batch: int = 64, repeats: int = 3, log_root: str | Path | None = None, log=print,
            specs: Sequence[str] = (), hidden: int = 1400, global_batch: int = 64):
    """Run the micro-benchmarks; returns (collective measurements, compute entries, model entries,
    step entries). ``specs``: compressors whose codec cost to measure on the launcher's ``wide``
    MLP — p independent one-worker jobs at once (the CPU contention of a p-rank job, no network),
    each spec and ``native``; codec = T(spec) − T(native)."""
    if not rates_mbit and not specs and not layers_list:
        raise ValueError("nothing to measure")
    if not workers:
        raise ValueError("need at least one worker count")
    if any(p < 2 for p in workers):
        raise ValueError(f"worker counts must be >= 2, got {list(workers)}")
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
                                  log_root=log_root, independent=True)
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
        scomp, codecs = step_costs(data, pc, mem_bw_gbs)
        comp.update(scomp)
        suffix = "" if p is None else f"-p{p}"
        pdata = profile_dict(name, rate, fit, max(ps), mem_bw_gbs=mem_bw_gbs, compute_s=comp, models=models,
                             codecs=codecs,
                             source=f"kfsim calibrate ({len(data['collectives'])} collective cells)")
        pdata["name"] += suffix
        path = Path(directory) / f"{pdata['name']}.toml"
        paths[(rate, p)] = write_profile(pdata, path)
    return paths


MIN_CODEC_S = 1e-5   # a measured codec cost at or below noise is stored as this


def step_costs(data: dict, p: int, mem_bw_gbs: float = 5.0) -> tuple[dict, dict]:
    """From the independent-job step times at p: compute per model (``native``, at the catalog batch,
    less 28·N/mem_bw) and codec throughputs per family {family: (enc B/s, dec B/s, None)}.

    A spec's codec time C = T(spec) − T(native) is charged to its families: a single-family spec
    takes all of C; for a combinator (``ef(topk(…))``) the inner family's own measurement is
    subtracted and the rest charged to the outer one. Throughput = dense gradient bytes / time,
    split evenly between encode and decode (only their sum is measured)."""
    from kfsim.sim.codec import families
    entries = [e for e in data.get("steps", []) if e["p"] == p]
    compute, per_family = {}, {}
    for model in sorted({e["model"] for e in entries}):
        es = {e["spec"]: e for e in entries if e["model"] == model}
        if "native" not in es:
            continue
        m = data["models"][model]
        dense = 4.0 * sum(_prod(s) for s in m["tensor_shapes"])
        base = es["native"]["seconds"]
        # measured at the per-worker batch B/p; the catalog batch is the global B
        compute[model] = max((base - 28.0 * dense / 4 / (mem_bw_gbs * 1e9)) * p, 1e-6)
        cost = {spec: max(e["seconds"] - base, MIN_CODEC_S) / _coded_bytes(spec, m["tensor_shapes"])
                for spec, e in es.items() if spec != "native"}
        for spec in sorted(cost, key=lambda sp: len(families(sp))):
            fams = [f for f in families(spec) if f not in ("True", "False")]
            known = sum(per_family[f] for f in fams[1:] if f in per_family)
            outer = fams[0] if fams else spec
            if outer not in per_family:
                per_family[outer] = max(cost[spec] - known, MIN_CODEC_S / dense)
    codecs = {f: (2.0 / c, 2.0 / c, None) for f, c in per_family.items()}
    return compute, codecs


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
