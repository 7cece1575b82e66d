"""Checkpoint sealing, set manifests, fresh-directory refusal and replica fingerprints (no msrun)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kfsim.launch import integrity as I


def _ckpts(d, workers=2, step=4):
    d.mkdir(exist_ok=True)
    for r in range(workers):
        f = d / I.ckpt_name(r, step)
        f.write_bytes(bytes(range(256)) * (r + 1))
        I.seal(f)
    return d


def test_sealed_set_verifies_and_names_what_breaks(tmp_path):
    d = _ckpts(tmp_path / "ck")
    assert I.write_sets(d, 2) == [4]
    manifest = json.loads((d / "step4.set.json").read_text())
    assert set(manifest["files"]) == {"rank0.step4.ckpt", "rank1.step4.ckpt"}
    I.verify(d, 4, 2)
    with pytest.raises(ValueError, match=r"rank2\.step4\.ckpt is missing"):
        I.verify(d, 4, 3)
    raw = bytearray((d / "rank1.step4.ckpt").read_bytes())
    raw[7] ^= 1
    (d / "rank1.step4.ckpt").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"rank1\.step4\.ckpt is corrupt"):
        I.verify(d, 4, 2)


def test_unsealed_file_is_an_interrupted_save(tmp_path):
    d = _ckpts(tmp_path / "ck")
    (d / "rank0.step4.ckpt.sha256").unlink()
    with pytest.raises(ValueError, match="interrupted"):
        I.verify(d, 4, 2)
    assert I.write_sets(d, 2) == []


def test_replaced_file_with_its_own_seal_fails_the_set(tmp_path):
    d = _ckpts(tmp_path / "ck")
    I.write_sets(d, 2)
    (d / "rank0.step4.ckpt").write_bytes(b"another run's rank 0")
    I.seal(d / "rank0.step4.ckpt")                       # consistent on its own ...
    with pytest.raises(ValueError, match="does not match the files of step 4"):
        I.verify(d, 4, 2)                                # ... but not with the set
    (d / "step4.set.json").write_text("{not json")
    with pytest.raises(ValueError, match="unreadable"):
        I.verify(d, 4, 2)


def test_fresh_launch_refuses_a_used_directory_unless_overwrite(tmp_path):
    d = _ckpts(tmp_path / "ck")
    (d / "notes.txt").write_text("mine")
    I.prepare_dir(d, resume_step=4, overwrite=False)     # resuming: fine
    I.prepare_dir(tmp_path / "new", 0, False)            # nothing there: fine
    with pytest.raises(ValueError, match="already holds a run"):
        I.prepare_dir(d, 0, False)
    I.prepare_dir(d, 0, True)
    assert sorted(f.name for f in d.iterdir()) == ["notes.txt"]   # only kfsim's files removed
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        I.prepare_dir(tmp_path / "file", 0, False)


def test_fingerprints_compare_ranks_step_by_step(tmp_path):
    w = I.FingerprintWatch(tmp_path, 3)
    a = [np.arange(10, dtype=np.float32), np.zeros((0,), np.float32), np.float32(1.5)]
    fa = I.fingerprint(a)
    assert fa == I.fingerprint([x.copy() for x in a])
    b = [a[0].copy(), a[1], a[2]]
    b[0][3] = np.nextafter(b[0][3], np.float32(10))      # one ulp
    assert I.fingerprint(b) != fa
    for r in range(3):
        I.append_fingerprint(tmp_path, r, 2, fa)
    assert w.poll() is None and w.compared() == [2]
    I.append_fingerprint(tmp_path, 0, 4, fa)
    I.append_fingerprint(tmp_path, 1, 4, fa)
    assert w.poll() is None                              # rank 2 has not reached step 4 yet
    I.append_fingerprint(tmp_path, 2, 4, I.fingerprint(b))
    msg = w.poll()
    assert msg.startswith("replicas diverged at step 4") and "rank 2:" in msg


def test_launch_refuses_a_corrupt_checkpoint_with_one_line(tmp_path):
    """`kfsim launch --resume` on a flipped byte: one error line naming the file, exit 2, no worker."""
    import subprocess
    import sys
    d = _ckpts(tmp_path / "ck")
    meta = {"spec": "none()", "model": "mlp", "workers": 2, "batch": 64, "lr": 0.1, "seed": 0, "rng": "exact",
            "collective": "auto", "hidden": None}
    (d / "meta.json").write_text(json.dumps(meta))
    raw = bytearray((d / "rank0.step4.ckpt").read_bytes())
    raw[0] ^= 1
    (d / "rank0.step4.ckpt").write_bytes(bytes(raw))
    cmd = [sys.executable, "-c", "from kfsim.cli import main; main()", "launch", "-c", "none()",
           "--ckpt-dir", str(d), "--resume", "4", "--out", str(tmp_path / "out"), "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(err) == 1, r.stderr
    assert err[0].startswith("error:") and "rank0.step4.ckpt is corrupt" in err[0]
    r = subprocess.run(cmd[:6] + ["--global-batch", "64", "--lr", "0.2", "--ckpt-dir", str(d), "--resume", "4",
                                   "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "lr: saved 0.1 vs now 0.2" in r.stderr and "--allow-change lr" in r.stderr
