"""``kfsim launch --import FILE``: a user compressor reaches every msrun worker, no PYTHONPATH."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kfsim import records

USER = '''
import compressors as C
from compressors.registry import register


@register("usertopk")
def usertopk(ratio: float = 0.05):
    """top-k under another name: a compressor only this file defines."""
    return C.parse(f"topk(ratio={ratio})")
'''


@pytest.mark.msrun
@pytest.mark.slow
def test_launch_imports_a_user_file_in_every_worker(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "usercomp.py").write_text(USER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, "-P", "-c", "from kfsim.cli import main; main()", "launch", "--import", "mine/usercomp.py",
           "-c", "ef(usertopk(ratio=0.1))", "--workers", "2", "--steps", "2", "--global-batch", "32", "--quiet",
           "--out", "run", "--timeout", "10min"]
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rec = records.read(tmp_path / "run" / "record.jsonl")
    assert rec.source == "mindspore" and len(rec.steps) == 2
    assert rec.meta["compressor"] == "ef(usertopk(ratio=0.1))" and rec.meta["workers"] == 2
    assert all(s.bytes_sent > 0 for s in rec.steps)
