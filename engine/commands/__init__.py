"""The subcommands of `python -m engine`, one module each: `add_parser(sub)` declares its
options with the checked types of engine.cli_args, `run(args)` does the work and returns the
exit status. engine.cli only dispatches to them and applies the error rule; the layers below
keep their library APIs and no argument parsing.

They are named here, not imported: engine.cli imports the one a command line runs (a
`view` does not pay for the demos' imports), and all of them for the help that lists them.
"""
from __future__ import annotations

#: Module paths of the subcommands, in the order `python -m engine --help` lists them; each
#: module's last name is its command's.
COMMANDS: tuple[str, ...] = tuple(f"{__name__}.{name}" for name in (
    "info", "demo", "view", "bake", "inspect", "report", "monitor"))
