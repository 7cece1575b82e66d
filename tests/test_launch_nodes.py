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


@pytest.mark.parametrize("argv,message", [
    (["--nodes", "2", "--node-rank", "2", "--master-addr", "127.0.0.1"], "--node-rank must be in 0..1"),
    (["--nodes", "2", "--workers", "3", "--master-addr", "127.0.0.1", "--global-batch", "63"], "multiple of --nodes 2"),
    (["--nodes", "2"], "--nodes 2 needs --master-addr"),
    (["--nodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1"], "second scheduler"),
    (["--nodes", "2", "--master-addr", "nosuch.invalid"], "does not resolve"),
    (["--master-port", "7000"], "are for multi-node jobs"),
    (["--nodes", "2", "--master-addr", "127.0.0.1", "--ckpt-dir", "{d}/ck"], "single-node only"),
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
