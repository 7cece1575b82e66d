"""``kfsim launch --nodes 2``: two network namespaces as two machines, one ``kfsim launch`` each.

The namespaces come from :class:`kfsim.testbed.netns.Testbed` (``kfsim-w0`` 10.213.47.1,
``kfsim-w1`` 10.213.47.2, veths on a bridge in ``kfsim-hub``; removed on exit even when a
test fails). Node 0 (w0) runs the scheduler and rank 0, node 1 (w1) rank 1; the ranks
exchange gradients over the veths (the eth0 counters prove it), node 0 alone writes the
run record, whose steps carry both ranks' gathered parameter fingerprints; local SGD
runs across the two machines as the simulation says. Then the
network preflight inside a namespace: a master nobody routes to, and a node 0 started on
a machine that does not own ``--master-addr``, are one ``error:`` line before any process.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kfsim.testbed import counters, netns

KFSIM = str(Path(sys.executable).parent / "kfsim")
LOCK_WAIT_S = 600


@pytest.fixture(scope="module")
def two_nodes():
    ok, why = netns.available()
    if not ok:
        pytest.skip(f"two-node test needs network namespaces: {why}")
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:  # another module's testbed may hold the lock for a while: wait, then fail loudly
        tb = netns.Testbed(2)
        try:
            tb.__enter__()
            break
        except RuntimeError as exc:
            if "another kfsim testbed" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(2)
    try:
        yield tb
    finally:
        tb.__exit__(None, None, None)
    assert not netns.namespaces(), "namespaces left behind"


def _launch(tb, node: int, out: Path, *extra: str, steps: int = 3) -> subprocess.Popen:
    argv = [KFSIM, "launch", "--nodes", "2", "--node-rank", str(node), "--master-addr", tb.ip(0),
            "--workers", "2", "--steps", str(steps), "--fingerprint-every", "1",  # the default master port, 7118
            "--timeout", "3min", "--out", str(out), "--json", *extra]
    return subprocess.Popen(tb.exec_argv(node, argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _both(tb, tmp_path, extra, out="node", steps: int = 3):
    procs = [_launch(tb, i, tmp_path / f"{out}{i}", *extra(i), steps=steps) for i in range(2)]
    try:
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for i, (p, (_, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"node {i} failed (rc {p.returncode}):\n{err[-3000:]}"
    return outs


def test_two_nodes_train_one_job(two_nodes, tmp_path):
    from kfsim import records

    tb = two_nodes
    before = [counters.read_worker(i) for i in range(2)]
    outs = _both(tb, tmp_path, lambda i: ["--ckpt-dir", str(tmp_path / f"ck{i}"), "--ckpt-every", "1"])
    summary1 = json.loads(outs[1][0].splitlines()[-1])
    assert summary1["event"] == "summary" and summary1["node_rank"] == 1 and summary1["record"] is None

    rec = records.read(tmp_path / "node0" / "record.jsonl")
    assert rec.meta["workers"] == 2 and rec.meta["nodes"] == 2 and [s.step for s in rec.steps] == [0, 1, 2]
    for s in rec.steps:
        fps = s.extra["fingerprints"]
        assert len(fps) == 2 and len(fps[0]) == 16 and fps[0] == fps[1], (s.step, fps)
    assert len({s.extra["fingerprints"][0] for s in rec.steps}) == 3  # the parameters moved every step
    assert not (tmp_path / "node1" / "record.jsonl").exists()
    logs0, logs1 = tmp_path / "node0" / "logs", tmp_path / "node1" / "logs"
    assert (logs0 / "scheduler.log").exists() and (logs0 / "worker_0.log").exists()
    assert not (logs1 / "scheduler.log").exists() and (logs1 / "worker_1.log").exists()
    assert (logs1 / "hb.rank1").read_text() == "done" and not (logs1 / "hb.rank0").exists()
    # each rank's own digest (its node's fp.rank<r>) is what the gather brought to rank 0
    own = {r: (logs / f"fp.rank{r}").read_text().split() for r, logs in ((0, logs0), (1, logs1))}
    for r in (0, 1):
        assert own[r] == [x for s in rec.steps for x in (str(s.step + 1), s.extra["fingerprints"][r])], (r, own[r])
    assert (logs0 / "fp.rank1").read_text() == (logs1 / "fp.rank1").read_text()  # node 0's copy, compared there
    assert not (logs1 / "fp.rank0").exists()
    # the gradients crossed the "network": each node sent at least 3 steps' payloads over its eth0
    sent = [counters.read_worker(i).tx_bytes - before[i].tx_bytes for i in range(2)]
    assert min(sent) > 3 * rec.steps[0].bytes_sent, (sent, rec.steps[0].bytes_sent)

    # checkpoints: each machine's directory holds its own ranks' files and its own set manifest
    for i in range(2):
        ck = tmp_path / f"ck{i}"
        assert sorted(f.name for f in ck.glob("rank*.ckpt")) == [f"rank{i}.step{t}.ckpt" for t in (1, 2, 3)]
        manifest = json.loads((ck / "step2.node{}.set.json".format(i)).read_text())
        assert manifest["node"] == i and manifest["ranks"] == [i] and list(manifest["files"]) == [f"rank{i}.step2.ckpt"]
        assert json.loads((ck / "meta.json").read_text())["nodes"] == 2
    # a corrupt file on node 1 is refused there, before any process, in one line
    good = (tmp_path / "ck1" / "rank1.step1.ckpt").read_bytes()
    (tmp_path / "ck1" / "rank1.step1.ckpt").write_bytes(good[:-8] + bytes(8))
    r = subprocess.run(tb.exec_argv(1, [KFSIM, "launch", "--nodes", "2", "--node-rank", "1", "--master-addr", tb.ip(0),
                                        "--workers", "2", "--steps", "3", "--ckpt-dir", str(tmp_path / "ck1"),
                                        "--resume", "1", "--out", str(tmp_path / "bad")]),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "rank1.step1.ckpt is corrupt" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    # resuming both nodes from step 2 replays step 2 bit for bit (loss and both ranks' fingerprints)
    _both(tb, tmp_path, lambda i: ["--ckpt-dir", str(tmp_path / f"ck{i}"), "--resume", "2"], out="again")
    again = records.read(tmp_path / "again0" / "record.jsonl")
    assert [s.step for s in again.steps] == [2] and again.meta["resume_step"] == 2
    assert again.steps[0].loss == rec.steps[2].loss
    assert again.steps[0].extra["fingerprints"] == rec.steps[2].extra["fingerprints"]


def test_two_nodes_run_local_sgd(two_nodes, tmp_path):
    """Local SGD / DiLoCo across the two machines (H = 2, Nesterov outer step, EF top-k pseudo-gradients):
    node 0's record follows the simulation (losses, the exchange steps and their bytes), and both ranks'
    θ fingerprints agree at every step."""
    from compressors.outer import LocalSGD
    from kfsim import records
    from tests.mindspore.test_msrun import TOL
    from tests.mindspore.test_msrun_local import simulate

    spec, algo, steps = "ef(topk(ratio=0.01))", LocalSGD(local_steps=2, outer_lr=0.7, outer_momentum=0.9), 4
    _both(two_nodes, tmp_path, lambda i: ["-c", spec, "--local-steps", "2", "--outer-lr", "0.7",
                                          "--outer-momentum", "0.9"], steps=steps)
    rec = records.read(tmp_path / "node0" / "record.jsonl")
    sim = simulate(spec, algo, steps)
    assert rec.meta["nodes"] == 2 and rec.meta["local"] == dict(algo._asdict())
    assert max(abs(a.loss - b.loss) for a, b in zip(rec.steps, sim.steps)) < TOL[spec]
    assert [s.bytes_sent for s in rec.steps] == [s.bytes_sent for s in sim.steps]
    assert [s.step for s in rec.steps if s.bytes_sent] == [1, 3]
    for s in rec.steps:
        fps = s.extra["fingerprints"]
        assert len(fps) == 2 and fps[0] == fps[1], (s.step, fps)
    assert len({s.extra["fingerprints"][0] for s in rec.steps}) == 3  # θ moves at the outer steps (1, 3) only


DIE = ("import sys, time; from kfsim.launch import launch, LaunchError\n"
       "try:\n    launch('none()', workers=2, steps=50, log_dir={logs!r}, timeout_s=180, nodes=2, node_rank={node}, "
       "master_addr={addr!r}, extra_args=['--die-at', '2'])\n"
       "except LaunchError as e:\n    print(f'{{time.time():.3f}} ' + str(e).splitlines()[0]); sys.exit(1)\n")


def test_a_rank_dying_on_node_1_ends_node_0_within_seconds(two_nodes, tmp_path):
    """Rank 1 (node 1) exits with code 3 at step 2: node 1's launcher names it and tells node 0's
    over the launchers' link, which ends node 0's part at once (MindSpore's heartbeat alone: ~30 s)."""
    tb = two_nodes
    procs = [subprocess.Popen(tb.exec_argv(i, [sys.executable, "-c", DIE.format(logs=str(tmp_path / f"n{i}"), node=i,
                                                                               addr=tb.ip(0))]),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    try:
        outs = [p.communicate(timeout=240)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    lines = [o.strip().splitlines()[-1] for o in outs]
    assert [p.returncode for p in procs] == [1, 1], outs
    (t0, err0), (t1, err1) = ((float(ln.split(" ", 1)[0]), ln.split(" ", 1)[1]) for ln in lines)
    assert err1.startswith("rank 1 (pid ") and "exited with code 3" in err1, err1
    assert err0.startswith("node 1 failed: rank 1 (pid ") and "exited with code 3" in err0, err0
    assert "stopped responding" not in err0  # not the scheduler's heartbeat verdict
    assert t0 - t1 < 5.0, f"node 0 ended {t0 - t1:.1f} s after node 1 (the heartbeat takes ~30 s)"


@pytest.mark.parametrize("node,addr,message", [
    (1, "10.213.99.1", "error: master 10.213.99.1:29517 is unreachable from this machine"),
    (0, "10.213.47.2", "error: --master-addr 10.213.47.2 is not an address of this machine"),
    (1, "10.213.47.2", "is an address of this machine, so msrun would start a second scheduler"),
])
def test_network_preflight_is_one_error_line(two_nodes, tmp_path, node, addr, message):
    argv = [KFSIM, "launch", "--nodes", "2", "--node-rank", str(node), "--master-addr", addr,
            "--master-port", "29517", "--workers", "2", "--steps", "3", "--out", str(tmp_path)]
    r = subprocess.run(two_nodes.exec_argv(node, argv), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not netns.ns_pids(two_nodes.ns(node)), "a process was left in the namespace"


class _Started(Exception):
    pass


def test_launch_builds_each_nodes_msrun_command(tmp_path, monkeypatch):
    """``launch()`` runs msrun with this node's share and the shared scheduler address; no job."""
    from kfsim.launch import launch, nodes, supervise

    from kfsim.launch import nodelink
    monkeypatch.setattr(nodes, "check_network", lambda c: None)  # 10.0.0.1 is nobody's here
    monkeypatch.setattr(nodelink, "open_link", lambda c, log=None: None)  # nor can its link port be bound
    cmds = []

    def start(cmd, **popen):
        cmds.append(cmd)
        raise _Started

    monkeypatch.setattr(supervise, "start", start)
    for rank in (0, 1):
        with pytest.raises(_Started):
            launch("ef(topk(ratio=0.1))", workers=4, nodes=2, node_rank=rank, master_addr="10.0.0.1",
                   steps=3, log_dir=tmp_path / f"n{rank}")
    for rank, cmd in enumerate(cmds):
        i = cmd.index("--worker_num=4")
        assert cmd[i:i + 5] == ["--worker_num=4", "--local_worker_num=2", f"--node_rank={rank}",
                                "--master_addr=10.0.0.1", f"--master_port={nodes.DEFAULT_MASTER_PORT}"]
        assert cmd[cmd.index("--nodes") + 1] == "2" and cmd[cmd.index("--run-dir") + 1] == str(tmp_path / f"n{rank}")
