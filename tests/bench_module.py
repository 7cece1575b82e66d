"""Load a script of ``benchmarks/`` as a module (they are scripts, not a package), for tests of
their pure parts."""
from __future__ import annotations

import importlib.util
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_bench(name: str):
    """The module ``benchmarks/<name>.py``, executed fresh."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
