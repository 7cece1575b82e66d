"""A relative log folder (``--out cal``) reaches the testbed's workers as an
absolute path: run_job starts each in its own node folder, where a relative
``--run-dir`` or result folder pointed nowhere (the heartbeat write failed,
every ``calibrate -c``/``validate`` job died)."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kfsim.testbed import compressed, microbench, training


class Stop(Exception):
    pass


def test_every_path_handed_to_the_workers_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    seen = []

    def fake_run_job(tb, script, args=(), log_dir=None, env=None, **kw):
        seen.append((list(args), Path(log_dir), dict(env or {})))
        raise Stop

    tb = SimpleNamespace(shape=SimpleNamespace(rate_mbit=1000.0))
    for mod in (compressed, microbench, training):
        monkeypatch.setattr(mod, "run_job", fake_run_job)
    with pytest.raises(Stop):
        compressed.run_steps(tb, 2, "native", hidden=64, batch=8, log_root="rel")
    with pytest.raises(Stop):
        microbench.run_cell(tb, 2, [1024], log_root="rel")
    with pytest.raises(Stop):
        training.run_native(tb, 2, [4, 3, 2], 8, log_root="rel")
    args, _, _ = seen[0]
    for flag in ("--run-dir", "--record"):
        assert Path(args[args.index(flag) + 1]).is_absolute(), (flag, args)
    for key, (_, log_dir, env) in zip(("KFSIM_BENCH", "KFSIM_TRAIN"), seen[1:]):
        assert Path(json.loads(env[key])["out"]).is_absolute(), env
    assert all(log_dir.is_absolute() and log_dir.is_relative_to(tmp_path / "rel") for _, log_dir, _ in seen)
