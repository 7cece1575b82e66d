"""Pure, backend-neutral gradient compressors.

A compressor is an immutable :class:`Compressor` (a multi-round exchange
protocol of pure functions written against ``compressors.ops.Ops``). Build
one with a factory (``topk(0.01)``) or a spec string
(``parse("ef(topk(ratio=0.01))")``).
"""
from compressors.core import Compressor, Keys, Law, Leaf, Round, make_keys
from compressors.exchange import exchange, roundtrip
from compressors.registry import describe, entries, parse, register

# Importing each module registers its compressors.
from compressors.identity import none
from compressors.cast import bf16, fp16
from compressors.topk import topk
from compressors.ef import ef, ef21

__all__ = [
    "Compressor", "Keys", "Law", "Leaf", "Round", "make_keys", "exchange", "roundtrip",
    "describe", "entries", "parse", "register",
    "none", "fp16", "bf16", "topk", "ef", "ef21",
]
