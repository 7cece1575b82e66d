"""Encode/decode cost of compressors on the device: a per-family throughput model.

A compressor's encode (and decode) kernel is memory-bound on accelerators,
so its cost is modelled as *passes* over the fp32 gradient at the device's
memory bandwidth:  T_enc = n_dense · passes_enc / mem_bw,
T_dec = n_dense · passes_dec / mem_bw + n_received · passes_gather / mem_bw,
where n_received = p·m for gather-law rounds (each worker's payload is
decoded: the p·T_dec term of all-gather compressors). A spec's cost is the
sum over the names in it (``ef(topk(...))`` = EF's passes + top-k's).

The default pass counts below are *assumptions* (documented, not measured):
elementwise casts read 4 and write 2 bytes per element (1.5 passes);
quantizers need a norm/min-max pass, a quantize pass and a pack pass;
top-k selection on GPUs costs ≈ 10 passes (radix select), DGC's sampled
threshold ≈ 3; PowerSGD's two thin matmuls read M twice. A cluster profile
(``kfsim calibrate``) overrides any family with measured bytes/s
(:class:`~kfsim.catalog.cluster.Codec`).
"""
from __future__ import annotations

import ast
from typing import NamedTuple

# family: (encode passes, decode passes, passes per gathered byte received)
PASSES: dict[str, tuple[float, float, float]] = {
    "none": (0.0, 0.0, 0.0),
    "fp16": (1.5, 1.5, 0.0),
    "bf16": (1.5, 1.5, 0.0),
    "quantize": (3.0, 2.0, 2.0),
    "qsgd": (3.0, 2.0, 2.0),
    "terngrad": (3.0, 2.0, 2.0),
    "natural": (2.0, 2.0, 2.0),
    "randomk": (1.0, 1.0, 2.0),
    "topk": (10.0, 1.0, 2.0),
    "threshold": (2.0, 1.0, 2.0),
    "dgc": (3.0, 1.0, 2.0),
    "signsgd": (2.0, 1.0, 2.0),
    "signum": (3.0, 1.0, 2.0),
    "efsign": (2.0, 1.0, 2.0),
    "scaledsign": (2.0, 1.0, 2.0),
    "efsignsgd": (4.0, 2.0, 2.0),   # ef + scaled sign
    "int8": (3.0, 2.0, 2.0),
    "int4": (3.0, 2.0, 2.0),
    "onebit": (2.0, 1.0, 2.0),
    "powersgd": (5.0, 2.0, 0.0),    # two thin matmuls + orthogonalisation + built-in EF
    "ef": (2.0, 1.0, 0.0),
    "ef21": (2.0, 2.0, 0.0),
    "momentum": (1.0, 0.0, 0.0),
    "filter": (0.0, 0.0, 0.0),
    "warmup": (0.0, 0.0, 0.0),
}
UNKNOWN_PASSES = (3.0, 2.0, 2.0)  # families without an entry (user compressors)


class CodecCost(NamedTuple):
    """Seconds per dense byte (encode, decode) and per gathered byte received."""

    enc: float
    dec: float
    gather: float


def families(spec: str) -> list[str]:
    """Every compressor/combinator name in a spec string, outermost first."""
    try:
        tree = ast.parse(spec, mode="eval").body
    except SyntaxError:
        return [spec.split("(")[0]]
    return [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)] \
        + [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not _is_func(tree, n)
           and n.id not in ("True", "False", "None")]


def _is_func(tree, name_node) -> bool:
    return any(isinstance(c, ast.Call) and c.func is name_node for c in ast.walk(tree))


def codec_cost(spec: str, cluster) -> CodecCost:
    """Seconds per byte of the whole spec on ``cluster``'s device."""
    bw = cluster.device.mem_bw
    enc = dec = gat = 0.0
    for fam in families(spec):
        measured = cluster.codec(fam)
        if measured is not None:
            enc += 1.0 / measured.encode if measured.encode > 0 else 0.0
            dec += 1.0 / measured.decode if measured.decode > 0 else 0.0
            if measured.gather_decode:
                gat += 1.0 / measured.gather_decode
            continue
        pe, pd, pg = PASSES.get(fam, UNKNOWN_PASSES)
        enc += pe / bw
        dec += pd / bw
        gat += pg / bw
    return CodecCost(enc, dec, gat)
