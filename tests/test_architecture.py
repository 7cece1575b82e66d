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
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("compressors", "backends", "kfsim")
ALLOWED = {"compressors": set(), "backends": {"compressors"}, "kfsim": {"compressors", "backends"}}
MAX_LINES = 400


def sources(*tops: str):
    for top in tops:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path):
    """(imported module, imported names, line) for every import in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    pkg = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, (), node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            yield base, tuple(a.name for a in node.names), node.lineno


def our_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sources(*PACKAGES)}


def resolve(name: str, names: tuple, mods: dict) -> list[str]:
    """Our modules an import statement depends on."""
    out = []
    for n in names:
        if f"{name}.{n}" in mods:
            out.append(f"{name}.{n}")
    if name in mods and (not out or len(out) < len(names)):
        out.append(name)
    return out


def test_layers():
    bad = []
    for path in sources(*PACKAGES):
        top = module_name(path).split(".")[0]
        for name, _, line in imports(path):
            dep = name.split(".")[0]
            if dep in PACKAGES and dep != top and dep not in ALLOWED[top]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name} ({top} may not import {dep})")
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    mods = our_modules()
    graph = {m: set() for m in mods}
    for m, path in mods.items():
        for name, names, _ in imports(path):
            for dep in resolve(name, names, mods):
                if dep != m and not m.startswith(dep + ".") and not (mods[m].name == "__init__.py"
                                                                     and dep.startswith(m + ".")):
                    graph[m].add(dep)
    # a package's __init__ importing its own submodules is not a cycle through them
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                cycles.append(" -> ".join(stack[stack.index(d):] + [d]))
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_private_names_imported_across_modules():
    bad = []
    for path in sources(*PACKAGES, "tests", "benchmarks"):
        for name, names, line in imports(path):
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
