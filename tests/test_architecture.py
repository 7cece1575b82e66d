"""The layout rules of the tree, checked on the source (no imports executed).

* layers: ``compressors`` imports no package of ours; ``backends`` imports only
  ``compressors`` (and itself); nothing imports ``kfsim`` from below;
* no import circles anywhere among our modules (function-level imports count);
* no private (underscore) name imported from another module;
* no source file over 400 lines;
* one runner: only ``compressors/protocol.py`` calls a leaf's ``encode`` for
  more than one round (nothing else loops over rounds).
"""
from __future__ import annotations

import ast

import pytest

from kfsim.devtools import layout
from kfsim.devtools.layout import ALLOWED, PACKAGES, ROOT, imports, module_name, sources

MAX_LINES = 400


def test_layers():
    bad = []
    for path in sources(*PACKAGES):
        top = module_name(path).split(".")[0]
        for imp in imports(path):
            name, line = imp.target, imp.line
            dep = name.split(".")[0]
            if dep in PACKAGES and dep != top and dep not in ALLOWED[top]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name} ({top} may not import {dep})")
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    found = layout.cycles(layout.graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_architecture_picture_is_current():
    """docs/img/architecture.* are generated from the import graph; regenerate with
    ``python -m kfsim.devtools.architecture`` when this fails."""
    from kfsim.devtools.architecture import edge_list

    assert (ROOT / "docs/img/architecture.txt").read_text() == edge_list()
    assert (ROOT / "docs/img/architecture.png").stat().st_size > 10_000


def test_no_private_names_imported_across_modules():
    bad = []
    for path in sources(*PACKAGES, "tests", "benchmarks"):
        for imp in imports(path):
            name, names, line = imp.target, imp.names, imp.line
            if name.split(".")[0] not in PACKAGES:
                continue
            for n in names:
                if n.startswith("_") and not n.startswith("__"):
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports private {name}.{n}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("top", PACKAGES + ("tests", "benchmarks", "notebooks", "examples"))
def test_small_files(top):
    big = [f"{p.relative_to(ROOT)}: {n} lines" for p in sources(top)
           if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not big, "over 400 lines:\n" + "\n".join(big)


def test_one_runner_drives_the_rounds():
    """Leaf-level encode with a round argument is called only by the runner and
    by combinators delegating to their inner leaf."""
    bad = []
    for path in sources(*PACKAGES):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "compressors/protocol.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "encode":
                owner = ast.unparse(node.func.value)
                if len(node.args) >= 6 and owner not in ("inner", "IDENTITY_LEAF", "leaf", "core", "base"):
                    bad.append(f"{rel}:{node.lineno} calls {owner}.encode(...) outside the runner")
            if isinstance(node, ast.Attribute) and node.attr == "n_rounds" and rel.startswith(("kfsim/", "backends/")):
                bad.append(f"{rel}:{node.lineno} reads n_rounds (ask the runner or the exchange plan)")
    assert not bad, "\n".join(bad)
