"""Pure, backend-neutral gradient compressors.

A compressor is an immutable :class:`Compressor` (a multi-round exchange
protocol of pure functions written against ``compressors.ops.Ops``). Build
one with a factory (``compressors.topk(0.01)``) or a spec string
(``compressors.parse("ef(topk(ratio=0.01))")``); ``describe()`` lists them.
"""
import importlib as _importlib
import pkgutil as _pkgutil

from compressors.core import Compressor, Keys, Law, Leaf, Round, make_keys
from compressors.exchange import exchange, roundtrip
from compressors.registry import describe, entries, parse, register

# Infrastructure modules; every other module defines compressors and
# registers them when imported.
_INFRA = {"core", "exchange", "registry", "ops", "combinator", "protocol", "buckets", "state", "program", "cost",
          "quant", "signs", "traced", "tracing_ops", "kit", "outer", "communicators", "exchange_plan"}
for _mod in sorted(m.name for m in _pkgutil.iter_modules(__path__)):
    if _mod not in _INFRA and not _mod.startswith("_"):
        _importlib.import_module(f"compressors.{_mod}")

# Export every registered factory under its function name (compressors.topk, ...).
for _entry in entries():
    globals()[_entry.factory.__name__] = _entry.factory

__all__ = ["Compressor", "Keys", "Law", "Leaf", "Round", "make_keys", "exchange", "roundtrip",
           "describe", "entries", "parse", "register"] + [e.factory.__name__ for e in entries()]
