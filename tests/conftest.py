"""Suite-wide hygiene.

JAX keeps every executable it compiles (each eager op on a new shape, dtype or
static argument compiles one, ~2 MB on CPU) for the life of the process; over
the whole suite that grew one pytest process past 8 GB. After any test that
leaves the process more than ``GROWTH_MB`` above where the last clean-up left
it, JAX's caches are dropped and glibc hands the freed pages back
(``malloc_trim``): later tests recompile what they use (seconds, rarely), and
the suite's peak stays near its floor plus ``GROWTH_MB``. Memory that is not
JAX's (MindSpore, data) only moves the floor, so this never repeats per test.

Under pytest-xdist (``-n 2 --dist loadfile``, pyproject's default) a module's
tests stay on one worker (module fixtures run once), and a module that starts
msrun jobs or network namespaces holds a lock shared by the workers while it
runs, so at most one such module (~1 GB per MindSpore process) runs at a time;
``tests/heavy_schedule.py`` hands such modules to one worker at a time, so the
other never waits on the lock.

Compiling dominates the JAX suites (each eager op on a new shape, dtype or
static argument, and every ``jax.jit`` of a fresh lambda, is an XLA compile of
~20-1000 ms), and most programs recur: across tests, across the two workers,
after a cache clean-up, in every subprocess (CLI, docs, notebooks). So a test
session gets one persistent JAX compilation cache, in a fresh temporary folder
(``JAX_COMPILATION_CACHE_DIR``, removed at the end; one set by the caller is
used as it is), that the workers and their subprocesses share: a program is
compiled once per session. Each session starts cold, so nothing is hidden.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import functools
import gc
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

GROWTH_MB = 800
LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None)
_floor = {"mb": 0}


HEAVY_WORDS = ("msrun", "Testbed(", "netns")
JAX_CACHE_ENV = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",   # every program, however quick
                 "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}


def pytest_configure(config):
    """The session's JAX compilation cache: made by the controlling process (xdist's workers and
    every subprocess inherit its environment), before any test module imports JAX."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None and not os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        config.kfsim_jax_cache = tempfile.mkdtemp(prefix="kfsim-jax-cache-")
        os.environ["JAX_COMPILATION_CACHE_DIR"] = config.kfsim_jax_cache
    for k, v in JAX_CACHE_ENV.items():
        os.environ.setdefault(k, v)
    jax = sys.modules.get("jax")
    if jax is not None:  # imported before this hook (by a plugin): its flags read the environment already
        jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)


def pytest_unconfigure(config):
    cache = getattr(config, "kfsim_jax_cache", None)
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)


@functools.cache
def is_heavy(path: Path) -> bool:
    """Whether the test module at ``path`` starts msrun jobs or network namespaces."""
    text = path.read_text(errors="replace") if path.suffix == ".py" else ""
    return any(w in text for w in HEAVY_WORDS)


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") == "loadfile":
        from tests.heavy_schedule import HeavyAwareScheduling

        return HeavyAwareScheduling(config, log, is_heavy=is_heavy)
    return None


@pytest.fixture(autouse=True, scope="module")
def one_heavy_module_at_a_time(request, tmp_path_factory):
    """Under xdist, a module that starts msrun jobs or network namespaces holds one
    lock shared by the workers (in their common base temp folder) while it runs."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None or not is_heavy(Path(str(request.path))):
        yield
        return
    lock = tmp_path_factory.getbasetemp().parent / "heavy-modules.lock"
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def rss_mb() -> int:
    """This process's resident set in MiB (0 where /proc is missing)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def release_jax_memory() -> int:
    """Drop JAX's compiled executables, return freed pages to the OS; the RSS after."""
    jax = sys.modules.get("jax")
    if jax is not None:
        jax.clear_caches()
    gc.collect()
    trim = getattr(LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)
    return rss_mb()


@pytest.fixture(autouse=True)
def bounded_jax_caches():
    yield
    if not _floor["mb"]:
        _floor["mb"] = rss_mb()
    elif rss_mb() > _floor["mb"] + GROWTH_MB:
        _floor["mb"] = release_jax_memory()
