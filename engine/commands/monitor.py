"""`python -m engine monitor`: every running engine process's memory, refreshed every
second, or one process's snapshot (engine.diagnostics.monitor)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cli_args import output_file, pid_arg
from ..diagnostics import monitor
from ..errors import UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("monitor", help="every running engine process's memory, refreshed "
                                       "every second (like nvidia-smi -l 1)",
                       description=monitor.__doc__.split("\n\n")[0].split(": ", 1)[1])
    p.add_argument("--json", action="store_true",
                   help="one JSON object per process per refresh (default when piped)")
    p.add_argument("--once", action="store_true", help="print once and exit")
    p.add_argument("--snapshot", type=pid_arg, metavar="PID",
                   help="ask process PID for a snapshot of who holds what (JSON and HTML)")
    p.add_argument("--out", type=output_file, default=None,
                   help="--snapshot: the JSON file to write (default PID.snapshot.json; the "
                        "page goes beside it as .html)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.snapshot is not None:
        target = args.out or Path(f"{args.snapshot}.snapshot.json")
        for path in monitor.request_snapshot(args.snapshot, target):
            print(f"snapshot written to {path} and {path.with_suffix('.html')}")
        return 0
    if args.out is not None:
        raise UsageError("--out: only with --snapshot PID")
    return monitor.watch(as_json=args.json or not sys.stdout.isatty(), once=args.once)
