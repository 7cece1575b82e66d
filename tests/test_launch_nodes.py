"""Multi-node launch without a job (kfsim.launch.nodes): the node's ranks, bad combinations,
the msrun command each node runs, the network preflight on this machine's loopback, and the
CLI's one ``error:`` line before any process starts. The two-node job itself is
tests/mindspore/test_launch_multinode.py (two network namespaces)."""
from __future__ import annotations

import socket
import subprocess

import pytest
from typer.testing import CliRunner

import kfsim.cli as cli
import kfsim.cli.launch_cmd  # noqa: F401  (registers `kfsim launch`)
from kfsim.launch import nodes


def test_each_node_runs_its_share_of_the_ranks():
    c = [nodes.cluster(8, 4, r, "10.0.0.1") for r in range(4)]
    assert [list(n.ranks) for n in c] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert {n.local for n in c} == {2} and [n.has_rank0 for n in c] == [True, False, False, False]
    assert {n.master_port for n in c} == {nodes.DEFAULT_MASTER_PORT}  # agreed without talking
    assert nodes.cluster(2, 2, 1, "h", 29517).master_port == 29517
    one = nodes.cluster(3)
    assert (one.multi, one.local, list(one.ranks), one.has_rank0) == (False, 3, [0, 1, 2], True)


@pytest.mark.parametrize("args,message", [
    ((2, 2, 2, "h"), "--node-rank must be in 0..1 for --nodes 2, got 2"),
    ((2, 2, -1, "h"), "--node-rank must be in 0..1"),
    ((3, 2, 0, "h"), "--workers 3 (the total over all nodes) must be a multiple of --nodes 2"),
    ((1, 2, 0, "h"), "--workers 1 (the total over all nodes) must be a multiple of --nodes 2"),
    ((2, 2, 1, None), "--nodes 2 needs --master-addr"),
    ((2, 2, 1, ""), "--nodes 2 needs --master-addr"),
    ((2, 0, 0, None), "--nodes must be a positive int, got 0"),
    ((2, 1, 0, "h"), "--master-addr and --master-port are for multi-node jobs"),
    ((2, 1, 0, None, 7000), "--master-addr and --master-port are for multi-node jobs"),
    ((2, 2, 0, "h", 0), "--master-port must be in 1..65535, got 0"),
    ((2, 2, 0, "h", 65536), "--master-port must be in 1..65535"),
    ((2, 2, 0, "h", 8118), "--master-port 8118 collides with rank 0's mccl data ports"),
    ((4, 2, 0, "h", 8118 + 256 * 2 + 5), "collides with rank 2's mccl data ports"),
    ((2, 2, 0, "h", 8101), "--master-port 8101 collides with rank 0's mccl data ports (8118 + 256*rank; "
                           "the launchers' link takes port 8102)"),
    ((2, 2, 0, "h", 65535), "below 65535: the launchers' link uses the next port"),
])
def test_bad_combinations_are_refused(args, message):
    with pytest.raises(ValueError) as exc:
        nodes.cluster(*args)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_default_master_port_is_clear_of_every_data_port():
    assert nodes.data_port_clash(nodes.DEFAULT_MASTER_PORT, 1000) is None
    assert nodes.data_port_clash(8118, 1) == 0 and nodes.data_port_clash(8118 + 256 * 7, 8) == 7


def test_msrun_command_of_each_node(tmp_path):
    c0, c1 = (nodes.cluster(4, 2, r, "node0.example", 29517) for r in (0, 1))
    common = [f"--log_dir={tmp_path}", "--join=True", "--cluster_time_out=120", "--tail_worker_log=4"]
    assert nodes.msrun_argv("/v/bin/msrun", c0, tmp_path, None) == [
        "/v/bin/msrun", "--worker_num=4", "--local_worker_num=2", "--node_rank=0",
        "--master_addr=node0.example", "--master_port=29517", *common]
    assert nodes.msrun_argv("/v/bin/msrun", c1, tmp_path, None) == [
        "/v/bin/msrun", "--worker_num=4", "--local_worker_num=2", "--node_rank=1",
        "--master_addr=node0.example", "--master_port=29517", *common]
    # one node: as before, all ranks local, the launcher's free port, no address
    assert nodes.msrun_argv("msrun", nodes.cluster(2), tmp_path, 40001) == [
        "msrun", "--worker_num=2", "--local_worker_num=2", "--master_port=40001",
        f"--log_dir={tmp_path}", "--join=True", "--cluster_time_out=120", "--tail_worker_log=2"]


def test_network_preflight_on_this_machine():
    nodes.check_network(nodes.cluster(2))  # single node: nothing to check
    nodes.check_network(nodes.cluster(2, 2, 0, "127.0.0.1", 29517))  # ours, port free
    nodes.check_network(nodes.cluster(2, 2, 0, "localhost", 29517))  # a name resolves
    with pytest.raises(ValueError, match=r"--master-addr 'nosuch\.invalid' does not resolve"):
        nodes.check_network(nodes.cluster(2, 2, 0, "nosuch.invalid"))
    with pytest.raises(ValueError, match="not an address of this machine: node 0 runs the scheduler"):
        nodes.check_network(nodes.cluster(2, 2, 0, "192.0.2.77"))  # TEST-NET-1, never ours
    with pytest.raises(ValueError, match="would start a second scheduler here: node rank 1 must run on another"):
        nodes.check_network(nodes.cluster(2, 2, 1, "127.0.0.1"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ValueError, match=f"--master-port {port} on 127.0.0.1 is not free"):
            nodes.check_network(nodes.cluster(2, 2, 0, "127.0.0.1", port))
        if nodes.data_port_clash(port - 1, 2) is None:
            with pytest.raises(ValueError, match=rf"--master-port {port - 1} \+ 1 \(the launchers' link\), {port} "
                                                 "on 127.0.0.1 is not free"):
                nodes.check_network(nodes.cluster(2, 2, 0, "127.0.0.1", port - 1))



def test_a_link_port_in_time_wait_is_free():
    """An earlier job's link leaves its port in TIME_WAIT; the link's Listener binds it
    anyway (SO_REUSEADDR), so the preflight must not call it taken (it did, and a
    two-node test failed after the one before it in the same namespaces)."""
    from multiprocessing.connection import Client, Listener
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    if nodes.data_port_clash(port - 1, 2) is not None:
        pytest.skip("the port below is one of mccl's data ports")
    with Listener(("127.0.0.1", port), "AF_INET") as ls:
        client = Client(("127.0.0.1", port), "AF_INET")
        server = ls.accept()
        server.close()  # the accepting side closes first: its port is in TIME_WAIT
        client.close()
    with socket.socket() as strict:  # still held: a plain bind is refused
        with pytest.raises(OSError):
            strict.bind(("127.0.0.1", port))
    nodes.check_network(nodes.cluster(2, 2, 0, "127.0.0.1", port - 1))

@pytest.mark.parametrize("argv,message", [
    (["--nodes", "2", "--node-rank", "2", "--master-addr", "127.0.0.1"], "--node-rank must be in 0..1"),
    (["--nodes", "2", "--workers", "3", "--master-addr", "127.0.0.1", "--global-batch", "63"], "multiple of --nodes 2"),
    (["--nodes", "2"], "--nodes 2 needs --master-addr"),
    (["--nodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1"], "second scheduler"),
    (["--nodes", "2", "--master-addr", "nosuch.invalid"], "does not resolve"),
    (["--master-port", "7000"], "are for multi-node jobs"),
])
def test_cli_refuses_with_one_line_before_any_process(tmp_path, monkeypatch, argv, message):
    started = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a) or (_ for _ in ()).throw(AssertionError))
    argv = [a.replace("{d}", str(tmp_path)) for a in argv]
    r = CliRunner().invoke(cli.app, ["launch", "--out", str(tmp_path / "o"), *argv])
    err = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.exit_code == 2 and len(err) == 1 and err[0].startswith("error: ") and message in err[0], r.output
    assert "Traceback" not in r.output and not started
    assert not (tmp_path / "ck").exists() or not any((tmp_path / "ck").iterdir())


# ---------------------------------------------------------------- the launchers' link (kfsim.launch.nodelink)

def _free_port() -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                pass
    raise RuntimeError("no two free ports")


def _wait(link, timeout=5.0):
    import time
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if (found := link.poll()) is not None:
            return found
        time.sleep(0.02)
    return None


def _links(n_nodes=3):
    from kfsim.launch import nodelink
    port = _free_port()
    links = [nodelink.open_link(nodes.cluster(2 * n_nodes, n_nodes, r, "127.0.0.1", port)) for r in range(n_nodes)]
    import time
    end = time.monotonic() + 5
    while len(links[0].conns) < n_nodes - 1 and time.monotonic() < end:
        time.sleep(0.02)
    assert len(links[0].conns) == n_nodes - 1, "the other nodes did not connect"
    return links


def test_link_carries_a_failure_to_every_node_at_once():
    from kfsim.launch import nodelink
    assert nodelink.open_link(nodes.cluster(2)) is None  # one node: no link
    links = _links(3)
    try:
        links[2].finish("rank 5 (pid 77) was killed by SIGKILL (signal 9)")
        assert _wait(links[0]) == "node 2 failed: rank 5 (pid 77) was killed by SIGKILL (signal 9)"
        assert _wait(links[1]) == "node 2 failed: rank 5 (pid 77) was killed by SIGKILL (signal 9)"  # via node 0
        assert links[0].poll() is None and links[1].poll() is None  # said once
    finally:
        for link in links[:2]:
            link.finish("stopped")


def test_link_done_is_quiet_and_a_vanished_launcher_is_named():
    links = _links(3)
    try:
        links[1].finish(None)  # node 1's ranks finished
        from kfsim.launch import nodelink
        for conn in list(links[2].conns):  # node 2's launcher SIGKILLed: its socket closes without a word
            nodelink.hangup(conn)
        found = _wait(links[0])
        assert found == "node 2's launcher went away without finishing (killed, or its machine is down)", found
        assert _wait(links[0], 0.5) is None, "node 1's clean finish is not an error"
        links[0].finish("node 2's launcher went away")
    finally:
        links[0].finish(None)


def test_link_ignores_a_stranger_and_node0_failing_reaches_the_others():
    from multiprocessing.connection import Client
    links = _links(2)
    try:
        port = links[0].c.master_port + 1
        with pytest.raises(Exception):  # another job's launcher (another key) is turned away
            Client(("127.0.0.1", port), "AF_INET", authkey=b"other job")
        with socket.create_connection(("127.0.0.1", port)) as s:  # a port scan: connect, send junk, leave
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        links[0].finish("rank 0 exited with code 1")
        assert _wait(links[1]) == "node 0 failed: rank 0 exited with code 1"
    finally:
        links[1].finish(None)


def test_link_port_taken_is_one_line():
    from kfsim.launch import nodelink
    port = _free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port + 1))
        busy.listen()
        with pytest.raises(ValueError, match=f"link port {port + 1} on 127.0.0.1 is not free"):
            nodelink.open_link(nodes.cluster(2, 2, 0, "127.0.0.1", port))
