"""Which index arrays of a traced codec program walk memory forward (``compressors.cost``).

A gather or scatter whose indices do not decrease moves each cache line once; one whose
indices are hashed, sampled or rank-ordered may miss on every access. :func:`ascending_vars`
follows the ascending outputs of ``top_k_abs``, ``nonzero`` and ``arange`` through the ops
that keep their order.
"""
from __future__ import annotations

import numpy as np

from compressors.program import Var, vars_of


def distinct(vs):
    """The traced arrays of ``vs``, each once, in order."""
    seen, out = set(), []
    for v in vs:
        if v.id not in seen:
            seen.add(v.id)
            out.append(v)
    return out


# Ops whose output 0 is an index array in ascending order, and ops that keep the order of their
# first argument (concatenate/stack, slices, sums and scaling have their own rules below).
ASCENDING = frozenset({"top_k_abs", "nonzero", "arange"})
KEEPS_ORDER = frozenset({"reshape", "astype", "bitcast"})
SCALED = frozenset({"mul", "floordiv", "rshift", "lshift"})   # by a non-negative scalar: order kept


def _scalar(a, nonnegative: bool = False) -> bool:
    """A Python number or a one-entry array (a known value, >= 0 if asked, for a constant)."""
    if isinstance(a, Var):
        if a.size > 1:
            return False
        return not nonnegative or (a.const is not None and bool(np.all(np.asarray(a.const) >= 0)))
    return isinstance(a, (int, float, np.number)) and (not nonnegative or a >= 0)


def ascending_vars(eqns, links=()) -> frozenset:
    """Ids of the index arrays of ``eqns`` known not to decrease: outputs of ``top_k_abs``,
    ``nonzero``, ``arange``; reshapes, casts, slices, concatenations of them (each part walked
    forward); sums of them and a scalar; their products, quotients and shifts by a non-negative
    scalar; and what a collective delivers of them (``links``: id sent, id received). Any other
    index arithmetic counts as scattered (the model's conservative side)."""
    received = {r: s for s, r in links}
    up: set = set()

    def ordered(v) -> bool:
        return isinstance(v, Var) and (v.id in up or received.get(v.id) in up)

    for e in eqns:
        vs = list(vars_of(e.args))
        if e.op in ASCENDING:
            keep = True
        elif e.op in ("concatenate", "stack"):
            keep = bool(vs) and all(ordered(v) for v in vs)
        elif e.op == "getitem":   # a slice walks forward unless its step is negative
            steps = [i.step for i in e.attrs.get("index", ()) if isinstance(i, slice)]
            keep = bool(vs) and ordered(vs[0]) and all(st is None or st > 0 for st in steps)
        elif e.op in KEEPS_ORDER:
            keep = bool(vs) and ordered(vs[0])
        elif e.op == "add":
            keep = any(ordered(a) for a in e.args) and all(ordered(a) or _scalar(a) for a in e.args)
        elif e.op == "sub":
            keep = len(e.args) == 2 and ordered(e.args[0]) and _scalar(e.args[1])
        elif e.op in SCALED:
            keep = len(e.args) == 2 and ordered(e.args[0]) and _scalar(e.args[1], nonnegative=True)
        else:
            keep = False
        if keep:
            up.add(e.outs[0].id)
    return frozenset(up | {r for r, s in received.items() if s in up})
