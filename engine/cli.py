"""Command line: `python -m engine info | demo | view | bake | inspect | report | monitor`.

One rule for every subcommand (tests/test_cli_rule.py walks every option to hold it), here and
in the repository's lab (`python -m lab bench | soak`), which runs its own `Program` here:

- A user error (a value out of range, an unknown name, an output that cannot be written) is
  ONE line on stderr naming the option and what it accepts, exit status 2, no traceback, and
  it is found before any work starts: values are checked while parsing by the argument
  types of engine.cli_args, which every command module (engine.commands) uses, so nothing has been generated, allocated or written when they fail.
- An internal error is one line plus "run with --debug for the traceback", exit status 1;
  `--debug` (anywhere on the line) prints the traceback instead.
- Ctrl-C and SIGTERM stop the run at once: the handler stops this process's worker processes
  (a process pool would otherwise finish its queue, or outlive us), then unwinds the main
  thread so every `finally` releases what it made and outputs written to temporary names are
  never renamed into place; exit status 130 (SIGINT) or 143 (SIGTERM) with one line, and the
  process ends there without joining threads a killed pool may have left blocked
  (`entry_point`).
- A closed stdout (`inspect f.ktx2 | head -3`) ends the command quietly, status 141 (as a
  C tool killed by SIGPIPE).
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NoReturn

from .cli_process import Interrupted, install_signal_handlers, stopping
from .commands import COMMANDS
from .errors import BudgetError, EngineError, OutputExistsError, UsageError

log = logging.getLogger(__name__)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a parse error is raised as UsageError (one line from main, exit 2)
    instead of a usage block on stderr and SystemExit. Subparsers inherit the class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # "-5x10" is a (bad) value, not an unknown option: anything starting "-<digit>" is
        # taken as a value, so its type says what is wrong instead of "expected one argument".
        self._negative_number_matcher = re.compile(r"^-\d")

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


@dataclass(frozen=True)
class Program:
    """A command line under the rule: its name and its command modules (each with
    `add_parser(sub)`), or their module paths, imported when needed (the last name of a
    path is its command's); the repository's lab brings its own."""
    prog: str
    description: str
    commands: Sequence[ModuleType | str]

    def modules(self, named: str | None = None) -> list[ModuleType]:
        """The command modules; only the one of command `named` when it is given by path
        (a run imports its own command, not every other's)."""
        only = [c for c in self.commands
                if isinstance(c, str) and c.rsplit(".", 1)[-1] == named]
        return [importlib.import_module(c) if isinstance(c, str) else c
                for c in (only or self.commands)]


ENGINE = Program("python -m engine", __doc__.split("\n\n")[0], COMMANDS)


def build_parser(program: Program = ENGINE, command: str | None = None
                 ) -> argparse.ArgumentParser:
    """The parser of every command, or of `command` alone (`Program.modules`)."""
    p = OneLineParser(prog=program.prog, description=program.description)
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    p.add_argument("--debug", action="store_true",
                   help="print the traceback of an internal error (also accepted after the "
                        "subcommand)")
    sub = p.add_subparsers(dest="command", required=True)
    for module in program.modules(command):
        module.add_parser(sub)
    return p


# --------------------------------------------------------------------------- main
#: Errors that are the user's to fix (an argument, a file they named): one line, exit 2.
USER_ERRORS: tuple[type[BaseException], ...] = (UsageError, BudgetError, OutputExistsError,
                                                argparse.ArgumentTypeError)


def _user_os_error(exc: BaseException) -> bool:
    """An OSError about a path the user named (exists, permission, not a folder)."""
    return isinstance(exc, (FileExistsError, PermissionError, NotADirectoryError,
                            IsADirectoryError)) and getattr(exc, "filename", None) is not None


def _say(message: str) -> None:
    print(" ".join(str(message).split()), file=sys.stderr)


def _dispatch(argv: list[str], program: Program) -> int:
    try:
        named = next((a for a in argv if not a.startswith("-")), None)
        args = build_parser(program, named).parse_args(argv)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    return int(args.func(args) or 0)


def main(argv: list[str] | None = None, program: Program = ENGINE) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    previous = install_signal_handlers() if _is_main_thread() else {}
    try:
        return _dispatch(argv, program)
    except Interrupted as exc:
        _say(f"interrupted by {exc}: stopped, partial outputs removed")
        return exc.status
    except KeyboardInterrupt:
        _say("interrupted by SIGINT: stopped, partial outputs removed")
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): say nothing more, and keep the interpreter's
        # final flush from complaining about the closed pipe.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    except USER_ERRORS as exc:
        _say(f"error: {exc}")
        return 2
    except OSError as exc:
        if _user_os_error(exc):
            _say(f"error: {exc}")
            return 2
        return _internal(exc, debug)
    except EngineError as exc:  # raised on purpose with a message for the user
        if debug:
            raise
        _say(f"error: {exc}")
        return 1
    except Exception as exc:  # noqa: BLE001 - the CLI's last word on an internal error
        return _internal(exc, debug)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _internal(exc: BaseException, debug: bool) -> int:
    if debug:
        import traceback

        traceback.print_exception(exc)
        return 1
    _say(f"internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)")
    return 1


def _is_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def entry_point(program: Program = ENGINE) -> NoReturn:
    """`python -m engine` (or another program): main(), then the process ends. After
    SIGINT/SIGTERM it ends at once (os._exit, once the outputs are flushed): every `finally`
    has already released what it made, and the interpreter's own exit would join threads a
    killed process pool may have left blocked forever (engine.textures.bake.closing_pool)."""
    status = main(program=program)
    if stopping():
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    entry_point()
