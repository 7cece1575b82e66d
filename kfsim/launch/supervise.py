"""Watch an ``msrun`` job and say truthfully why it ended.

* :func:`start` runs msrun in its own session with a parent-death signal
  (:mod:`kfsim.launch.watchdog`): the job dies with the launcher;
* :class:`Ranks` finds msrun's children (the scheduler and one process per
  rank, told apart by the ``MS_ROLE`` / ``RANK_ID`` msrun puts in their
  environment) and polls them every :data:`POLL_S`. When one disappears before
  its heartbeat says ``done``, the exit status msrun logs for it (``Worker
  process <pid> exit with exception. Error code: <c>``, within msrun's 1 s poll)
  names the signal or the exit code; a SIGKILL while the cgroup's ``oom_kill``
  counter rose is named as the kernel's out-of-memory killer, a log line such as
  ``MemoryError`` / ``Unable to allocate`` / ``bad_alloc`` as out of memory; the
  explaining line of the process's own log is quoted. MindSpore's own
  heartbeat would notice only after ~30 s;
* :func:`watch` is the launcher's loop: that, heartbeats (a rank idle for
  ``stall_s``), the job's timeout and msrun's own exit. A single-node job is
  done as soon as every rank has said ``done`` (its record and checkpoints are
  closed by then): the launcher ends what is left rather than wait ~5 s for
  MindSpore's teardown and its scheduler's 5 s poll of unregistering nodes;
* :func:`kill_tree` ends msrun and every process below it.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from kfsim.launch.watchdog import exec_argv, start_time

POLL_S = 0.2
REPORT_WAIT_S = 1.5    # how long to wait for msrun's line with a dead process's exit status
MSRUN_EXIT = re.compile(r"Worker process (\d+) exit with exception\. Error code: (-?\d+)")
OOM_LINE = re.compile(r"MemoryError|Unable to allocate|bad_alloc|[Oo]ut of memory|Cannot allocate memory|OOM")
EXPLAINS = re.compile(r"Error|Exception|error:|Killed|Abort|Traceback|Segmentation|FAIL", re.I)


def start(cmd: list[str], **popen) -> subprocess.Popen:
    """msrun in its own session (its process group is ours to kill), killed by the kernel
    when this process dies (``PR_SET_PDEATHSIG``, :func:`kfsim.launch.watchdog.exec_argv`)."""
    return subprocess.Popen(exec_argv(cmd), start_new_session=True, **popen)


def oom_kills() -> int | None:
    """The kernel's out-of-memory kills so far in this process's memory cgroup (v2
    ``memory.events``, v1 ``memory.oom_control``), None where it cannot be read."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    candidates = []
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        rel = path.lstrip("/")
        if ctrls == "":
            candidates += [Path("/sys/fs/cgroup", rel, "memory.events"), Path("/sys/fs/cgroup/memory.events")]
        elif "memory" in ctrls.split(","):
            candidates += [Path("/sys/fs/cgroup/memory", rel, "memory.oom_control"),
                           Path("/sys/fs/cgroup/memory/memory.oom_control")]
    for f in candidates:
        try:
            m = re.search(r"^oom_kill (\d+)$", f.read_text(), re.M)
        except OSError:
            continue
        if m:
            return int(m.group(1))
    return None


def explaining_line(log: Path) -> str:
    """The last line of ``log`` that looks like the reason (an error, an exception), else its last line."""
    try:
        lines = [l.strip() for l in log.read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        return "(no log)"
    for line in reversed(lines[-200:]):
        if OOM_LINE.search(line) or EXPLAINS.search(line):
            return line[:300]
    return lines[-1][:300] if lines else "(empty log)"


def explain(who: str, pid: int, code: int | None, log: Path, oom_before: int | None,
            oom_after: int | None) -> str:
    """One sentence: who died, by which signal or exit code, whether out of memory, and the log line."""
    if code is None:
        how = "exited (msrun reported no exit status)"
    elif code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        how = f"was killed by {name} (signal {-code})"
    else:
        how = f"exited with code {code}"
    line = explaining_line(log)
    if code == -signal.SIGKILL and None not in (oom_before, oom_after) and oom_after > oom_before:
        how += (f": out of memory (the kernel's OOM killer; this cgroup's oom_kill count rose "
                f"{oom_before} -> {oom_after})")
    elif OOM_LINE.search(line):
        how += ": out of memory"
    return f"{who} (pid {pid}) {how}; {log.name}: {line}"


def _stat(pid: int) -> tuple[int, str] | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[1]), fields[0]
    except (OSError, IndexError, ValueError):
        return None


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(kv.split("=", 1) for kv in raw.decode(errors="replace").split("\0") if "=" in kv)


class Ranks:
    """msrun's scheduler and rank processes, found and polled; :meth:`poll` names a dead one."""

    def __init__(self, proc: subprocess.Popen, log_dir: Path, workers, script: str):
        """``workers``: the rank count, or the ranks this node runs (multi-node: ``range(lo, hi)``)."""
        self.proc, self.log_dir, self.script = proc, Path(log_dir), script
        self.ids = rank_ids(workers)
        self.workers = len(self.ids)
        self.known: dict[int, tuple[str, Path, str]] = {}   # pid -> (who, log, start time)
        self.names: dict[int, tuple[str, Path]] = {}         # every pid seen -> (who, log)
        self.dead: dict[int, float] = {}                    # pid -> when first seen gone
        self.oom_before = oom_kills()
        self._scanned = 0.0

    def _discover(self) -> None:
        if len(self.known) > self.workers or time.time() - self._scanned < 0.5:
            return
        self._scanned = time.time()
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) in self.known:
                continue
            st = _stat(int(d.name))
            if st is None or st[0] != self.proc.pid:
                continue
            try:
                argv = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if self.script.encode() not in argv:
                continue  # msrun's `tail -f` of a log
            env = _environ(int(d.name))
            if env.get("MS_ROLE") == "MS_SCHED":
                who, log = "the scheduler", self.log_dir / "scheduler.log"
            elif env.get("RANK_ID", "").isdigit():
                who, log = f"rank {env['RANK_ID']}", self.log_dir / f"worker_{env['RANK_ID']}.log"
            else:
                continue
            started = start_time(int(d.name))
            if started is not None:
                self.known[int(d.name)] = (who, log, started)
                self.names[int(d.name)] = (who, log)

    def _finished(self, who: str) -> bool:
        if who == "the scheduler":
            return all(self._beat(r) == "done" for r in self.ids)
        return self._beat(int(who.split()[1])) == "done"

    def _beat(self, rank: int) -> str | None:
        try:
            return (self.log_dir / f"hb.rank{rank}").read_text()
        except OSError:
            return None

    def poll(self) -> str | None:
        """None while every process lives (or ended normally); else the one sentence."""
        self._discover()
        now = time.time()
        for pid, (who, log, started) in list(self.known.items()):
            if pid not in self.dead and start_time(pid) != started:
                self.dead[pid] = now
        for pid, since in list(self.dead.items()):
            who, log, _ = self.known[pid]
            code = self._reported(pid)
            if self._finished(who):  # its work is done; a crash in teardown is the launcher's warning
                del self.known[pid], self.dead[pid]
                continue
            if code is not None or now - since > REPORT_WAIT_S:
                return explain(who, pid, code, log, self.oom_before, oom_kills())
        return None

    def _reported(self, pid: int) -> int | None:
        try:
            text = (self.log_dir / "msrun.out").read_text(errors="replace")
        except OSError:
            return None
        for p, code in MSRUN_EXIT.findall(text):
            if int(p) == pid:
                return int(code)
        return None


def rank_ids(workers) -> list[int]:
    """``range(workers)`` for a count, else the given rank ids (one node's of a multi-node job)."""
    return list(range(workers)) if isinstance(workers, int) else list(workers)


def watch(proc, log_dir: Path, workers, t0: float, timeout_s: float, stall_s: float,
          ranks: Ranks | None = None, poll=None, early: bool = False) -> str | None:
    """Until the job ends: None when it finished, else why it failed (one sentence).
    ``workers``: the rank count, or this node's rank ids (their heartbeats are in ``log_dir``).
    ``early`` (a single-node job: its scheduler serves no other node): finished once every rank
    has said ``done``, without waiting for the processes to tear down."""
    while True:
        if poll is not None and (found := poll()):
            return found
        if ranks is not None and (found := ranks.poll()):
            return found
        rc = proc.poll()
        now = time.time()
        beats = {r: log_dir / f"hb.rank{r}" for r in rank_ids(workers)}
        done = all(p.exists() and p.read_text() == "done" for p in beats.values())
        if early and done:
            return None
        if rc is not None:
            if done:  # every rank closed its record and checkpoints: msrun's code is a teardown's
                return None
            if ranks is not None and (found := ranks.poll()):
                return found
            bad = {r: (p.read_text() if p.exists() else "not started") for r, p in beats.items()
                   if not (p.exists() and p.read_text() == "done")}
            return f"msrun exited with code {rc}; {culprit(log_dir)}ranks not finished (last step): {bad}"
        if now - t0 > timeout_s:
            return f"job exceeded its timeout of {timeout_s:.0f} s"
        for r, p in beats.items():
            if p.exists() and p.read_text() != "done" and now - p.stat().st_mtime > stall_s:
                return f"rank {r} made no progress for {stall_s:.0f} s (last step {p.read_text()})"
            if not p.exists() and now - t0 > stall_s + 120:
                return f"rank {r} never started"
        time.sleep(POLL_S)


def after_done(log_dir: Path, names: dict[int, tuple[str, Path]]) -> str:
    """The processes msrun reports dead with a non-zero status (``names``: pid -> (who, log)),
    for a job whose ranks had all said ``done``: "rank 1 (pid 9) was killed by SIGSEGV ...",
    joined by "; " ("" when none). MindSpore 2.10 can crash in its distributed teardown."""
    try:
        text = (log_dir / "msrun.out").read_text(errors="replace")
    except OSError:
        return ""
    found = []
    for pid, code in dict.fromkeys(MSRUN_EXIT.findall(text)):
        who, log = names.get(int(pid), ("a process of the job", log_dir / "msrun.out"))
        found.append(explain(who, int(pid), int(code), log, None, None))
    return "; ".join(found)


def culprit(log_dir: Path) -> str:
    """'rank r stopped responding; ' from the scheduler's log, when it says so."""
    log = log_dir / "scheduler.log"
    if log.exists():
        found = sorted(set(re.findall(r"The node: (\d+) is timed out", log.read_text(errors="replace"))))
        if found:
            return f"rank {', '.join(found)} stopped responding (exited or hung); "
    return ""


def descendants(pid: int) -> list[int]:
    """All processes below pid (msrun starts each worker in its own session, so
    killing msrun's process group alone would leave workers behind)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (st := _stat(int(d.name))) is not None:
            children.setdefault(st[0], []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(proc, graceful: bool = True, run_dir: str | None = None) -> None:
    """End msrun, its process group and every process it started: SIGTERM, up to 10 s, then
    SIGKILL (``graceful=False``: SIGKILL at once — a failed job has nothing left to save).
    With ``run_dir`` (the job's log folder), a last sweep kills every process that names it as
    an argument (:func:`job_processes`): one msrun forks after the tree was listed, in its own
    session, escaped both the list and the process group (seen once in CI)."""
    victims = descendants(proc.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL) if graceful else (signal.SIGKILL,):
        for pid in victims:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if sig == signal.SIGTERM:
            deadline = time.time() + 10
            while time.time() < deadline and any(start_time(p) is not None for p in victims):
                time.sleep(0.2)
    proc.wait()
    if run_dir is not None:
        deadline = time.time() + 10
        while (left := job_processes(run_dir)) and time.time() < deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)


def job_processes(run_dir: str) -> list[int]:
    """Live processes with ``run_dir`` as a whole argument (``X`` or ``--opt=X``: msrun's
    ``--log_dir``, the workers' ``--run-dir``), this process and its ancestors excepted."""
    mine, pid = set(), os.getpid()
    while pid > 1 and pid not in mine:
        mine.add(pid)
        pid = (_stat(pid) or (0, ""))[0]
    return [p for p in processes_with(run_dir, lambda a: a == run_dir or a.endswith("=" + run_dir))
            if p not in mine]


def processes_with(marker: str, match=None) -> dict[int, list[str]]:
    """Live processes whose command line mentions ``marker`` (a job's log folder names its msrun,
    scheduler and ranks), or has an argument ``match(arg)`` accepts: {pid: argv}."""
    match = match or (lambda a: marker in a)
    found = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                argv = (d / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if any(match(a) for a in argv) and start_time(int(d.name)) is not None:
                found[int(d.name)] = argv
    return found


def tail(log_dir: Path, lines: int = 15) -> str:
    parts = []
    for f in sorted(log_dir.glob("*.log")) + [log_dir / "msrun.out"]:
        if f.exists():
            txt = [l for l in f.read_text(errors="replace").splitlines() if l.strip()][-lines:]
            parts.append(f"--- {f.name}\n" + "\n".join(txt))
    return "\n".join(parts)
