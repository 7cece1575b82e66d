"""King James Bible text for a character-level language model (Debian ``bible-kjv``).

The package stores the text in its own compressed format; its ``bible``
command prints it. We run ``bible gen1:1-rev22:21`` once and cache the text
(~4.3 M characters) under the user cache directory
(``$XDG_CACHE_HOME/kfsim/kjv.txt``, default ``~/.cache/kfsim/kjv.txt``).

Tokens are characters; the vocabulary is the sorted set of characters of the
whole text, so ids are stable. ``load(split)`` returns int32 token ids: the
first 90 % of the text is "train", the last 10 % "test".
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

from kfsim.data.errors import DataUnavailable

PACKAGE = "bible-kjv"
COMMAND = "bible"
RANGE = "gen1:1-rev22:21"
TRAIN_FRACTION = 0.9
MIN_CHARS = 1_000_000  # the whole Bible is ~4.3 M; less means the command failed


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kfsim"


def cache_path() -> Path:
    return cache_dir() / "kjv.txt"


def _run_bible() -> str:
    exe = shutil.which(COMMAND)
    if exe is None:
        raise DataUnavailable("The King James Bible text", PACKAGE, f"no `{COMMAND}` command on PATH")
    try:
        out = subprocess.run([exe, RANGE], capture_output=True, check=True, timeout=120,
                             stdin=subprocess.DEVNULL)
    except subprocess.CalledProcessError as exc:
        raise DataUnavailable("The King James Bible text", PACKAGE,
                              f"`{COMMAND} {RANGE}` failed: {exc.stderr.decode(errors='replace')[:200]}") from None
    text = out.stdout.decode("ascii", errors="strict")
    if len(text) < MIN_CHARS:
        raise DataUnavailable("The King James Bible text", PACKAGE,
                              f"`{COMMAND} {RANGE}` printed only {len(text)} characters")
    return text


@functools.lru_cache(maxsize=1)
def text() -> str:
    """The whole text (cached on disk after the first call)."""
    path = cache_path()
    if path.is_file():
        cached = path.read_text(encoding="ascii")
        if len(cached) >= MIN_CHARS:
            return cached
    t = _run_bible()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(t, encoding="ascii")
    tmp.replace(path)
    return t


@functools.lru_cache(maxsize=1)
def vocab() -> tuple[str, ...]:
    """The sorted characters of the text; a token id indexes this tuple."""
    return tuple(sorted(set(text())))


def encode(s: str) -> np.ndarray:
    table = {c: i for i, c in enumerate(vocab())}
    try:
        return np.fromiter((table[c] for c in s), dtype=np.int32, count=len(s))
    except KeyError as exc:
        raise ValueError(f"kjv.encode: character {exc.args[0]!r} is not in the vocabulary") from None


def decode(ids) -> str:
    v = vocab()
    return "".join(v[int(i)] for i in ids)


@functools.lru_cache(maxsize=1)
def _ids() -> np.ndarray:
    t = text()
    lut = np.zeros(256, dtype=np.int32)
    for i, c in enumerate(vocab()):
        lut[ord(c)] = i
    ids = lut[np.frombuffer(t.encode("ascii"), dtype=np.uint8)]
    ids.setflags(write=False)
    return ids


def load(split: str = "train") -> np.ndarray:
    """int32 token ids of the train (first 90 %) or test (last 10 %) part."""
    if split not in ("train", "test"):
        raise ValueError(f"kjv.load: split must be 'train' or 'test', got {split!r}")
    ids = _ids()
    cut = int(len(ids) * TRAIN_FRACTION)
    return ids[:cut] if split == "train" else ids[cut:]


def windows(ids: np.ndarray, starts: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(inputs [B, length], next-char targets [B, length]) for window starts."""
    starts = np.asarray(starts, dtype=np.int64)
    if length < 1:
        raise ValueError(f"kjv.windows: length must be >= 1, got {length}")
    if starts.size and (starts.min() < 0 or starts.max() + length + 1 > len(ids)):
        raise ValueError("kjv.windows: a window runs past the text")
    idx = starts[:, None] + np.arange(length + 1)[None, :]
    w = ids[idx]
    return w[:, :-1], w[:, 1:]


def available() -> bool:
    return cache_path().is_file() or shutil.which(COMMAND) is not None
