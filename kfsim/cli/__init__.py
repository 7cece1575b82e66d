"""The ``kfsim`` command line: one typer app, one module per sub-command."""
from __future__ import annotations

import importlib

import typer

app = typer.Typer(help="kfsim: gradient compression — simulate the cluster, train with real numerics, deploy to MindSpore.",
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
)


def main() -> None:
    for mod in COMMAND_MODULES:
        importlib.import_module(mod)
    app()
