"""Measured compute times with their unit stated: per sample, or per iteration at a given batch.

A measurement is one of

* ``"81ms@8"`` / ``"0.081s@8"``: seconds of forward + backward for one iteration at batch 8;
* ``"10.1ms/sample"``: seconds per sample;

in a config file also ``{ seconds = 0.081, batch = 8 }`` or ``{ per_sample_s = 0.0101 }``; a
bare number is the legacy form, seconds per iteration at the model's catalog batch. Parsed
once here into ``(seconds, batch)`` (per sample: batch 1); the simulator scales it linearly
with the run's batch (:func:`kfsim.sim.compute.compute_time`).
"""
from __future__ import annotations

import re

_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
_FORM = re.compile(r"^\s*([0-9.eE+-]+)\s*(s|ms|us|µs)\s*(?:@\s*(?:batch\s*=?\s*)?([0-9+-]+)|/\s*sample)\s*$")

FORMS = "'<time>@<batch>' (e.g. 81ms@8) or '<time>/sample' (e.g. 10ms/sample); time in s, ms or us"


def parse_compute(text: str) -> tuple[float, int]:
    """``(seconds, batch)`` of a measurement string; ValueError naming the problem."""
    m = _FORM.match(str(text))
    if not m:
        raise ValueError(f"cannot read {text!r} as a measured compute time: expected {FORMS}")
    try:
        value = float(m.group(1)) * _UNITS[m.group(2)]
    except ValueError:
        raise ValueError(f"cannot read {text!r} as a measured compute time: {m.group(1)!r} is not a number") from None
    batch = 1 if m.group(3) is None else int(m.group(3))
    return check(value, batch)


def check(seconds: float, batch: int) -> tuple[float, int]:
    if not seconds > 0:
        raise ValueError(f"measured compute time must be > 0 s, got {seconds:g}")
    if batch < 1:
        raise ValueError(f"the batch a compute time was measured at must be >= 1, got {batch}")
    return float(seconds), int(batch)


def describe(seconds: float, batch: int | None) -> str:
    """The measurement in words, its unit explicit."""
    if batch is None:
        return f"{seconds * 1e3:.4g} ms per iteration at the model's catalog batch"
    if batch == 1:
        return f"{seconds * 1e3:.4g} ms per sample"
    return f"{seconds * 1e3:.4g} ms per iteration at batch {batch}"
