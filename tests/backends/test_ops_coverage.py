"""Op semantics (see ``tests/backends/semantics.py``): every op of
``compressors.ops.Ops`` has a test in one of the ``test_ops_*.py`` modules,
and every backend binding carries its name.
"""
from __future__ import annotations

import importlib
from pathlib import Path

from compressors.ops import OP_NAMES
from tests.backends.ops_backends import OPS_BACKENDS, get_ops
from tests.backends.semantics import TESTED


def test_every_op_is_tested():
    for path in sorted(Path(__file__).parent.glob("test_ops_*.py")):  # each module records what it covers
        importlib.import_module(f"{__package__}.{path.stem}")
    missing = sorted(set(OP_NAMES) - TESTED)
    assert not missing, f"ops without a semantics test: {missing}"


def test_backend_names():
    for backend in OPS_BACKENDS:
        assert get_ops(backend).name == backend
