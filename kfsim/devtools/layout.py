"""The import graph of kfsim's source tree, read from the source (nothing imported).

Used by ``tests/test_architecture.py`` (layers, cycles, private names) and by
:mod:`kfsim.devtools.architecture` (the picture in ``docs/architecture.md``).
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, NamedTuple

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("compressors", "backends", "kfsim")          # bottom to top
ALLOWED = {"compressors": set(), "backends": {"compressors"}, "kfsim": {"compressors", "backends"}}


class Import(NamedTuple):
    module: str        # the importing module
    target: str        # the imported module (absolute)
    names: tuple       # names imported from it (``from x import a, b``)
    line: int


def sources(*tops: str, root: Path = ROOT) -> Iterator[Path]:
    for top in tops:
        for path in sorted((root / top).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, root: Path = ROOT) -> Iterator[Import]:
    """Every import statement of a file (function-level ones included)."""
    me = module_name(path, root)
    pkg = me if path.name == "__init__.py" else me.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield Import(me, a.name, (), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            yield Import(me, base, tuple(a.name for a in node.names), node.lineno)


def modules(root: Path = ROOT) -> dict[str, Path]:
    return {module_name(p, root): p for p in sources(*PACKAGES, root=root)}


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> our modules it imports (``from pkg import mod`` counts as mod)."""
    mods = modules(root)
    out: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        for imp in imports(path, root):
            deps = [f"{imp.target}.{n}" for n in imp.names if f"{imp.target}.{n}" in mods]
            if imp.target in mods and len(deps) < max(1, len(imp.names)):
                deps.append(imp.target)
            for d in deps:
                package_init = path.name == "__init__.py" and d.startswith(m + ".")
                if d != m and not m.startswith(d + ".") and not package_init:
                    out[m].add(d)
    return out


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by a depth-first walk (empty: the graph is a DAG)."""
    state: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(g.get(m, ())):
            if state.get(d) == 1:
                found.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)
    return found


def group(module: str) -> str:
    """The box a module is drawn in: a backend subpackage, a kfsim subpackage, or its top package."""
    parts = module.split(".")
    if parts[0] in ("backends", "kfsim") and len(parts) > 2:
        return ".".join(parts[:2])
    if parts[0] in ("backends", "kfsim") and len(parts) == 2 and parts[1] in _subpackages(parts[0]):
        return module
    return parts[0]


def _subpackages(top: str) -> set[str]:
    return {p.parent.name for p in (ROOT / top).glob("*/__init__.py")}


def group_edges(g: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Dependencies between boxes (sorted, without self-edges)."""
    return sorted({(group(a), group(b)) for a, ds in g.items() for b in ds if group(a) != group(b)})
