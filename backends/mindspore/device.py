"""Static device preflight: which host kernels a lowered graph would hold on a device.

A host kernel (``ops.Custom(func_type="pyfunc")``, ``backends.mindspore.runtime``)
runs on CPU only. :func:`host_kernels` lowers a compressor's init and step
programs for ``device`` with the real rule table, through a dry emitter that
writes the source lines but builds no MindSpore object (so it needs no
MindSpore and no accelerator), and lists the host kernels the rules asked for;
:func:`check_device` refuses, with one line naming the ops, the kernels and the
spec, a spec that cannot run on a device other than CPU. Lowered for GPU or
Ascend, fold_in, random bits, frexp/ldexp, float<->int bit casts and float64
top-k are native ops (``backends.mindspore.native``, ``rules_select``); what is
still host-only: ``scatter_add`` accumulating in bfloat16
(``scatter_add_bf16_prim``, rounding after every add in index order).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from backends.mindspore.emit import Emitter, emit
from backends.mindspore.exchange import trace_exchange, trace_init

DEVICES = ("CPU", "GPU", "Ascend")


class DryEmitter(Emitter):
    """An :class:`Emitter` that builds no MindSpore object and records host kernels instead
    of refusing them: ``self.host_kernels`` = [(op, kernel name), ...] in program order."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.host_kernels: list[tuple[str, str]] = []

    def prim(self, obj, hint: str = "p") -> str:
        return self._attr(None, hint)

    def prim_expr(self, src: str, hint: str = "p") -> str:
        return self._attr(src, hint)

    def const(self, value) -> str:
        return self._attr(np.asarray(value).dtype.name, "c")

    def host(self, factory, *args, op: str, hint: str = "host") -> str:
        self.host_kernels.append((op, factory.__name__))
        return self._attr(factory.__name__, hint)


def _parse(comp):
    import compressors
    return comp if isinstance(comp, compressors.Compressor) else compressors.parse(comp)


def traced_programs(comp, avals, n: int = 2) -> list:
    """[(program, outputs)] of ``comp``'s init and step (one worker of ``n``, collective
    communication): what the reducer lowers, traced without MindSpore."""
    comp = _parse(comp)
    who = f"compressor {comp.spec!r}"
    iprog, ileaves, _ = trace_init(comp, avals, who + " init")
    t = trace_exchange(comp, avals, n=n, ranks=[0], seed=0, comm="collective", who=who)
    return [(iprog, list(ileaves)), (t.prog, list(t.means[0]) + list(t.state_out[0]))]


def graph_kernels(programs, device: str, *, rng: str = "exact", who: str = "program") -> list[tuple[str, str]]:
    """Sorted distinct (op, host kernel) pairs the graphs of ``programs`` hold, lowered for ``device``."""
    found = set()
    for prog, outs in programs:
        em = DryEmitter(who, rng, 0, 0, device)
        emit(em, prog, outs)
        found.update(em.host_kernels)
    return sorted(found)


def host_kernels(comp, avals, device: str, *, rng: str = "exact", n: int = 2) -> list[tuple[str, str]]:
    """:func:`graph_kernels` of ``comp``'s :func:`traced_programs`."""
    comp = _parse(comp)
    return graph_kernels(traced_programs(comp, avals, n), device, rng=rng, who=f"compressor {comp.spec!r}")


def phase_kernels(comp, avals, device: str, *, rng: str = "exact", n: int = 2,
                  steps: Iterable[int] = (0,)) -> list[tuple[str, str]]:
    """:func:`host_kernels` over the distinct phases ``comp`` takes at ``steps`` (a schedule)."""
    comp = _parse(comp)
    seen, found = set(), set()
    for s in steps:
        phase = comp.phase_of(s)
        if phase not in seen:
            seen.add(phase)
            found.update(host_kernels(comp.step(s), avals, device, rng=rng, n=n))
    return sorted(found)


def check_device(comp, avals, device: str, *, rng: str = "exact", n: int = 2,
                 steps: Iterable[int] = (0,)) -> None:
    """ValueError (one line) if ``comp`` at any of ``steps`` (its phases) lowers to a graph
    holding a CPU-only host kernel while ``device`` is not CPU; checked before any worker starts."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "CPU":
        return
    comp = _parse(comp)
    bad = refusal(comp.spec, device, phase_kernels(comp, avals, device, rng=rng, n=n, steps=steps))
    if bad:
        raise ValueError(bad)


def refusal(spec: str, device: str, kernels) -> str | None:
    """The preflight's one line for ``spec`` whose graph for ``device`` holds ``kernels``; None if it may run."""
    if device == "CPU" or not kernels:
        return None
    what = ", ".join(f"{op} ({kernel})" for op, kernel in sorted(kernels))
    return (f"compressor {spec!r} cannot run on {device}: its lowered graph needs CPU-only host kernels for "
            f"{what}; use --device CPU or float32 gradients")
