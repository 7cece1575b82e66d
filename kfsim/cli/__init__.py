"""The ``kfsim`` command line: one typer app, one module per sub-command.

Error boundary (every command): bad input ends with exactly one line
``error: <what is wrong>`` on stderr and a non-zero exit status, never a
traceback:

* usage errors (unknown option, malformed number, ...): exit 2;
* ``ValueError``, ``OSError`` (missing/unwritable files), ``EOFError``
  (truncated data), ``LaunchError`` and other known errors raised by a command:
  exit 2;
* anything unexpected: exit 1, one line naming the exception plus a hint to
  rerun with ``KFSIM_DEBUG=1``, which lets the traceback through.

Commands validate their output paths up front (:func:`check_out_dir`,
:func:`check_out_file`) and every file they write is written atomically (temp
file in the same directory, then ``os.replace``), so a failed run neither
leaves a half-written file nor destroys an existing one.

Options shared by the commands — ``--config FILE`` (a file's ``[<command>]`` section
supplies defaults; flags win), ``--import``, bandwidths and durations with units, and
the deprecated spellings rewritten with a notice — live in :mod:`kfsim.cli.options`.
"""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

DEBUG_ENV = "KFSIM_DEBUG"
USAGE_EXIT = 2      # bad input
INTERNAL_EXIT = 1   # a bug: unexpected exception


def one_line(text: object) -> str:
    """Collapse a (possibly multi-line) message into one line."""
    parts = [p.strip() for p in str(text).splitlines() if p.strip()]
    if not parts:
        return "(no message)"
    line = parts[0]
    for part in parts[1:]:
        line += (" " if line.endswith(":") else "; ") + part
    return line


def describe(exc: BaseException) -> str:
    """The one-line message for a known exception."""
    if isinstance(exc, OSError) and exc.strerror:
        names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
        return one_line(f"{' -> '.join(names)}: {exc.strerror}" if names else exc.strerror)
    if isinstance(exc, EOFError):
        return one_line(f"unexpected end of file (truncated or corrupt input): {exc}")
    return one_line(exc)


def _known_errors() -> tuple[type[BaseException], ...]:
    known: list[type[BaseException]] = [ValueError, OSError, EOFError, ImportError]
    launcher = sys.modules.get("kfsim.launch.launcher")
    if launcher is not None and hasattr(launcher, "LaunchError"):
        known.append(launcher.LaunchError)
    return tuple(known)


def fail(message: object, code: int = USAGE_EXIT) -> typer.Exit:
    """Print ``error: message`` (one line, stderr); return the Exit to raise."""
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(code)


def check_out_dir(path: Path, flag: str = "--out") -> Path:
    """Create the output folder (if needed) and prove it is writable, before any work is done."""
    from kfsim.sim.report import check_writable

    return check_writable(path, flag)


def check_out_file(path: Path, flag: str) -> Path:
    """Prove an output file can be written (its folder created, writable; not a directory)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{flag} {path}: is a directory, expected a file path")
    check_out_dir(path.parent, f"{flag} {path}: folder")
    return path


class KfsimGroup(TyperGroup):
    """The root group: typer's group with the error boundary described above."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """Deprecated flag spellings become the current ones (one notice each; kfsim.cli.options)."""
        from kfsim.cli.options import rewrite_aliases

        name, cmd, rest = super().resolve_command(ctx, args)
        return name, cmd, rewrite_aliases(name, rest) if name else rest

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - this is the boundary
            from typer._click.exceptions import ClickException  # typer's vendored click
            if isinstance(exc, ClickException) or os.environ.get(DEBUG_ENV):
                raise
            if isinstance(exc, _known_errors()):
                raise fail(describe(exc)) from None
            raise fail(f"internal error: {type(exc).__name__}: {one_line(exc)} "
                       f"(rerun with {DEBUG_ENV}=1 for the traceback)", INTERNAL_EXIT) from None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # noqa: ANN001
        if not standalone_mode or os.environ.get(DEBUG_ENV):
            return super().main(args, prog_name, complete_var, standalone_mode=standalone_mode, **extra)
        from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except UsageError as exc:  # one line instead of typer's boxed usage panel
            cmd = exc.ctx.command_path if exc.ctx is not None else "kfsim"
            typer.echo(f"error: {one_line(exc.format_message())} (see '{cmd} --help')", err=True)
            sys.exit(exc.exit_code)
        except ClickException as exc:
            typer.echo(f"error: {one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(cls=KfsimGroup,
                  help="kfsim: gradient compression — simulate the cluster, train with real numerics, deploy to MindSpore.",
                  no_args_is_help=True, add_completion=False)


@app.callback()
def _root() -> None:
    """kfsim: gradient compression for data-parallel training."""


# Each module registers its commands on `app` when imported.
COMMAND_MODULES = (
    "kfsim.cli.compressors_cmd",
    "kfsim.cli.scale_cmd",
    "kfsim.cli.advise_cmd",
    "kfsim.cli.explain_cmd",
    "kfsim.cli.train_cmd",
    "kfsim.cli.study_cmd",
    "kfsim.cli.launch_cmd",
    "kfsim.cli.testbed_cmd",
    "kfsim.cli.plan_cmd",
)


def main() -> None:
    for mod in COMMAND_MODULES:
        importlib.import_module(mod)
    app()
