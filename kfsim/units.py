"""Quantities with explicit units, as the command line and config files write them.

* a **bandwidth** is a number and a rate unit: ``1Gbit/s``, ``100 Mbit/s``,
  ``2.5Gbps``, ``800kb/s`` (bits; prefixes k, M, G, T are powers of 1000) or
  ``12.5GB/s``, ``100MBps`` (bytes: x 8). :func:`bandwidth` returns bit/s.
* a **duration** is a number and a time unit: ``50us`` (also ``µs``), ``2ms``,
  ``1.5s``, ``500ns``, ``30min``, ``1h``. :func:`duration` returns seconds.

A bare number is an error ("1" Gbit/s or Mbit/s? µs or ms?), except where the
caller names the unit a bare number means (``duration("30", bare="s")``) and
for a zero duration. Case is ignored in the prefixes and in ``bit``/``bps``;
``B`` (bytes) vs ``b`` (bits) is the one case that matters.
"""
from __future__ import annotations

import math
import re

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_QUANTITY = re.compile(rf"^\s*({_NUMBER})\s*([^\s\d.+-][^\s]*)?\s*$")
_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_RATE = re.compile(r"^([kKmMgGtT]?)(bit/s|bits/s|bps|b/s|B/s|Bps|byte/s|bytes/s)$", re.IGNORECASE)
_TIME = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "min": 60.0, "h": 3600.0}
RATE_EXAMPLES = "e.g. 1Gbit/s, 100Mbit/s, 12.5GB/s"
TIME_EXAMPLES = "e.g. 50us, 2ms, 1.5s"


def _split(value: object, what: str) -> tuple[float, str]:
    if isinstance(value, bool):
        raise ValueError(f"{value!r}: not a {what}")
    if isinstance(value, (int, float)):
        return float(value), ""
    m = _QUANTITY.match(str(value))
    if not m:
        raise ValueError(f"{str(value)!r}: not a {what} (a number and a unit, "
                         f"{RATE_EXAMPLES if what == 'bandwidth' else TIME_EXAMPLES})")
    return float(m.group(1)), m.group(2) or ""


def bandwidth(value: object) -> float:
    """Bits per second of ``"1Gbit/s"``, ``"100Mbit/s"``, ``"12.5GB/s"`` (bytes) ...; must be > 0."""
    number, unit = _split(value, "bandwidth")
    if not unit:
        raise ValueError(f"{value!r}: a bandwidth needs a unit ({RATE_EXAMPLES})")
    m = _RATE.match(unit)
    if not m:
        raise ValueError(f"{str(value)!r}: unknown bandwidth unit {unit!r} ({RATE_EXAMPLES}; "
                         "b or bit = bits, B = bytes)")
    prefix, base = m.group(1).lower(), m.group(2)
    bits = number * _PREFIX[prefix] * (8.0 if base[0] == "B" or base.lower().startswith("byte") else 1.0)
    if not (bits > 0 and math.isfinite(bits)):
        raise ValueError(f"{str(value)!r}: a bandwidth must be > 0")
    return bits


def duration(value: object, bare: str | None = None) -> float:
    """Seconds of ``"50us"``, ``"2ms"``, ``"1.5s"`` ...; must be >= 0. ``bare``: the unit of a
    bare number (None: a bare number other than 0 is an error)."""
    number, unit = _split(value, "duration")
    if not unit:
        if bare is None and number != 0:
            raise ValueError(f"{value!r}: a duration needs a unit ({TIME_EXAMPLES})")
        unit = bare or "s"
    scale = _TIME.get(unit) or _TIME.get(unit.lower())
    if scale is None:
        raise ValueError(f"{str(value)!r}: unknown time unit {unit!r} (ns, us or µs, ms, s, min, h)")
    seconds = number * scale
    if not (seconds >= 0 and math.isfinite(seconds)):
        raise ValueError(f"{str(value)!r}: a duration must be >= 0")
    return seconds


def split_list(value: object) -> list:
    """``"a,b"`` or ``["a", "b,c"]`` -> ``["a", "b", "c"]`` (comma-separated lists, flattened)."""
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        if isinstance(item, str):
            out += [x.strip() for x in item.split(",") if x.strip()]
        else:
            out.append(item)
    return out


def format_bandwidth(bits_per_s: float) -> str:
    """``1e9`` -> ``"1Gbit/s"`` (the largest prefix that leaves a number >= 1)."""
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if bits_per_s >= scale:
            return f"{bits_per_s / scale:g}{prefix}bit/s"
    return f"{bits_per_s:g}bit/s"


def format_duration(seconds: float) -> str:
    """``5e-05`` -> ``"50us"``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:g}{unit}"
    return "0s" if seconds == 0 else f"{seconds / 1e-9:g}ns"
