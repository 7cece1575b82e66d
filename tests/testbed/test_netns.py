"""Namespaces, shaping, counters and teardown (root with ip/tc; skipped otherwise)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kfsim.testbed import counters
from kfsim.testbed.netns import HUB, PREFIX, Shape, Testbed, namespaces, shape_cmds, teardown


def _host_links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


def _assert_clean(before_links: str) -> None:
    assert namespaces(PREFIX) == []
    assert _host_links().count("\n") == before_links.count("\n")     # no veth/bridge leaked to the host
    assert "kfsim" not in _host_links()


def test_shape_validation_and_commands():
    with pytest.raises(ValueError):
        Shape(0)
    with pytest.raises(ValueError):
        Shape(10, latency_ms=-1)
    with pytest.raises(ValueError):
        Shape(10, loss_pct=100)
    cmds = shape_cmds("ns", "eth0", Shape(100, latency_ms=2, loss_pct=0.5))
    assert "tbf" in cmds[0] and "100000kbit" in cmds[0]
    assert "netem" in cmds[1] and "1000us" in cmds[1] and "0.5%" in cmds[1]
    assert len(shape_cmds("ns", "eth0", Shape(100))) == 1


def test_build_shape_count_teardown(root_testbed):
    before = _host_links()
    with Testbed(2, Shape(100)) as tb:
        assert set(namespaces()) == {HUB, "kfsim-w0", "kfsim-w1"}
        assert "tbf" in tb.qdiscs(0) and "100Mbit" in tb.qdiscs(0)
        if tb.supports_netem():
            tb.reshape(Shape(100, latency_ms=1))
            assert "netem" in tb.qdiscs(0)
        else:
            with pytest.raises(RuntimeError, match="no netem"):
                tb.reshape(Shape(100, latency_ms=1))
        tb.reshape(Shape(50))
        assert "netem" not in tb.qdiscs(0) and "50Mbit" in tb.qdiscs(0)
        # 4 MB over the 50 Mbit/s link: counted on the sender, rate respected
        srv = subprocess.Popen(tb.exec_argv(1, [sys.executable, "-c",
                               "import socket;s=socket.socket();s.bind(('10.213.47.2',5001));s.listen();"
                               "c,_=s.accept();n=0\nwhile True:\n b=c.recv(1<<20)\n if not b: break\n n+=len(b)\nprint(n)"]),
                               stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        c0 = counters.read_worker(0)
        t0 = time.monotonic()
        subprocess.run(tb.exec_argv(0, [sys.executable, "-c",
                       "import socket;s=socket.create_connection(('10.213.47.2',5001));s.sendall(b'x'*4000000);s.close()"]),
                       check=True, timeout=30)
        assert srv.communicate(timeout=30)[0].strip() == "4000000"
        dt = time.monotonic() - t0
        sent = (counters.read_worker(0) - c0).tx_bytes
        assert 4_000_000 <= sent <= 4_400_000          # payload + TCP/IP headers
        assert 4e6 * 8 / dt / 1e6 < 52                 # not faster than the shaped 50 Mbit/s
    _assert_clean(before)


def test_teardown_on_exception_and_stale_leftovers(root_testbed):
    before = _host_links()
    subprocess.run(["ip", "netns", "add", PREFIX + "w9"], check=True)       # a crashed run's leftover
    with pytest.raises(RuntimeError, match="boom"):
        with Testbed(1, Shape(10)):
            assert PREFIX + "w9" not in namespaces()
            raise RuntimeError("boom")
    _assert_clean(before)
    assert teardown() == []


def test_teardown_on_sigint_kills_processes(root_testbed, tmp_path):
    before = _host_links()
    script = tmp_path / "child.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "from kfsim.testbed.netns import Testbed, Shape\n"
        "with Testbed(2, Shape(10)) as tb:\n"
        "    subprocess.Popen(tb.exec_argv(0, ['sleep', '300']))\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(300)\n")
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    assert len(namespaces()) == 3
    child.send_signal(signal.SIGINT)
    child.wait(timeout=30)
    _assert_clean(before)
    assert subprocess.run(["pgrep", "-f", "^sleep 300$"], capture_output=True).stdout.strip() == b""


def test_lock_refuses_second_testbed(root_testbed):
    with Testbed(1, Shape(10)):
        with pytest.raises(RuntimeError, match="another kfsim testbed"):
            Testbed(1, Shape(10)).__enter__()
    assert namespaces() == []
