"""A file rendezvous for processes that share no communication group.

``kfsim calibrate`` prices compute and codec from p independent one-worker
jobs run at once, to see the CPU contention of a p-rank job without its
network. Started together, such jobs still do not step together: their graph
compilations end seconds apart, and a short job's timed steps then run while
its neighbour is compiling or already gone. Measured on this 2-core machine
(PowerSGD r4, p = 2): 57 ms a step without overlap, 105-139 ms while both jobs
step, 111-153 ms for the coupled 2-rank job. A p-rank job's ranks are in step
through their collectives; the worker (``--rendezvous DIR:N``) meets the other
jobs at :func:`arrive` before every step after its compiling first one, so that
every timed step runs under the contention it is meant to measure, a job that
finishes a step early waits as a rank at a collective would, and none runs its
last steps alone (met once after compiling, the jobs drifted apart again: at
p = 4 PowerSGD's kept steps went 308-702 ms, then 64-93 ms; the last steps of
p = 2 int8 ran alone at 45 ms against 63-71 ms before).
"""
from __future__ import annotations

import os
import time
from pathlib import Path


class RendezvousTimeout(RuntimeError):
    """Not all processes arrived in time."""


def arrive(directory: str | Path, count: int, timeout_s: float = 600.0, poll_s: float = 0.002) -> float:
    """Mark this process as arrived in ``directory`` and wait until ``count`` have; returns seconds waited.

    Each process creates one file named by its pid (the jobs share a pid namespace; network
    namespaces do not separate pids). Raises :class:`RendezvousTimeout` naming how many arrived."""
    if count < 1:
        raise ValueError(f"rendezvous count must be >= 1, got {count}")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{os.getpid()}.arrived").touch()
    t0 = time.monotonic()
    while True:
        here = sum(1 for f in d.iterdir() if f.suffix == ".arrived")
        if here >= count:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout_s:
            raise RendezvousTimeout(f"rendezvous {d}: {here} of {count} processes arrived in {timeout_s:g} s")
        time.sleep(poll_s)


def parse(spec: str) -> tuple[str, int]:
    """``DIR:N`` (a command-line argument) -> (DIR, N); the last colon splits."""
    d, sep, n = str(spec).rpartition(":")
    if not sep or not d or not n.isdigit() or int(n) < 1:
        raise ValueError(f"rendezvous must be DIR:N with N >= 1, got {spec!r}")
    return d, int(n)
