"""Numba's on-disk cache of the kernels, in a directory named by their sources.

Numba checks a cached kernel against its own file's timestamp only. A kernel
that calls one from another module (``backends.jax.host_kernels`` calls
``backends.numpy.sums``, ``fused_*``...) embeds the callee's machine code,
so after an edit of the callee's module it keeps running the old code from
the cache. That happened here: ``sign_split_sums`` on the JAX backend ran
at 20 ms for a kernel that took 6.5 ms on NumPy after the edit.

:func:`use_keyed_cache` points Numba's cache at
``$XDG_CACHE_HOME/kfsim/numba/<digest>`` (``~/.cache`` when unset), the
digest of every ``.py`` file under ``backends/``: an edit of any kernel
source starts an empty cache, and unchanged sources share one across
checkouts and processes (``msrun`` workers inherit it through
``NUMBA_CACHE_DIR``). Directories of other digests unused for ``KEEP_DAYS``
are removed. It runs when ``backends`` is imported, before any kernel
module is. A ``NUMBA_CACHE_DIR`` set by the user is left as it is (the
staleness above is then the user's to manage); ``KFSIM_KEYED_NUMBA_CACHE=0``
leaves Numba's default (``__pycache__`` beside each source).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from pathlib import Path

SOURCES = Path(__file__).resolve().parent  # backends/: every kernel module
KEEP_DAYS = 14  # a digest's cache unused this long is removed


def digest(root: Path = SOURCES) -> str:
    """Hex digest of the relative path and bytes of every ``.py`` file under root."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kfsim" / "numba"


def _prune(root: Path, keep: Path) -> None:
    cutoff = time.time() - KEEP_DAYS * 86400
    for old in root.iterdir():
        try:
            if old != keep and old.is_dir() and old.stat().st_mtime < cutoff:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass


def use_keyed_cache() -> str | None:
    """Set Numba's cache directory to the one of these sources; returns it, or
    None where the user chose (``NUMBA_CACHE_DIR``, ``KFSIM_KEYED_NUMBA_CACHE=0``)
    or the directory cannot be created (Numba's default then applies)."""
    if os.environ.get("NUMBA_CACHE_DIR") or os.environ.get("KFSIM_KEYED_NUMBA_CACHE", "1") == "0":
        return None
    root = cache_root()
    where = root / digest()
    try:
        where.mkdir(parents=True, exist_ok=True)
        os.utime(where)  # marks it used, for the pruning of other checkouts' caches
        _prune(root, where)
    except OSError:
        return None
    os.environ["NUMBA_CACHE_DIR"] = str(where)  # read when numba is imported, and by child processes
    if "numba" in sys.modules:  # already imported: kernels decorated from now on use it
        sys.modules["numba"].config.CACHE_DIR = str(where)
    return str(where)
