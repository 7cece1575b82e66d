"""``--import``: load a user's module, e.g. one that registers a compressor, without PYTHONPATH.

A target is one of

* a Python file, ``mycomp.py`` or ``path/to/mycomp.py`` (loaded as module ``mycomp``;
  its folder joins ``sys.path`` so it can import its neighbours);
* a package folder, ``path/to/mypkg`` (holding ``__init__.py``; imported as ``mypkg``);
* a module name, ``mycomp`` or ``pkg.mycomp``, importable from the current directory
  or the environment.

:func:`for_workers` turns targets into what a worker process started elsewhere
(``msrun``, another current directory) needs: absolute paths for files and
folders, module names plus the folders to put on its ``PYTHONPATH``.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType


class TargetError(ValueError):
    """The target itself is wrong (missing file, not a package, a name clash)."""


def _is_path(target: str) -> bool:
    return target.endswith(".py") or "/" in target or os.sep in target or Path(target).is_dir()


def _add_path(folder: str) -> None:
    if folder not in sys.path:
        sys.path.append(folder)


def import_user(target: str) -> ModuleType:
    """Import ``target`` (file, package folder or module name); ValueError names what went wrong."""
    target = str(target).strip()
    if not target:
        raise TargetError("empty module name or path")
    try:
        if _is_path(target):
            return _import_path(Path(target))
        cwd = os.getcwd()
        if "" not in sys.path:
            _add_path(cwd)
        return importlib.import_module(target)
    except (TargetError, KeyboardInterrupt):
        raise
    except BaseException as exc:  # noqa: BLE001 - any failure of the user's module (even sys.exit) is bad input
        raise ValueError(f"cannot import {target} ({type(exc).__name__}: {exc})") from None


def _import_path(path: Path) -> ModuleType:
    if not path.exists():
        raise TargetError(f"{path}: no such file or folder")
    path = path.resolve()
    if path.is_dir():
        if not (path / "__init__.py").is_file():
            raise TargetError(f"{path}: a folder to import must be a package (hold __init__.py)")
        _add_path(str(path.parent))
        return _check_origin(importlib.import_module(path.name), path / "__init__.py")
    if path.suffix != ".py":
        raise TargetError(f"{path}: not a Python file (.py)")
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None:
        return _check_origin(loaded, path)
    _add_path(str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _check_origin(module: ModuleType, path: Path) -> ModuleType:
    origin = getattr(module, "__file__", None)
    if origin is None or Path(origin).resolve() != path:
        raise TargetError(f"{path}: a different module named {module.__name__!r} is already loaded "
                         f"({origin or 'built in'}); rename the file")
    return module


def module_dir(module: str) -> str:
    """The folder to put on a worker's PYTHONPATH so that it can import ``module``."""
    found = importlib.util.find_spec(module)
    if found is None or found.origin is None:
        raise ValueError(f"cannot find module {module!r} to import in the workers")
    depth = module.count(".") + (1 if Path(found.origin).name == "__init__.py" else 0)
    return str(Path(found.origin).resolve().parents[depth])


def for_workers(targets) -> tuple[list[str], list[str]]:
    """(targets as a worker elsewhere can import them, folders for its PYTHONPATH)."""
    out, paths = [], []
    for t in targets:
        t = str(t).strip()
        if _is_path(t):
            p = Path(t)
            if not p.exists():
                raise ValueError(f"{t}: no such file or folder")
            out.append(str(p.resolve()))
        else:
            if "" not in sys.path:
                _add_path(os.getcwd())
            out.append(t)
            d = module_dir(t)
            if d not in paths:
                paths.append(d)
    return out, paths
