"""Real data-parallel jobs on MindSpore: ``msrun`` launcher, worker, checkpoints.

``launch(...)`` (``kfsim launch``) validates everything it can before any
process starts (spec, lowering, collective compatibility, checkpoint
metadata), then runs ``msrun`` in its own process group with a free master
port, watches per-rank heartbeats, and returns the run record (rank 0's, the
same JSON-Lines format the simulator writes).
"""
from kfsim.launch.launcher import LaunchError, LaunchResult, launch

__all__ = ["LaunchError", "LaunchResult", "launch"]
