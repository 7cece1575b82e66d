"""MindSpore's CPU kernel pool split between the ranks that share a host's cores.

With MindSpore's default pool every rank of a 2-rank job on this 2-core host
sized its pool for the whole machine; a PowerSGD step took 110.9 ms, with one
kernel thread per rank 72.3 ms (`benchmarks/bench_op_threads.py`).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import sys; sys.path.insert(0, {repo!r})
from mindspore._c_expression import RuntimeConf
from mindspore.device_context.cpu import op_tuning
{before}
from backends.mindspore.runtime import setup
setup("CPU", {threads})
print("configured", RuntimeConf.get_instance().is_op_threads_num_configured())
try:
    op_tuning.threads_num(5)
    print("settable")
except RuntimeError:
    print("set already")
"""


def _probe(threads, before=""):
    r = subprocess.run([sys.executable, "-c", PROBE.format(repo=str(REPO), threads=threads, before=before)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.split()


def test_setup_sizes_the_kernel_pool_only_when_asked():
    assert _probe(1)[-2:] == ["set", "already"]
    assert _probe(None)[-1] == "settable"          # MindSpore's default left alone


def test_a_pool_the_user_sized_first_is_kept():
    out = _probe(1, before="op_tuning.threads_num(3)")
    assert "configured" in out and out[-2:] == ["set", "already"]


@pytest.mark.parametrize("cores, workers, nodes, want", [
    (2, 2, 1, 1), (2, 1, 1, 2), (2, 4, 1, 1), (16, 4, 1, 4), (16, 8, 2, 4), (16, 3, 1, 5), (1, 1, 1, 1)])
def test_worker_default_splits_the_cores_between_its_host_s_ranks(monkeypatch, cores, workers, nodes, want):
    from kfsim.launch import worker
    monkeypatch.setenv("MS_WORKER_NUM", str(workers))
    from kfsim.launch import host
    monkeypatch.setattr(host.os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert worker.op_threads(nodes) == want


@pytest.mark.parametrize("bad", ["-1", "two", "1.5", ""])
def test_worker_rejects_a_bad_thread_count_in_one_line(capsys, bad):
    from kfsim.launch.worker import parse_args
    with pytest.raises(SystemExit) as e:
        parse_args(["--spec", "none()", "--run-dir", "/tmp/x", "--op-threads", bad])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"must be a whole number >= 0, got {bad!r}" in err and "Traceback" not in err


def test_worker_zero_threads_leaves_mindspore_s_default(monkeypatch):
    from kfsim.launch.worker import parse_args
    assert parse_args(["--spec", "none()", "--run-dir", "/tmp/x", "--op-threads", "0"]).op_threads == 0
    assert parse_args(["--spec", "none()", "--run-dir", "/tmp/x"]).op_threads is None


def test_testbed_workers_get_the_host_s_cores_split_p_ways(monkeypatch):
    from kfsim.launch import host
    monkeypatch.setattr(host.os, "sched_getaffinity", lambda pid: {0, 1})
    assert [host.share(p) for p in (1, 2, 3, 4)] == [2, 1, 1, 1] and host.cores() == 2
