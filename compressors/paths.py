"""Per-tensor plans: a different compressor on each named tensor.

    C(x_t) = C_t(x_t)    if the plan names tensor t's path
             D(x_t)      otherwise (D: the default)

``paths(none(), 'w1', ef(topk(ratio=0.01)), 'w2', int8())`` sends ``w1``
top-k with error feedback, ``w2`` as int8 and every other tensor dense. A
path is the tensor's name in the gradient pytree as
``compressors.state.path_name`` writes it (dict keys, sequence indices and
field names joined with ``/``), so the state of tensor ``w1`` is named
``w1/...`` as with any compressor. The runner asks the compressor for each
leaf by path (``Compressor.at_path``), so every life — prototype, simulated
training, the simulator (``ModelProfile.tensor_names``) and the MindSpore
lowering — runs the same plan. ``Compressor.paths`` holds the table, with
the default under ``"*"``. Paths the tree does not have are not used;
``kfsim.plans.file`` checks a plan file's paths against the model.

A plan is a leaf-level choice, so it is the outermost compressor: wrap its
entries (``paths(none(), 'w', ef(topk(ratio=0.1)))``), not the plan.
"""
from __future__ import annotations

from compressors.core import Compressor, check
from compressors.registry import register


@register("paths", combinator=True, paper="per-tensor choice: CGX (Markov et al. 2022), Espresso (Wang et al. 2023)")
def paths(default: Compressor, *pairs) -> Compressor:
    """default on every tensor; on each tensor named in (path, compressor) pairs, that compressor."""
    check(isinstance(default, Compressor), f"paths: the default must be a compressor, got {default!r}")
    check(len(pairs) % 2 == 0, "paths: expects (path, compressor) pairs after the default, got an odd count")
    table = tuple(zip(pairs[0::2], pairs[1::2]))
    for path, comp in table:
        check(isinstance(path, str) and path not in ("", "*"),
              f"paths: a tensor path must be a non-empty string other than '*', got {path!r}")
        check(isinstance(comp, Compressor), f"paths: {path!r} needs a compressor, got {comp!r}")
    members = (default,) + tuple(c for _, c in table)
    nested = [c.spec for c in members if c.paths]
    if nested:
        raise ValueError(f"paths: a plan cannot contain another plan ({nested[0]})")
    names = [p for p, _ in table]
    dup = sorted({p for p in names if names.count(p) > 1})
    if dup:
        raise ValueError(f"paths: tensor path {dup[0]!r} is named twice")
    table = tuple(sorted(table, key=lambda pc: pc[0]))
    spec = "paths(" + ", ".join([default.spec] + [f"{p!r}, {c.spec}" for p, c in table]) + ")"
    scheduled = any(c.at is not None or c.phase is not None for c in members)

    def at(step: int) -> Compressor:
        return paths(default.step(step), *(v for p, c in table for v in (p, c.step(step))))

    def phase(step: int):
        return tuple(c.phase_of(step) for c in members)

    return Compressor(spec, default.for_leaf, at=at if scheduled else None, phase=phase if scheduled else None,
                      unbiased=all(c.unbiased for c in members), contractive=all(c.contractive for c in members),
                      doc="per-tensor plan", paths=(("*", default),) + table)
