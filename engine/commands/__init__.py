"""The subcommands of `python -m engine`, one module each: `add_parser(sub)` declares its
options with the checked types of engine.cli_args, `run(args)` does the work and returns the
exit status. engine.cli only dispatches to them and applies the error rule; the layers below
keep their library APIs and no argument parsing.
"""
from __future__ import annotations

from types import ModuleType

from . import bake, demo, info, inspect, monitor, report, view

#: In the order `python -m engine --help` lists them.
COMMANDS: tuple[ModuleType, ...] = (info, demo, view, bake, inspect, report, monitor)
