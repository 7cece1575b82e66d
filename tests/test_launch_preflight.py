"""The launcher's pieces that need no MindSpore job: preflight checks, the death report, the
parent-death chain (kfsim.launch.preflight / supervise / watchdog) with plain Python processes."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kfsim.launch import preflight, supervise, watchdog
from kfsim.launch.launcher import LaunchError, msrun_path

ROOT = Path(__file__).resolve().parents[1]


def test_schedule_and_memory_checks():
    preflight.check_schedule(20, 19)
    with pytest.raises(ValueError, match="resume step 20 must be < steps 20"):
        preflight.check_schedule(20, 20)
    with pytest.raises(ValueError, match="resume step 300 must be < steps 30"):
        preflight.check_schedule(30, 300)
    with pytest.raises(ValueError, match=">= 0"):
        preflight.check_schedule(30, -1)
    gib = preflight.GIB
    preflight.check_memory(2, gib, available=3 * gib)  # 2 + 0.5 scheduler <= 3
    with pytest.raises(ValueError, match=r"2 workers x 1.50 GiB each \+ 0.5 GiB scheduler = 3.50 GiB do not fit "
                                         r"the 3.00 GiB"):
        preflight.check_memory(2, int(1.5 * gib), available=3 * gib)
    # the estimate grows with the model, and the machine reports some free memory
    small, wide = preflight.worker_bytes([((784, 10), "float32")]), preflight.worker_bytes([((4000, 2900), "float32")])
    assert preflight.RUNTIME_BYTES < small < wide and wide - small >= 8 * 4 * (4000 * 2900 - 7840)
    assert preflight.available_bytes() > 0


def test_data_and_writable_checks(tmp_path, monkeypatch):
    monkeypatch.setenv("KFSIM_FASHION_MNIST_DIR", str(tmp_path))
    with pytest.raises(ValueError, match=r"Fashion-MNIST train data missing: .*train-images-idx3-ubyte.gz"):
        preflight.check_data()
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz"):
        (tmp_path / name).write_bytes(b"\x1f\x8b rest")
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_text("not gzip")
    with pytest.raises(ValueError, match="test data corrupt: .*t10k-labels-idx1-ubyte.gz is not a gzip file"):
        preflight.check_data()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="record folder .*afile: exists and is not a directory"):
        preflight.check_writable(tmp_path / "afile", "record folder")
    with pytest.raises(ValueError, match="log folder /proc/kfsim-x: cannot write there"):
        preflight.check_writable(Path("/proc/kfsim-x"), "log folder")
    preflight.check_writable(tmp_path / "new" / "deeper", "ckpt_dir")
    assert (tmp_path / "new" / "deeper").is_dir() and not list((tmp_path / "new" / "deeper").iterdir())


def test_msrun_and_python_come_from_this_interpreter(tmp_path, monkeypatch):
    other = tmp_path / "otherenv"
    other.mkdir()
    fake = other / "msrun"
    fake.write_text("#!/usr/bin/some-other-python3\nprint('wrong msrun')\n")
    fake.chmod(0o755)
    lonely = tmp_path / "lonely" / "python3.11"  # an interpreter with no msrun and no `python` beside it
    lonely.parent.mkdir()
    lonely.symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(lonely))
    monkeypatch.setenv("PATH", f"{other}:/usr/bin:/bin")
    with pytest.raises(LaunchError, match=r"msrun not found beside .*lonely/python3.11 \(the one on PATH, "
                                          r".*otherenv/msrun, runs another interpreter\)"):
        msrun_path()
    fake.write_text(f"#!{lonely}\n")  # one of this interpreter's entry points is accepted
    assert msrun_path() == str(fake)
    monkeypatch.setenv("PATH", str(other))
    with pytest.raises(ValueError, match="msrun would start its workers with no python on PATH, not this"):
        preflight.check_interpreter()


def test_death_reports_name_signal_oom_and_log_line(tmp_path):
    log = tmp_path / "worker_1.log"
    log.write_text("step 3 ok\nTraceback (most recent call last):\n  File x\n"
                   "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 2.00 GiB\n\n")
    msg = supervise.explain("rank 1", 42, 1, log, 0, 0)
    assert msg == ("rank 1 (pid 42) exited with code 1: out of memory; worker_1.log: "
                   "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 2.00 GiB")
    log.write_text("step 3 ok\nstep 4 ok\n")
    assert supervise.explain("rank 0", 7, -9, log, 2, 3) == (
        "rank 0 (pid 7) was killed by SIGKILL (signal 9): out of memory (the kernel's OOM killer; "
        "this cgroup's oom_kill count rose 2 -> 3); worker_1.log: step 4 ok")
    plain = supervise.explain("rank 0", 7, -9, log, 2, 2)
    assert plain == "rank 0 (pid 7) was killed by SIGKILL (signal 9); worker_1.log: step 4 ok"
    assert "SIGSEGV (signal 11)" in supervise.explain("the scheduler", 5, -11, tmp_path / "none.log", None, None)
    assert supervise.explaining_line(tmp_path / "none.log") == "(no log)"
    assert supervise.MSRUN_EXIT.search("[ERROR] ME(1:2,3):x Worker process 4321 exit with exception. "
                                       "Error code: -9.").groups() == ("4321", "-9")


class _Exited:
    """An msrun that has exited with ``rc``."""
    pid = 0

    def __init__(self, rc: int):
        self.rc = rc

    def poll(self) -> int:
        return self.rc


def test_a_crash_after_every_rank_said_done_is_a_finished_job(tmp_path):
    """MindSpore 2.10 can segfault in its distributed teardown (CI: rank 1 of a two-node job,
    after its heartbeat said done): the job's work is complete, so watch() calls it finished and
    after_done() names the crash for the launcher's warning; a rank short of done still fails it."""
    (tmp_path / "hb.rank1").write_text("done")
    (tmp_path / "msrun.out").write_text(
        "[ERROR] ME(1:2,MainProcess):x Worker process 4321 exit with exception. Error code: -11.\n" * 2)
    (tmp_path / "worker_1.log").write_text("[INFO] step 2\n")
    assert supervise.watch(_Exited(1), tmp_path, [1], time.time(), 60, 60) is None
    names = {4321: ("rank 1", tmp_path / "worker_1.log")}
    assert supervise.after_done(tmp_path, names) == (
        "rank 1 (pid 4321) was killed by SIGSEGV (signal 11); worker_1.log: [INFO] step 2")
    assert supervise.after_done(tmp_path / "none", names) == ""
    (tmp_path / "hb.rank1").write_text("2")
    msg = supervise.watch(_Exited(1), tmp_path, [1], time.time(), 60, 60)
    assert msg == "msrun exited with code 1; ranks not finished (last step): {1: '2'}"


def _gone(pid: int, within: float) -> bool:
    deadline = time.time() + within
    while time.time() < deadline:
        if watchdog.start_time(pid) is None:
            return True
        time.sleep(0.05)
    return False


# A "launcher" that starts a "msrun" (CHAIN: through supervise.start, with the parent-death
# signal; else plain Popen), which starts a job process that arms the watchdog; prints both pids.
LAUNCHER = textwrap.dedent("""
    import os, subprocess, sys, time
    sys.path.insert(0, {root!r})
    from kfsim.launch import supervise, watchdog
    job = "from kfsim.launch import watchdog; import time; watchdog.arm(); time.sleep(600)"
    msrun = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', sys.argv[1]]); "
             "print(p.pid, flush=True); time.sleep(600)")
    env = dict(os.environ, PYTHONPATH={root!r}, **watchdog.launcher_env())
    start = supervise.start if {chain} else subprocess.Popen
    m = start([sys.executable, "-c", msrun, job], env=env, stdout=subprocess.PIPE, text=True)
    child = m.stdout.readline().strip()
    print(m.pid, child, flush=True)
    time.sleep(600)
""")


@pytest.mark.parametrize("chain", [True, False], ids=["parent-death-signal", "watchdog-alone"])
def test_sigkill_of_the_launcher_ends_the_job(chain):
    """chain: launcher -SIGKILL-> msrun (PR_SET_PDEATHSIG) -SIGKILL-> job (its own PDEATHSIG);
    without the chain (msrun survives, as if started by anything else) the job's watchdog, polling
    the launcher's pid, still ends the job."""
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER.format(root=str(ROOT), chain=chain)],
                                stdout=subprocess.PIPE, text=True)
    try:
        msrun, job = map(int, launcher.stdout.readline().split())
        time.sleep(1.0)  # the job has armed (imports done)
        assert watchdog.start_time(job) is not None and watchdog.start_time(msrun) is not None
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait()
        assert _gone(job, 3.0), "the job outlived its launcher"
        assert _gone(msrun, 3.0) == chain  # only the parent-death signal takes the middle process down
    finally:
        for pid in (locals().get("msrun"), locals().get("job")):
            if pid and watchdog.start_time(pid) is not None:
                os.kill(pid, signal.SIGKILL)
        launcher.kill()
        launcher.wait()


def test_watchdog_ignores_a_reused_pid():
    assert watchdog.alive(os.getpid(), watchdog.start_time(os.getpid()))
    assert not watchdog.alive(os.getpid(), "1")  # same pid, another start time: another process
    code = "from kfsim.launch import watchdog; print(watchdog.arm({}))"  # no launcher named: nothing to watch
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          check=True).stdout.strip() == "False"


def test_kill_tree_sweeps_a_process_that_escaped_the_tree(tmp_path):
    """A process of the job outside msrun's tree and process group (a late fork in its own
    session) is found by the job's folder as a whole argument and killed; a process naming
    another folder with the same prefix, and this process, are left alone."""
    run_dir = str(tmp_path / "logs")
    sleeper = [sys.executable, "-c", "import time; time.sleep(300)"]
    msrun = supervise.start([*sleeper, f"--log_dir={run_dir}"])   # as the launcher starts msrun
    escaped = subprocess.Popen([*sleeper, "--run-dir", run_dir], start_new_session=True)
    other = subprocess.Popen([*sleeper, f"--log_dir={run_dir}2"], start_new_session=True)
    try:
        deadline = time.time() + 30
        while len(supervise.job_processes(run_dir)) < 2 and time.time() < deadline:
            time.sleep(0.05)
        assert sorted(supervise.job_processes(run_dir)) == sorted([msrun.pid, escaped.pid])
        assert escaped.pid not in supervise.descendants(msrun.pid)
        supervise.kill_tree(msrun, graceful=False, run_dir=run_dir)
        assert escaped.wait(timeout=10) == -signal.SIGKILL and msrun.returncode == -signal.SIGKILL
        assert other.poll() is None and supervise.job_processes(run_dir) == []
    finally:
        for p in (msrun, escaped, other):
            p.kill()
            p.wait()
