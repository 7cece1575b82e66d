"""Real data-parallel jobs on MindSpore: ``msrun`` launcher, worker, checkpoints.

``launch(...)`` (``kfsim launch``) validates everything it can before any
process starts (spec, lowering, collective compatibility, checkpoint
metadata; :mod:`~kfsim.launch.preflight`: data, folders, memory, resume
step), then runs ``msrun`` in its own process group with a free master port,
watches the rank processes and their heartbeats (:mod:`~kfsim.launch.supervise`;
the job dies with the launcher, :mod:`~kfsim.launch.watchdog`), and returns
the run record (rank 0's, the same JSON-Lines format the simulator writes).
"""
from kfsim.launch.launcher import LaunchError, LaunchResult, launch

__all__ = ["LaunchError", "LaunchResult", "launch"]
