"""This host's CPU cores (the process's affinity, which taskset, cgroups and msrun's binding narrow) and the share of
them each of a job's ranks on this host gets.

One rule for the three places that split a host: the worker's default MindSpore kernel pool
(:func:`kfsim.launch.worker.op_threads`), the testbed's per-worker pool (:mod:`kfsim.testbed.compressed`,
:mod:`kfsim.testbed.training`) and the host size that ``kfsim calibrate`` records with local costs
(:func:`kfsim.testbed.holdout.host_share` scales by it).
"""
from __future__ import annotations

import os


def cores() -> int:
    """CPU cores this process may run on."""
    return max(1, len(os.sched_getaffinity(0)))


def share(ranks: int) -> int:
    """Cores each of ``ranks`` processes on this host gets: an equal whole share, at least one."""
    return max(1, cores() // max(1, int(ranks)))
