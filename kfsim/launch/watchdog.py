"""A job dies with its launcher: parent-death signals and a worker-side watchdog.

The chain, when the ``kfsim`` launcher is killed (even by SIGKILL, which it
cannot handle):

* ``msrun`` is started through :func:`exec_argv`: a tiny Python that sets
  ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` and then execs msrun (the signal survives
  ``exec``; unlike a ``preexec_fn`` it needs no fork of this multi-threaded
  process): the kernel kills msrun when the launcher dies;
* every process msrun starts (the scheduler and each worker run
  ``kfsim/launch/worker.py``) calls :func:`arm` first thing: the same
  parent-death signal against msrun, and a daemon thread that polls the
  launcher's pid (:data:`PID_ENV`, its start time in :data:`START_ENV` so a
  reused pid is not mistaken for it) every :data:`POLL_S` and ends the process
  when the launcher is gone, a zombie, or replaced.

Linux only (``prctl`` via ctypes); elsewhere :func:`die_with_parent` does
nothing and the watchdog thread still works.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from pathlib import Path

PID_ENV = "KFSIM_LAUNCHER_PID"
START_ENV = "KFSIM_LAUNCHER_START"
POLL_S = 0.5
PR_SET_PDEATHSIG = 1
# argv: parent pid, program, args: die with the parent (already gone: exit 137), then become program
EXEC = ("import ctypes, os, sys; ctypes.CDLL(None).prctl(1, 9, 0, 0, 0); "
        "os.getppid() == int(sys.argv[1]) or os._exit(137); os.execv(sys.argv[2], sys.argv[2:])")


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies; True when set."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def exec_argv(argv: list[str]) -> list[str]:
    """``argv`` run so that it dies with this process (PR_SET_PDEATHSIG, then exec)."""
    return [sys.executable, "-c", EXEC, str(os.getpid()), *argv]


def start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot, /proc/<pid>/stat field 22), None if it
    is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def launcher_env() -> dict[str, str]:
    """What a launcher puts into its job's environment so that the job's watchdogs can find it."""
    pid = os.getpid()
    return {PID_ENV: str(pid), START_ENV: start_time(pid) or ""}


def alive(pid: int, started: str) -> bool:
    now = start_time(pid)
    return now is not None and (not started or now == started)


def arm(environ=os.environ) -> bool:
    """In a job's process: die with msrun (parent-death signal) and with the launcher (watchdog
    thread). Returns False when no launcher is named (a process started by hand)."""
    parent = os.getppid()
    die_with_parent()
    if os.getppid() != parent or parent == 1:  # msrun died before the signal was armed
        os._exit(137)
    pid = int(environ.get(PID_ENV) or 0)
    if pid <= 0:
        return False
    started = environ.get(START_ENV, "")

    def watch():
        while alive(pid, started):
            time.sleep(POLL_S)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="kfsim-launcher-watchdog", daemon=True).start()
    return True
