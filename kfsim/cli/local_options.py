"""The local SGD / DiLoCo options, defined once for ``kfsim train`` and ``kfsim launch``.

    local_steps: Optional[int] = local_options.local_steps()   # ... one factory per option

Defaults and help are the same in both commands; the values become a
:class:`compressors.outer.LocalSGD` through :func:`kfsim.train.config.local_algo`.
"""
from __future__ import annotations

from typing import Any

import typer


def local_steps() -> Any:
    return typer.Option(None, metavar="H", help="local SGD / DiLoCo: H inner steps per outer step "
                                                "(default: exchange every step)")


def outer_lr() -> Any:
    return typer.Option(1.0, help="local SGD: outer learning rate")


def outer_momentum() -> Any:
    return typer.Option(0.0, help="local SGD: outer Nesterov momentum")


def fragments() -> Any:
    return typer.Option(1, metavar="F", help="local SGD: streaming, F fragments synced in turn")


def overlap_steps() -> Any:
    return typer.Option(0, help="local SGD: inner steps each exchange overlaps (< H / F)")
