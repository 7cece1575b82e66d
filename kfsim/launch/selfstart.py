"""Start a script under this interpreter's ``msrun`` (what ``examples/`` do when run plainly).

    if "MS_ROLE" in os.environ:      # a process msrun started
        return train(args)
    raise SystemExit(under_msrun(__file__, sys.argv[1:], workers=2))

The ranks' logs go to a fresh temporary folder and are printed after msrun
ends; msrun's workers start ``python`` from a PATH led by this interpreter's
folder, so they run in this environment. Returns msrun's exit status.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from kfsim.launch.launcher import REPO, free_port, interpreter_path, msrun_path


def under_msrun(script: str | Path, argv: list[str], workers: int = 2, timeout_s: float = 600,
                tail: int = 3000) -> int:
    """Run ``script argv`` as ``workers`` msrun ranks on this machine; print each rank's log tail."""
    if workers < 1:
        raise SystemExit(f"error: --workers must be >= 1, got {workers}")
    logs = Path(tempfile.mkdtemp(prefix="kfsim-example-"))
    env = dict(os.environ, GLOG_v="3", PATH=interpreter_path(),  # msrun starts `python`: this one
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    cmd = [msrun_path(), f"--worker_num={workers}", f"--local_worker_num={workers}",
           f"--master_port={free_port(workers)}", f"--log_dir={logs}", "--join=True",
           "--cluster_time_out=120", f"--tail_worker_log={workers}", str(script), *argv]
    code = subprocess.run(cmd, env=env, cwd=logs, start_new_session=True, timeout=timeout_s,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    for r in range(workers):
        log = logs / f"worker_{r}.log"
        print(log.read_text().strip()[-tail:] if log.exists() else f"(rank {r} wrote no log)")
    if code:
        print(f"msrun exited {code} (logs in {logs})")
    return code
