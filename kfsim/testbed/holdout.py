"""Held-out validation: one physical fit on a calibration subset, predictions for every other cell.

The per-(rate, p) fits of :mod:`kfsim.testbed.calibrate` are in-sample. Here the mccl echo-ring
model (:mod:`kfsim.testbed.fit`) gets one parameter set shared by *every* cell:

* α — seconds per message (latency + per-message software cost), the same at every rate; its
  software part is CPU work, so when the p ranks share one host's ``cores`` (``host.cores`` in the
  measurements) a message costs α·max(1, p/cores) (:func:`host_share` against one rank per core);
* β(rate) = 1 / (e · rate) — the wire cost per byte follows the known tc rate through one fitted
  link efficiency e (the fraction of the shaped rate the echo ring reaches);
* γ — seconds per byte reduced, the same at every rate and p (a CPU cost, not a link cost);
* the token bucket of the testbed's ``tc tbf`` (:attr:`kfsim.testbed.netns.Shape.burst_bytes`,
  known, not fitted: max(32 KiB, rate/250), 500 kB at 1 Gbit/s) lets the first b bytes a rank
  sends after an idle gap pass unshaped, so the wire term is max(0, bytes − b)·β (``burst=True``).

T = x·(α, 1/e, γ) with x = (x_α, x_β / rate, x_γ) is linear, so the fit is the same exact
non-negative weighted least squares (:func:`kfsim.testbed.fit.nnls_relative`), run on the
calibration subset's collective cells only. Every other cell (other worker counts, other rates)
is then predicted: collectives by the closed form, training steps by the simulator from a profile
written with the shared fit (:func:`holdout_profiles`).

A subset is written ``p=2,rates=50,1000`` (:func:`parse_subset`): a token with ``=`` starts a key,
bare tokens add values to the key before them; ``;`` or spaces may also separate keys.
"""
from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np

from kfsim.testbed.fit import CollectiveFit, design, nnls_relative

DEFAULT_SUBSET = "p=2,rates=50,1000"


class Subset(NamedTuple):
    """Calibration cells: worker counts and link rates (Mbit/s); a cell is in it if both match."""

    workers: tuple[int, ...]
    rates_mbit: tuple[float, ...]

    def holds(self, rate_mbit: float, p: int) -> bool:
        return int(p) in self.workers and any(math.isclose(rate_mbit, r, rel_tol=1e-9) for r in self.rates_mbit)

    def __str__(self) -> str:
        return f"p={','.join(map(str, self.workers))},rates={','.join(f'{r:g}' for r in self.rates_mbit)}"


def parse_subset(text: str) -> Subset:
    """``p=2,rates=50,1000`` → Subset((2,), (50.0, 1000.0)). Rates are Mbit/s (a bare number) or
    carry a unit (``1Gbit/s``). Raises ValueError naming the problem."""
    from kfsim import units
    if not isinstance(text, str) or not text.strip():
        raise ValueError("--calibrate-on: empty; expected e.g. 'p=2,rates=50,1000'")
    values: dict[str, list[str]] = {}
    key = None
    for tok in text.replace(";", ",").replace(" ", ",").split(","):
        tok = tok.strip()
        if not tok:
            continue
        if "=" in tok:
            key, _, tok = (s.strip() for s in tok.partition("="))
            key = {"rate": "rates", "workers": "p"}.get(key, key)
            if key not in ("p", "rates"):
                raise ValueError(f"--calibrate-on: unknown key {key!r} (use p= and rates=)")
            if key in values:
                raise ValueError(f"--calibrate-on: {key}= given twice")
            values[key] = []
            if not tok:
                continue
        if key is None:
            raise ValueError(f"--calibrate-on: {tok!r} before any key (expected e.g. 'p=2,rates=50,1000')")
        values[key].append(tok)
    for k in ("p", "rates"):
        if not values.get(k):
            raise ValueError(f"--calibrate-on: {k}= needs at least one value, got {text!r}")
    try:
        ps = tuple(sorted({int(v) for v in values["p"]}))
    except ValueError:
        raise ValueError(f"--calibrate-on: p= takes integers, got {','.join(values['p'])!r}") from None
    if any(p < 2 for p in ps):
        raise ValueError(f"--calibrate-on: worker counts must be >= 2, got {list(ps)}")
    rates = []
    for v in values["rates"]:
        try:
            r = float(v) if _is_number(v) else units.bandwidth(v) / 1e6
        except ValueError:
            raise ValueError(f"--calibrate-on: rate {v!r} is not a bandwidth (Mbit/s or e.g. 1Gbit/s)") from None
        if not (math.isfinite(r) and r > 0):
            raise ValueError(f"--calibrate-on: rates must be > 0 Mbit/s, got {v!r}")
        rates.append(r)
    return Subset(ps, tuple(sorted(set(rates))))


def _is_number(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


class PhysicalFit(NamedTuple):
    """α (s/message), e (link efficiency), γ (s/byte reduced), shared by every cell; fitted on ``cells``."""

    alpha: float          # with a core per rank; :meth:`alpha_at` p ranks on ``cores``
    efficiency: float
    gamma: float
    cells: int
    burst: bool = True
    cores: int | None = None   # the host's cores the measured ranks shared (None: α not scaled)

    def beta(self, rate_mbit: float) -> float:
        return 1.0 / (self.efficiency * rate_mbit * 1e6 / 8)

    def alpha_at(self, p: int) -> float:
        """α of p ranks sharing the host's cores: α·max(1, p/cores)."""
        return self.alpha * host_share(p, 1, self.cores)

    def at(self, rate_mbit: float, p: int = 1) -> CollectiveFit:
        """The fit the profile of (rate, p) and the simulator take (β from the rate, α at p)."""
        return CollectiveFit(self.alpha_at(p), self.beta(rate_mbit), self.gamma, np.zeros(0), self.cells)

    def predict(self, op: str, rate_mbit: float, p, nbytes) -> np.ndarray:
        x = physical_design(op, rate_mbit, p, nbytes, self.burst, self.cores)
        return x @ np.array([self.alpha, 1.0 / self.efficiency, self.gamma])


def burst_bytes(rate_mbit: float) -> float:
    """The testbed's tbf bucket at ``rate_mbit`` (bytes)."""
    from kfsim.testbed.netns import Shape
    return float(Shape(float(rate_mbit)).burst_bytes)


def physical_design(op: str, rate_mbit: float, p, nbytes, burst: bool = False, cores: int | None = None) -> np.ndarray:
    """Rows x with T = x·(α, 1/e, γ): the echo-ring design with the β column (bytes a rank sends)
    less the tbf bucket (``burst``), floored at 0, divided by the rate in bytes/s; with ``cores``,
    the α column (messages) counts max(1, p/cores) per message (p ranks sharing the host's cores)."""
    x = design(op, p, nbytes).copy()
    wire = x[..., 1] - (burst_bytes(rate_mbit) if burst else 0.0)
    x[..., 1] = np.maximum(wire, 0.0) / (float(rate_mbit) * 1e6 / 8)
    x[..., 0] *= host_share(p, 1, cores)
    return x


def fit_physical(cells: Sequence[dict], weighting: str = "sqrt", burst: bool = True,
                 cores: int | None = None) -> PhysicalFit:
    """Fit (α, e, γ) to collective cells (dicts with rate_mbit, op, p, nbytes, seconds); ``cores``:
    the host's cores the ranks shared (α is then per message with a core per rank)."""
    cells = list(cells)
    if not cells:
        raise ValueError("no collective cells in the calibration subset")
    X = np.stack([physical_design(c["op"], c["rate_mbit"], c["p"], c["nbytes"], burst, cores) for c in cells])
    t = np.array([c["seconds"] for c in cells], dtype=np.float64)
    a, inv_e, g = nnls_relative(X, t, weighting)
    if not inv_e > 0:
        raise ValueError("the calibration cells fix no per-byte cost (need sizes large enough to be bandwidth-bound)")
    return PhysicalFit(float(a), float(1.0 / inv_e), float(g), len(cells), burst, cores)


def host_cores(data: dict) -> int | None:
    """The cores of the host the measurements ran on (``host.cores``, written by ``kfsim calibrate``)."""
    return data.get("host", {}).get("cores")


class Row(NamedTuple):
    kind: str             # allreduce / allgather / none (native step) / a compressor spec
    detail: str           # size or model
    rate_mbit: float
    p: int
    predicted_s: float
    measured_s: float
    in_sample: bool

    @property
    def rel_error(self) -> float:
        return (self.predicted_s - self.measured_s) / self.measured_s

    @property
    def group(self) -> str:
        what = "collective" if self.kind in ("allreduce", "allgather") else "step"
        return f"{what} {'in-sample' if self.in_sample else 'held-out'}"


def collective_rows(data: dict, subset: Subset, fit: PhysicalFit) -> list[Row]:
    """Every stored collective cell, predicted from the shared fit."""
    return [Row(c["op"], _size(c["nbytes"]), float(c["rate_mbit"]), int(c["p"]),
                float(fit.predict(c["op"], c["rate_mbit"], c["p"], c["nbytes"])), float(c["seconds"]),
                subset.holds(c["rate_mbit"], c["p"]))
            for c in sorted(data["collectives"], key=lambda c: (c["p"], c["rate_mbit"], c["op"], c["nbytes"]))]


def _size(nbytes: float) -> str:
    return f"{nbytes / 2**20:g} MiB" if nbytes >= 2**20 else f"{nbytes / 1024:g} KiB"


def calibration_cells(data: dict, subset: Subset) -> list[dict]:
    return [c for c in data["collectives"] if subset.holds(c["rate_mbit"], c["p"])]


LOCAL_COSTS = ("calibration", "each-p")


def local_cost_workers(data: dict, subset: Subset, p: int, local_costs: str) -> int:
    """The worker count whose no-network jobs give the profile at p its compute and codec costs.
    (A subset p without such jobs, e.g. a collectives-only ``calibrate --workers 3``, is skipped.)"""
    have = sorted({int(e["p"]) for e in data.get("steps", []) if e.get("spec") == "native"})
    if local_costs == "each-p":
        if p not in have:
            raise ValueError(f"--local-costs each-p: no independent-job steps at p={p} "
                             f"(stored at p={have or 'none'}; run `kfsim calibrate -c SPEC --workers {p}`)")
        return p
    usable = [q for q in subset.workers if q in have]
    if not usable:
        raise ValueError(f"no independent-job steps at any calibration p={list(subset.workers)} "
                         f"(stored at p={have or 'none'}; run `kfsim calibrate -c SPEC`) to take compute and "
                         "codec costs from")
    return max(usable)


def host_share(p, pc, cores: int | None):
    """How much slower each worker's local work runs at p than at pc when all p workers share one
    host's ``cores`` (processor sharing: a worker, one kernel thread since 2026-12-06, gets
    min(1, cores / p) of a core); 1 when ``cores`` is unknown. A float, or an array for array p."""
    if not cores:
        return 1.0
    f = np.maximum(1.0, np.asarray(p, dtype=np.float64) / cores) / max(1.0, pc / cores)
    return float(f) if f.ndim == 0 else f


def _shared(comp: dict, codec: dict, mem_bw_gbs: float, f: float) -> tuple[dict, dict, float]:
    """Compute, codec constants and memory bandwidth f times slower."""
    if f == 1.0:
        return comp, codec, mem_bw_gbs
    slow = {k: (v / f if k.endswith("_gbs") else v * f if k.endswith("_us") or k.endswith("_ns") else v)
            for k, v in codec.items()}
    return {m: t * f for m, t in comp.items()}, slow, mem_bw_gbs / f


def holdout_profiles(data: dict, subset: Subset, fit: PhysicalFit, rates: Sequence[float], workers: Sequence[int],
                     directory: str | Path, name: str = "holdout", local_costs: str = "calibration",
                     mem_bw_gbs: float = 5.0) -> dict:
    """Write ``<name>-<rate>mbit-p<p>.toml`` for every (rate, p): the shared α, e, γ; compute and
    codec constants from the no-network independent jobs (:func:`kfsim.testbed.calibrate.step_costs`)
    at the largest p of the calibration subset that has them (``calibration``: nothing measured at a
    held-out p is used) or at the profile's own p (``each-p``: CPU contention at p measured locally,
    network held out). Local costs taken at pc for p are made :func:`host_share` times slower when the
    measurements say how many cores their workers shared (``host.cores``, written by ``kfsim
    calibrate``). Raises ValueError naming the p when that p has no such jobs."""
    from kfsim.testbed.calibrate import step_costs
    from kfsim.testbed.profile import profile_dict, write_profile
    if local_costs not in LOCAL_COSTS:
        raise ValueError(f"local costs must be one of {LOCAL_COSTS}, got {local_costs!r}")
    models = list(data["models"].values())
    paths = {}
    cores = host_cores(data)
    for p in workers:
        pc = local_cost_workers(data, subset, p, local_costs)
        f = host_share(p, pc, cores)
        comp, codec, mem_bw = _shared(*step_costs(data, pc, mem_bw_gbs), mem_bw_gbs, f)
        share = f", x{f:g} for {p} workers on {cores} cores" if f != 1.0 else ""
        for rate in rates:
            pdata = profile_dict(name, rate, fit.at(rate, p), p, mem_bw_gbs=mem_bw, compute_s=comp, codec=codec,
                                 models=models, source=f"kfsim validate --calibrate-on {subset} "
                                                       f"(shared α, e, γ; local costs at p={pc}{share})")
            pdata["name"] += f"-p{p}"
            paths[(rate, p)] = write_profile(pdata, Path(directory) / f"{pdata['name']}.toml")
    return paths


def is_step_case(case: dict) -> bool:
    """A stored case that is a training step of kfsim.launch's wide MLP (the ones re-predicted)."""
    return str(case.get("detail", "")).startswith("wide-")


def step_rows(cases: Sequence[dict], subset: Subset, profiles: dict, global_batch: int = 64) -> list[Row]:
    """Measured training steps of kfsim.launch's worker (``validate --what compressed`` cases of the
    wide MLP), re-predicted from the hold-out profiles."""
    from kfsim.testbed.validate import predict_steps
    rows = []
    for c in cases:
        if not is_step_case(c):
            continue
        key = (float(c["rate_mbit"]), int(c["p"]))
        if key not in profiles:
            raise ValueError(f"no profile for {key[0]:g} Mbit/s, p={key[1]}")
        spec = "native" if c["kind"] == "none" else c["kind"]
        pred = predict_steps(profiles[key], int(c["detail"].split("-")[1]), key[1], spec, global_batch)
        rows.append(Row(c["kind"], c["detail"], key[0], key[1], float(pred), float(c["measured_s"]),
                        subset.holds(*key)))
    return sorted(rows, key=lambda r: (r.p, r.rate_mbit, r.kind))


class GroupSummary(NamedTuple):
    group: str
    n: int
    median_abs_error: float
    worst_abs_error: float


GROUP_ORDER = ("collective in-sample", "collective held-out", "step in-sample", "step held-out",
               "all in-sample", "all held-out")


def summarise(rows: Sequence[Row]) -> list[GroupSummary]:
    out = []
    for g in GROUP_ORDER:
        sel = [r for r in rows if (r.group == g if not g.startswith("all ") else r.group.endswith(g[4:]))]
        if sel:
            errs = [abs(r.rel_error) for r in sel]
            out.append(GroupSummary(g, len(sel), statistics.median(errs), max(errs)))
    return out


def per_cell_fits(data: dict, weighting: str = "sqrt", burst: bool = True) -> list[tuple[float, int, PhysicalFit]]:
    """Diagnostic: the same physical model fitted to each (rate, p) cell alone (stability of α, e, γ)."""
    keys = sorted({(float(c["rate_mbit"]), int(c["p"])) for c in data["collectives"]})
    out = []
    for rate, p in keys:
        cells = [c for c in data["collectives"] if float(c["rate_mbit"]) == rate and int(c["p"]) == p]
        try:
            out.append((rate, p, fit_physical(cells, weighting, burst)))
        except ValueError:
            continue
    return out
