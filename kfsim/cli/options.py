"""What every ``kfsim`` command shares: ``--config FILE``, ``--import``, values with units,
deprecated spellings.

**Config files.** ``kfsim <command> --config FILE`` reads FILE (TOML, YAML or JSON; the
schema of :mod:`kfsim.catalog.config`) and takes the defaults of the command's options from
its section named after the command, ``[train]``, ``[scale]``, ...: a key is the option's
long name without the dashes (``--global-batch`` -> ``global_batch``; a ``--x/--no-x``
switch is ``x = true|false``), a value is what the flag takes (a list for a repeatable or
comma-separated option). Precedence: a flag given on the command line, then the file,
then the built-in default. The file's sections for other commands are checked as well
(a typo anywhere is an error, naming file, section and key); ``[advise]`` falls back to
``[scale]`` for the sweep settings both share (:data:`INHERIT`); a file with a
``[cluster]`` table is also the ``cluster`` of ``train`` and ``study`` (as it is the
cluster of ``scale`` and ``advise``). Relative paths in the file are relative to the
current directory, as on the command line. Implemented with click's ``default_map``.

**Units.** Bandwidths and latencies carry their unit (:mod:`kfsim.units`): ``1Gbit/s``,
``100Mbit/s``, ``50us``, ``2ms``. A bare number is an error for them.

**Deprecated spellings** (:data:`FLAG_ALIASES`) still work, each with a one-line notice
on stderr: ``--batch`` (now ``--global-batch`` or ``--batch-per-worker``), ``--spec`` /
``--specs`` (``--compressor``), ``--inter-gbps`` / ``--bandwidths`` / ``--rate`` /
``--rates`` (``--bandwidth`` with a unit), ``--latency-us`` (``--latency``).
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from kfsim import units
from kfsim.imports import import_user

# ---------------------------------------------------------------------------------- units


def _convert(fn: Callable[[Any], float], value: Any) -> float:
    try:
        return fn(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def gbit(value: Any) -> float:
    """typer parser: a bandwidth with its unit -> Gbit/s."""
    return _convert(units.bandwidth, value) / 1e9


def mbit(value: Any) -> float:
    """typer parser: a bandwidth with its unit -> Mbit/s."""
    return _convert(units.bandwidth, value) / 1e6


def gbit_list(value: Any) -> list[float]:
    """typer parser: comma-separated bandwidths -> Gbit/s each (use with :func:`flatten`)."""
    return [gbit(x) for x in units.split_list(value)]


def mbit_list(value: Any) -> list[float]:
    """typer parser: comma-separated bandwidths -> Mbit/s each (use with :func:`flatten`)."""
    return [mbit(x) for x in units.split_list(value)]


def microseconds(value: Any) -> float:
    """typer parser: a duration with its unit -> µs."""
    return _convert(units.duration, value) * 1e6


def milliseconds(value: Any) -> float:
    """typer parser: a duration with its unit -> ms."""
    return _convert(units.duration, value) * 1e3


def seconds(value: Any) -> float:
    """typer parser: a duration (a bare number is seconds) -> s."""
    return _convert(lambda v: units.duration(v, bare="s"), value)


def flatten(value):
    """typer callback of a repeatable list option: ``-b 1Gbit/s,10Gbit/s -b 25Gbit/s`` -> one list."""
    if value is None:
        return None
    return [x for item in value for x in (item if isinstance(item, (list, tuple)) else [item])]


RATE = "RATE"            # metavars
RATES = "RATE[,RATE...]"
TIME = "TIME"

# ------------------------------------------------------------------------ shared options

CONFIG_HELP = ("TOML/YAML/JSON file whose \\[<command>] section gives defaults for these options "
               "(key = option name without dashes); flags given here win")


def config_option(help: str = CONFIG_HELP) -> Any:
    return typer.Option(None, "--config", is_eager=True, callback=load_config, metavar="FILE", help=help)


def import_option() -> Any:
    return typer.Option([], "--import", callback=import_targets, metavar="MODULE_OR_FILE",
                        help="a .py file, package folder or module (importable from the current directory) "
                             "to import first, e.g. one registering your own compressor; repeatable")


def import_targets(value):
    """typer callback of ``--import``: import each target now (before any spec is parsed)."""
    for target in value or ():
        try:
            import_user(target)
        except ValueError as exc:
            raise ValueError(f"--import {target}: {exc}") from None
    return list(value or ())


# ------------------------------------------------------------------------- config files

# sections that inherit keys of another section: {section: (parent, keys)}
INHERIT = {"advise": ("scale", ("model", "workers", "device", "gpus_per_node", "collective", "bucket_mb",
                                "exchange", "batch_per_worker"))}


def _one_bandwidth_gbps(value, where: str):
    items = value if isinstance(value, (list, tuple)) else [value]
    if len(items) != 1:
        raise ValueError(f"{where}: scale.bandwidths_gbps: kfsim scale simulates one inter-node bandwidth "
                         f"(scale.bandwidth = \"10Gbit/s\"); sweep bandwidths with advise.bandwidth = [...]")
    return f"{items[0]}Gbit/s"


# old keys of a section: {section: {old: (new, convert(value, where))}}
LEGACY_KEYS = {"scale": {"compressors": ("compressor", lambda v, w: v),
                         "bandwidths_gbps": ("bandwidth", _one_bandwidth_gbps)}}


def _options(command) -> dict[str, Any]:
    """Config key -> click option of a command (``--global-batch`` -> ``global_batch``)."""
    out = {}
    for p in command.params:
        if getattr(p, "opts", None) is None or p.name in ("config", "help"):
            continue
        for opt in p.opts:
            if opt.startswith("--"):
                out[opt[2:].replace("-", "_")] = p
                break
    return out


def _section(data: dict, name: str, where: str, notes: list) -> dict:
    raw = data.get(name) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: {name}: expected a table of settings, got {type(raw).__name__}")
    out = {}
    for key, value in raw.items():
        k = str(key).replace("-", "_")
        if k in LEGACY_KEYS.get(name, {}):
            new, convert = LEGACY_KEYS[name][k]
            notes.append(f"{where}: {name}.{key} is deprecated, use {name}.{new}")
            k, value = new, convert(value, where)
        out[k] = value
    return out


def _check(command, name: str, settings: dict, where: str, ctx) -> dict:
    """default_map of a command from its settings (keys checked, values converted once)."""
    opts = _options(command)
    out = {}
    for key, value in settings.items():
        if key == "config":
            raise ValueError(f"{where}: {name}.config: a config file cannot name another config file")
        p = opts.get(key)
        if p is None:
            raise ValueError(f"{where}: {name}.{key}: kfsim {name} has no such setting "
                             f"(its settings: {', '.join(sorted(opts))})")
        if value is None:
            continue
        if p.multiple:
            value = list(value) if isinstance(value, (list, tuple)) else [value]
        elif isinstance(value, (list, tuple)):
            value = ",".join(str(x) for x in value)
        try:
            if p.callback is import_targets:  # checked, not imported, until that command runs
                if not all(isinstance(x, str) for x in value):
                    raise typer.BadParameter(f"expected module names or paths, got {value!r}")
            else:
                p.process_value(ctx, value)
        except Exception as exc:  # noqa: BLE001 - click's BadParameter & co., a parser's ValueError
            raise ValueError(f"{where}: {name}.{key}: {getattr(exc, 'message', exc)}") from None
        out[p.name] = value
    return out


def read_settings(path: Path, command: str | None, commands: dict) -> tuple[dict, list[str]]:
    """(default_map of ``command``, notices) from a config file; every command section is checked."""
    from kfsim.catalog import config as cfgmod

    return settings_from(cfgmod.read_file(path), str(path), command, commands)


def settings_from(data: dict, where: str, command: str | None, commands: dict) -> tuple[dict, list[str]]:
    """:func:`read_settings` of a config dict already read."""
    from kfsim.catalog import config as cfgmod

    with warnings.catch_warnings():  # the legacy-codec warning comes once, when the cluster is loaded
        warnings.simplefilter("ignore")
        cfgmod.validate(data, where)
    notes: list[str] = []
    sections = {name: _section(data, name, where, notes) for name in cfgmod.COMMAND_SECTIONS}
    for name, (parent, keys) in INHERIT.items():
        sections[name] = {**{k: v for k, v in sections[parent].items() if k in keys}, **sections[name]}
    mine = {}
    for name, settings in sections.items():
        cmd = commands.get(name)
        if cmd is None:
            continue
        checked = _check(cmd, name, settings, where, typer.Context(cmd, info_name=name))
        if name == command:
            mine = checked
    cmd = commands.get(command)
    if cmd is not None and "cluster" in data and "cluster" in {p.name for p in cmd.params} \
            and "cluster" not in mine:
        mine["cluster"] = where
    return mine, list(dict.fromkeys(notes))


def check_sections(data: dict, where: str = "config") -> None:
    """Check every command section of a config dict against the commands' options (tests, docs)."""
    settings_from(data, where, None, all_commands())


def all_commands() -> dict:
    """Name -> click command of every kfsim command (imports the command modules)."""
    import importlib

    import kfsim.cli as cli

    for mod in cli.COMMAND_MODULES:
        importlib.import_module(mod)
    return dict(typer.main.get_command(cli.app).commands)


def load_config(ctx: typer.Context, param: typer.CallbackParam, value: Optional[Path]):
    """typer callback of ``--config`` (eager): the file's settings become the defaults."""
    if value is None or ctx.resilient_parsing:
        return value
    root = ctx.find_root()
    commands = dict(getattr(root.command, "commands", {}) or {})
    commands.setdefault(ctx.info_name, ctx.command)
    settings, notes = read_settings(Path(value), ctx.info_name, commands)
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    ctx.default_map = {**(ctx.default_map or {}), **settings}
    return value


# ------------------------------------------------------------------- deprecated spellings

def _with_unit(unit: str) -> Callable[[str], list[str]]:
    def convert(value: str) -> list[str]:
        items = []
        for x in value.split(","):
            x = x.strip()
            try:
                float(x)
                items.append(f"{x}{unit}")
            except ValueError:
                items.append(x)
        return [",".join(items)]
    return convert


def _same(value: str) -> list[str]:
    return [value]


def _specs(value: str) -> list[str]:
    """``--specs 'a;b'`` -> ``-c a -c b``."""
    return [x.strip() for x in value.split(";") if x.strip()]


_PER_WORKER = {"--batch": ("--batch-per-worker", _same)}
_GLOBAL = {"--batch": ("--global-batch", _same)}
_RATES_MBIT = {"--rates": ("--bandwidth", _with_unit("Mbit/s")), "--specs": ("--compressor", _specs)}

# {command: {old flag: (new flag, value -> values of the new flag)}}
FLAG_ALIASES = {
    "scale": {**_PER_WORKER, "--inter-gbps": ("--bandwidth", _with_unit("Gbit/s"))},
    "advise": {**_PER_WORKER, "--bandwidths": ("--bandwidth", _with_unit("Gbit/s")),
               "--latency-us": ("--latency", _with_unit("us"))},
    "train": dict(_GLOBAL),
    "study": {**_GLOBAL, "--spec": ("--compressor", _same)},
    "launch": dict(_GLOBAL),
    "testbed": {**_PER_WORKER, "--rate": ("--bandwidth", _with_unit("Mbit/s"))},
    "calibrate": {**_PER_WORKER, **_RATES_MBIT},
    "validate": {**_PER_WORKER, **_RATES_MBIT},
}


def rewrite_aliases(command: str, args: list[str], note: Callable[[str], None] | None = None) -> list[str]:
    """Replace deprecated flags of ``command`` in ``args`` by the current ones (one notice each)."""
    table = FLAG_ALIASES.get(command)
    if not table:
        return list(args)
    note = note or (lambda text: typer.echo(text, err=True))
    out, i, told = [], 0, set()
    while i < len(args):
        a = args[i]
        if a == "--":
            out += args[i:]
            break
        flag, _, inline = a.partition("=")
        if flag in table:
            new, convert = table[flag]
            if inline or "=" in a:
                value = inline
            elif i + 1 < len(args):
                i += 1
                value = args[i]
            else:
                out.append(new)  # let the parser report the missing value
                break
            if flag not in told:
                told.add(flag)
                note(f"note: {flag} is deprecated, use {new}")
            for v in convert(value):
                out += [new, v]
        else:
            out.append(a)
        i += 1
    return out
