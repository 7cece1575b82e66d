"""How far a predicted speedup can be trusted: the validated error per regime.

``kfsim advise`` says a compressor *pays* only when its predicted speedup
clears the error the simulator showed on measured runs of the same regime.
The regime of a prediction is the term that dominates the compressed
iteration's time — ``network`` (exposed communication), ``codec``
(encode/decode) or ``compute`` — and it names the main uncertainty.

The validated errors come from the testbed's measured training steps
(``kfsim validate``'s ``validate.json``: native and compressed steps of the
launcher's worker at several link rates and worker counts), re-predicted
with the current model and profiles. For every compressed case with a
native case at the same rate, workers and model:

    s_pred = T_pred(native) / T_pred(compressed),  s_meas = T_meas(native) / T_meas(compressed)
    error  = |s_pred / s_meas − 1|

A regime's error is the worst such error among its cases (a regime without
validated cases takes the worst of all, and says so). A predicted speedup s
pays when s > 1 + error; the margin is s / (1 + error) − 1 (> 0: pays).
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import NamedTuple

REGIMES = ("network", "codec", "compute")
REPO = Path(__file__).resolve().parents[2]
DEFAULT_CASES = REPO / "profiles" / "validate" / "validate.json"
DEFAULT_PROFILES = REPO / "profiles"


class Margin(NamedTuple):
    regime: str          # network | codec | compute: the dominant term, the main uncertainty
    error: float         # validated relative error of a predicted speedup in this regime
    cases: int           # validated cases behind it (0: fell back to the worst of all regimes)

    def pays(self, speedup: float) -> bool:
        return speedup > 1.0 + self.error

    def margin(self, speedup: float) -> float:
        """speedup / (1 + error) − 1: how far the speedup clears the error (> 0: pays)."""
        return speedup / (1.0 + self.error) - 1.0


def regime(breakdown) -> str:
    """The dominant term of a predicted iteration (a :class:`kfsim.sim.pipeline.Breakdown`)."""
    terms = {"network": breakdown.exposed_comm_s, "codec": breakdown.codec_s, "compute": breakdown.compute_s}
    return max(REGIMES, key=lambda k: terms[k])


def _predict(profile: Path, hidden: int, p: int, spec: str, global_batch: int):
    from kfsim.sim.predict import predict_iteration
    from kfsim.testbed.compressed import wide_name
    from kfsim.testbed.profile import read_profile
    from kfsim.testbed.validate import worker_bucket_mb
    cl = read_profile(profile)
    return predict_iteration(wide_name(hidden), cl, spec, p, batch_per_worker=max(global_batch // p, 1),
                             overlap=False, bucket_mb=worker_bucket_mb(spec))


def speedup_errors(cases_path: str | Path = DEFAULT_CASES, profiles: str | Path = DEFAULT_PROFILES,
                   name: str = "testbed", global_batch: int = 64) -> list[tuple[str, str, float, int, float]]:
    """(regime, compressor, rate Mbit/s, workers, |s_pred / s_meas − 1|) per validated compressed case."""
    from kfsim.testbed.validate import profile_for
    try:
        raw = json.loads(Path(cases_path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"validated cases {cases_path} are unreadable ({exc})") from None
    native = {}
    for c in raw:
        if c.get("kind") == "none" and str(c.get("detail", "")).startswith("wide-"):
            native[(c["rate_mbit"], c["p"], c["detail"])] = c["measured_s"]   # the latest measurement
    out = []
    for c in raw:
        key = (c.get("rate_mbit"), c.get("p"), c.get("detail"))
        if c.get("kind") in ("none", "allreduce", "allgather") or key not in native:
            continue
        hidden = int(str(c["detail"]).split("-")[1])
        prof = profile_for(profiles, name, c["rate_mbit"], c["p"])
        comp = _predict(prof, hidden, c["p"], c["kind"], global_batch)
        base = _predict(prof, hidden, c["p"], "none", global_batch)
        s_pred = base.total_s / comp.total_s
        s_meas = native[key] / c["measured_s"]
        out.append((regime(comp), c["kind"], float(c["rate_mbit"]), int(c["p"]), abs(s_pred / s_meas - 1.0)))
    return out


@functools.lru_cache(maxsize=8)
def validated(cases_path: str = str(DEFAULT_CASES), profiles: str = str(DEFAULT_PROFILES),
              name: str = "testbed") -> dict[str, Margin]:
    """The validated :class:`Margin` of each regime."""
    errs = speedup_errors(cases_path, profiles, name)
    if not errs:
        raise ValueError(f"{cases_path} has no compressed case with a native one to compare")
    worst = max(e[-1] for e in errs)
    out = {}
    for r in REGIMES:
        mine = [e[-1] for e in errs if e[0] == r]
        out[r] = Margin(r, max(mine) if mine else worst, len(mine))
    return out


def describe(m: Margin) -> str:
    src = f"{m.cases} validated case{'s' if m.cases != 1 else ''}" if m.cases else \
        "no validated case in this regime: the worst of all"
    return f"±{m.error:.0%} ({m.regime}-bound; {src})"
