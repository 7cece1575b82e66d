"""Progress of long commands: one reporter, three modes, shared by every command.

* default: a rich progress display on stderr (bars with loss and ms/step);
  when stderr is not a terminal, plain lines on stderr instead — the first
  step, then at most one line every ``KFSIM_PROGRESS_EVERY`` seconds (10), and
  the last step;
* ``--quiet``: nothing but errors and, at the end, the output path (stdout);
* ``--json``: JSON lines on stdout — one object per step or event
  (``{"event": "step", "step": 3, "loss": 2.1, "ms_per_step": 4.2, ...}``,
  ``{"event": "log", "message": ...}``), then one ``{"event": "summary", ...}``
  object with the command's results, ``out`` and ``files``; stderr carries
  errors only. ``--json --quiet``: the summary object alone. Non-finite
  numbers are written as ``null``.

The step callbacks (:meth:`Reporter.steps`) take :class:`kfsim.records.Step`
records; ``extra["wall_s"]``, when present, is the step's wall time (the
trainer's mean over its read-back window, the MindSpore worker's measured
step), else the time since the previous record is used. The callbacks do no
device work and throttle the display, so they add no host sync to a step.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Optional

import typer

EVERY_ENV = "KFSIM_PROGRESS_EVERY"
RICH_MIN_S = 0.1   # the rich display is updated at most this often (the last step always)


def quiet_option():
    return typer.Option(False, "--quiet", "-q",
                        help="no progress, tables or messages: only errors and, at the end, the output path")


def json_option():
    return typer.Option(False, "--json", help="JSON lines on stdout: one object per step or event, then a "
                                              "summary object (with --quiet: the summary alone)")


def out_option(command: str, what: str):
    return typer.Option(Path("results") / command, "--out", "-o", help=f"output folder ({what})")


def clean(value: Any) -> Any:
    """``value`` with non-finite floats as None and paths as strings (strict JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if hasattr(value, "item"):  # numpy scalars
        return clean(value.item())
    return str(value)


def _every_s() -> float:
    try:
        return max(float(os.environ.get(EVERY_ENV, "10")), 0.0)
    except ValueError:
        return 10.0


class Reporter:
    """Progress and results of one command run (use as a context manager: leaving
    it stops the live display, also on errors, before anything else is printed)."""

    def __init__(self, command: str, *, quiet: bool = False, as_json: bool = False, tty: Optional[bool] = None):
        self.command = command
        self.summary_only = as_json and quiet
        if as_json:
            self.mode = "json"
        elif quiet:
            self.mode = "quiet"
        else:
            if tty is None:
                tty = bool(getattr(sys.stderr, "isatty", lambda: False)())
            self.mode = "rich" if tty else "plain"
        self.every_s = _every_s()
        self._progress = None

    @property
    def human(self) -> bool:
        """True when tables and messages are for a person (not --quiet, not --json)."""
        return self.mode in ("rich", "plain")

    # -- output channels -------------------------------------------------------
    def emit(self, obj: dict) -> None:
        """One JSON line on stdout (json mode only)."""
        if self.mode == "json" and (not self.summary_only or obj.get("event") == "summary"):
            typer.echo(json.dumps(clean(obj)))

    def log(self, message: str, **fields) -> None:
        """A message for a person (stderr, above the bars) or a ``log`` event."""
        if self.mode == "rich":
            self._live().console.print(message, markup=False, highlight=False)
        elif self.mode == "plain":
            typer.echo(message, err=True)
        else:
            self.emit({"event": "log", "command": self.command, "message": message, **fields})

    def _live(self):
        if self._progress is None:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=20),
                                      MofNCompleteColumn(), TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                                      TimeRemainingColumn(), console=Console(stderr=True), refresh_per_second=4)
            self._progress.start()
        return self._progress

    # -- tasks -----------------------------------------------------------------
    def steps(self, label: str, total: Optional[int] = None, **context) -> "StepProgress":
        """A per-step callback for training loops (``progress=`` of the trainers and the launcher)."""
        return StepProgress(self, label, total, context)

    def items(self, label: str, total: Optional[int] = None) -> "ItemProgress":
        """A counter of larger units (a study's runs, a calibration's cells)."""
        return ItemProgress(self, label, total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> "Reporter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the end -----------------------------------------------------------------
    def finish(self, out: Path | str, files: Iterable[Path | str] = (), summary: Optional[dict] = None,
               message: Optional[str] = None) -> None:
        """The last output: json, the summary object; quiet, the path ``out``;
        otherwise ``message`` or ``wrote <files>``."""
        self.close()
        files = [str(f) for f in files]
        if self.mode == "json":
            self.emit({"event": "summary", "command": self.command, **(summary or {}), "out": str(out),
                       "files": files})
        elif self.mode == "quiet":
            typer.echo(str(out))
        else:
            typer.echo(message if message is not None else "wrote " + ", ".join(files or [str(out)]))


class StepProgress:
    """Callable ``(records.Step) -> None``: one bar (rich), periodic lines (plain), step objects (json)."""

    def __init__(self, rep: Reporter, label: str, total: Optional[int], context: dict):
        self.rep, self.label, self.total, self.context = rep, label, total, context
        self.count = 0
        self.last_ms: Optional[float] = None
        self._prev = time.perf_counter()
        self._shown = -math.inf
        self._task = rep._live().add_task(label, total=total, info="") if rep.mode == "rich" else None

    def __call__(self, rec) -> None:
        now = time.perf_counter()
        wall = (rec.extra or {}).get("wall_s")
        ms = (now - self._prev if wall is None else wall) * 1e3
        self._prev = now
        self.count += 1
        self.last_ms = ms
        done = rec.step + 1
        last = self.total is not None and done >= self.total
        mode = self.rep.mode
        if mode == "json":
            self.rep.emit({"event": "step", "command": self.rep.command, **self.context, "step": rec.step,
                           "loss": rec.loss, "ms_per_step": ms, "accuracy": rec.accuracy,
                           "bytes_sent": rec.bytes_sent, "time_s": rec.time_s,
                           "sim_time_s": (rec.extra or {}).get("sim_clock_s"),
                           "test_loss": (rec.extra or {}).get("test_loss")})
            return
        if mode == "quiet":
            return
        interval = RICH_MIN_S if mode == "rich" else self.rep.every_s
        if not (last or self.count == 1 or rec.accuracy is not None or now - self._shown >= interval):
            return
        self._shown = now
        info = f"loss {rec.loss:.4f}  {ms:.1f} ms/step" + ("" if rec.accuracy is None else
                                                          f"  accuracy {rec.accuracy:.4f}")
        if mode == "rich":
            self.rep._live().update(self._task, completed=done, info=info)
        else:
            of = "" if self.total is None else f"/{self.total}"
            typer.echo(f"{self.label}: step {done}{of}  {info}", err=True)

    def close(self) -> None:
        """Remove the bar (rich); a finished bar stays otherwise."""
        if self._task is not None and self.rep._progress is not None:
            self.rep._progress.remove_task(self._task)
            self._task = None


class ItemProgress:
    """A counter of units: ``advance(message, **fields)`` after each (message: a line / log event)."""

    def __init__(self, rep: Reporter, label: str, total: Optional[int]):
        self.rep, self.label, self.total, self.done = rep, label, total, 0
        self._task = rep._live().add_task(label, total=total, info="") if rep.mode == "rich" else None

    def status(self, message: str, **fields) -> None:
        """What is being done now (a line in plain mode, the bar's text in rich mode)."""
        if self._task is not None:
            self.rep._live().update(self._task, info=message)
        elif self.rep.mode == "plain":
            typer.echo(f"{self.label}: {message}", err=True)
        else:
            self.rep.emit({"event": "status", "command": self.rep.command, "message": message, **fields})

    def advance(self, message: Optional[str] = None, **fields) -> None:
        self.done += 1
        of = "" if self.total is None else f"/{self.total}"
        if self._task is not None:
            self.rep._live().update(self._task, completed=self.done, info="")
        if message is not None:
            if self.rep.mode == "json":
                self.rep.emit({"event": "item", "command": self.rep.command, "index": self.done,
                               "total": self.total, "message": message, **fields})
            else:
                self.rep.log(f"[{self.done}{of}] {message}")
