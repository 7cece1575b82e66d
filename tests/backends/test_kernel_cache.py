"""Numba's cache directory named by the kernels' sources (``backends.kernel_cache``)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numba
import pytest

from backends import kernel_cache

ROOT = Path(__file__).resolve().parents[2]


def test_digest_follows_every_source(tmp_path):
    (tmp_path / "numpy").mkdir()
    (tmp_path / "numpy" / "sums.py").write_text("A = 1\n")
    (tmp_path / "jax.py").write_text("B = 2\n")
    (tmp_path / "notes.txt").write_text("not a source")
    first = kernel_cache.digest(tmp_path)
    assert kernel_cache.digest(tmp_path) == first
    (tmp_path / "notes.txt").write_text("changed")
    assert kernel_cache.digest(tmp_path) == first  # only .py files count
    (tmp_path / "numpy" / "sums.py").write_text("A = 2\n")  # a callee's edit
    edited = kernel_cache.digest(tmp_path)
    assert edited != first
    (tmp_path / "numpy" / "sums.py").rename(tmp_path / "numpy" / "other.py")
    assert kernel_cache.digest(tmp_path) not in (first, edited)


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.delenv("KFSIM_KEYED_NUMBA_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(numba.config, "CACHE_DIR", numba.config.CACHE_DIR)  # restored after the test
    return tmp_path


def test_keyed_directory_and_pruning(clean_env):
    root = clean_env / "kfsim" / "numba"
    old, recent = root / ("0" * 16), root / ("1" * 16)
    old.mkdir(parents=True)
    recent.mkdir()
    (old / "k.nbi").write_bytes(b"x")
    month_ago = time.time() - 30 * 86400
    os.utime(old, (month_ago, month_ago))
    where = kernel_cache.use_keyed_cache()
    assert where == str(root / kernel_cache.digest())
    assert os.environ["NUMBA_CACHE_DIR"] == where and numba.config.CACHE_DIR == where
    assert Path(where).is_dir() and recent.is_dir() and not old.exists()


def test_the_users_choice_is_kept(clean_env, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(clean_env / "mine"))
    assert kernel_cache.use_keyed_cache() is None
    assert os.environ["NUMBA_CACHE_DIR"] == str(clean_env / "mine")
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setenv("KFSIM_KEYED_NUMBA_CACHE", "0")
    assert kernel_cache.use_keyed_cache() is None and "NUMBA_CACHE_DIR" not in os.environ


def test_an_unwritable_cache_home_leaves_numbas_default(clean_env, monkeypatch):
    blocker = clean_env / "file"
    blocker.write_text("a file where the cache directory would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert kernel_cache.use_keyed_cache() is None and "NUMBA_CACHE_DIR" not in os.environ


def test_a_fresh_process_caches_its_kernels_there(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(XDG_CACHE_HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    script = ("import numpy as np, backends; "
              "print(backends.get('numpy').pack_signs(np.array([1.0, -2.0], np.float32)))")
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[2]"
    keyed = tmp_path / "kfsim" / "numba" / kernel_cache.digest()
    assert any(keyed.rglob("*pack_signs*.nbi")), sorted(p.name for p in keyed.rglob("*"))[:20]
