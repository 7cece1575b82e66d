"""Spec strings: ``ef(topk(ratio=0.01))``, ``powersgd(rank=2)``, ``qsgd(levels=127, bucket=512)``.

A spec is a Python-call expression made only of registered names, keyword or
positional literal arguments (numbers, strings, booleans, tuples), and nested
compressor specs as arguments of combinators. It is parsed with ``ast``,
never evaluated.
"""
from __future__ import annotations

import ast
import inspect
from typing import Any, Callable, NamedTuple

from compressors.core import Compressor

_REGISTRY: dict[str, "Entry"] = {}


class Entry(NamedTuple):
    name: str
    factory: Callable[..., Compressor]
    doc: str
    params: tuple[inspect.Parameter, ...]
    combinator: bool
    paper: str


def register(name: str, *, combinator: bool = False, paper: str = ""):
    """Decorator: make a factory reachable from spec strings under ``name``
    (``paper``: the reference the compressor implements, for listings)."""

    def deco(factory):
        if name in _REGISTRY:
            raise ValueError(f"compressor {name!r} is registered twice")
        doc = (inspect.getdoc(factory) or "").strip().splitlines()
        params = tuple(inspect.signature(factory).parameters.values())
        _REGISTRY[name] = Entry(name, factory, doc[0] if doc else "", params, combinator, paper)
        return factory

    return deco


def unregister(name: str) -> None:
    """Forget a registered name (a notebook cell or a test redefining its compressor)."""
    if name not in _REGISTRY:
        raise ValueError(f"compressor {name!r} is not registered")
    del _REGISTRY[name]


def entries() -> list[Entry]:
    """All registered compressors and combinators, sorted by name."""
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def describe() -> str:
    """A table of every compressor: name(params) — one-line doc."""
    lines = []
    for e in entries():
        args = ", ".join(fmt_param(p) for p in e.params)
        lines.append(f"{e.name}({args})  {e.doc}")
    return "\n".join(lines)


def fmt_param(p: inspect.Parameter) -> str:
    if p.default is inspect.Parameter.empty:
        return p.name
    return f"{p.name}={p.default!r}"


def parse(spec: str | Compressor) -> Compressor:
    """A compressor from its spec string (a Compressor passes through)."""
    if isinstance(spec, Compressor):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"empty or non-string compressor spec: {spec!r}")
    try:
        tree = ast.parse(spec.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"malformed compressor spec {spec!r}: {exc.msg}") from None
    return _build(tree, spec)


def _build(node: ast.AST, spec: str) -> Compressor:
    if isinstance(node, ast.Name):
        node = ast.Call(func=node, args=[], keywords=[])
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"in compressor spec {spec!r}: expected name(...) at {ast.unparse(node)!r}")
    name = node.func.id
    if name not in _REGISTRY:
        known = ", ".join(sorted(_REGISTRY))
        raise ValueError(f"unknown compressor {name!r} in spec {spec!r}; known: {known}")
    entry = _REGISTRY[name]
    args = [_value(a, spec) for a in node.args]
    kwargs = {k.arg: _value(k.value, spec) for k in node.keywords}
    try:
        bound = inspect.signature(entry.factory).bind(*args, **kwargs)
    except TypeError as exc:
        raise ValueError(f"bad arguments for {name} in spec {spec!r}: {exc}") from None
    if entry.combinator:
        inner = bound.arguments.get(entry.params[0].name)
        if not isinstance(inner, Compressor):
            raise ValueError(f"{name} in spec {spec!r} wraps a compressor, got {inner!r}")
        if inner.paths and name != "paths":
            raise ValueError(f"{name} in spec {spec!r} wraps a per-tensor plan; put paths(...) outermost "
                             f"and wrap its entries instead")
    return entry.factory(*args, **kwargs)


def _value(node: ast.AST, spec: str) -> Any:
    if isinstance(node, (ast.Call, ast.Name)) and not (isinstance(node, ast.Name) and node.id in ("True", "False", "None")):
        return _build(node, spec)
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(f"in compressor spec {spec!r}: {ast.unparse(node)!r} is not a literal") from None


def canonical(name: str, **params: Any) -> str:
    """The canonical spec string ``name(k=v, ...)`` (defaults included)."""
    inner = ", ".join(f"{k}={v.spec if isinstance(v, Compressor) else repr(v)}" for k, v in params.items())
    return f"{name}({inner})"
