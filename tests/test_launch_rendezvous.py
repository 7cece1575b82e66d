"""The file rendezvous that puts independent one-worker jobs in step (kfsim.launch.rendezvous)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kfsim.launch.rendezvous import RendezvousTimeout, arrive, parse

REPO = Path(__file__).resolve().parents[1]
ARRIVE = ("import sys, time; sys.path.insert(0, {repo!r}); from kfsim.launch.rendezvous import arrive; "
          "time.sleep({delay}); t = time.time(); arrive({d!r}, {n}, timeout_s=60); print(t, time.time())")


def test_nobody_leaves_before_the_last_arrives(tmp_path):
    d = tmp_path / "meet"
    delays = (0.0, 0.4, 0.8)
    procs = [subprocess.Popen([sys.executable, "-c", ARRIVE.format(repo=str(REPO), delay=dl, d=str(d), n=3)],
                              stdout=subprocess.PIPE, text=True) for dl in delays]
    outs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    arrived = [float(o[0]) for o in outs]
    left = [float(o[1]) for o in outs]
    last = max(arrived)
    assert min(left) >= last, (arrived, left)
    assert max(left) - min(left) < 0.3, left          # released together, not one by one
    assert sorted(f.name for f in d.iterdir()) == sorted(f"{p.pid}.arrived" for p in procs)


def test_a_missing_process_is_a_timeout_naming_how_many_came(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(RendezvousTimeout, match=r"1 of 2 processes arrived in 0.3 s"):
        arrive(tmp_path / "meet", 2, timeout_s=0.3)
    assert time.monotonic() - t0 < 5


def test_one_process_passes_at_once(tmp_path):
    assert arrive(tmp_path / "meet", 1, timeout_s=0.0) < 0.1


@pytest.mark.parametrize("spec, want", [("/tmp/x:2", ("/tmp/x", 2)), ("C:/odd:dir:4", ("C:/odd:dir", 4))])
def test_parse(spec, want):
    assert parse(spec) == want


@pytest.mark.parametrize("spec", ["/tmp/x", "/tmp/x:", ":3", "/tmp/x:0", "/tmp/x:-1", "/tmp/x:two"])
def test_parse_rejects(spec):
    with pytest.raises(ValueError, match="rendezvous must be DIR:N with N >= 1"):
        parse(spec)


def test_worker_rejects_a_bad_rendezvous_in_one_line(capsys):
    from kfsim.launch.worker import parse_args
    with pytest.raises(SystemExit) as e:
        parse_args(["--spec", "none()", "--run-dir", "/tmp/x", "--rendezvous", "nowhere"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "rendezvous must be DIR:N" in err[-1] and "Traceback" not in "\n".join(err)


def test_independent_jobs_are_told_to_meet_and_coupled_ones_are_not(tmp_path, monkeypatch):
    """run_steps passes --rendezvous DIR:p to p independent jobs (and clears DIR), never to one p-rank job."""
    from kfsim.testbed import compressed
    seen = []

    class Failed:
        ok, returncodes, timed_out = False, [1], False

    def fake_run_job(tb, script, args, **kw):
        seen.append((kw.get("independent"), list(args)))
        return Failed()

    monkeypatch.setattr(compressed, "run_job", fake_run_job)
    monkeypatch.setattr(compressed, "tail_logs", lambda res: "")

    class Tb:
        shape = None
    stale = tmp_path / "none___p3_0mbit_h64_indep" / "rendezvous"
    stale.mkdir(parents=True)
    (stale / "123.arrived").touch()          # left by an earlier run: must not count now
    for independent in (True, False):
        with pytest.raises(RuntimeError, match="training run"):
            compressed.run_steps(Tb(), 3, "none()", hidden=64, batch=6, steps=4, log_root=tmp_path,
                                 independent=independent)
    (ind, a_ind), (coup, a_coup) = seen
    assert ind and not coup
    i = a_ind.index("--rendezvous")
    assert a_ind[i + 1] == f"{stale}:3"
    assert not stale.exists()
    assert "--rendezvous" not in a_coup
    from kfsim.launch.host import share
    for a in (a_ind, a_coup):   # the 3 workers share this host's cores, coupled or not
        assert a[a.index("--op-threads") + 1] == str(share(3))
