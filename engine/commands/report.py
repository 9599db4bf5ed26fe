"""`python -m engine report RUN.json -o timeline.png`: validate a run report and draw its
timeline (engine.diagnostics.timeline)."""
from __future__ import annotations

import argparse
import sys

from ..cli_args import input_file, output_file, picture_size_arg
from ..diagnostics.report import ReportError, load_report
from ..diagnostics.timeline import (
    MAX_SIZE,
    MIN_SIZE,
    default_output,
    parse_size,
    render_timeline,
)
from ..errors import OutputExistsError, UsageError
from ..memory.sizes import format_bytes


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="validate a run report and draw its timeline PNG")
    p.add_argument("report", type=input_file, help="a run report JSON (run_scene(report=...))")
    p.add_argument("-o", "--output", type=output_file, default=None,
                   help="PNG to write (default: next to the report, RUN.timeline.png); a "
                        "file that is not a timeline is never overwritten without --force")
    p.add_argument("--force", action="store_true",
                   help="overwrite the output even if it is not a timeline picture")
    p.add_argument("--backend", choices=("pillow", "matplotlib"), default="pillow")
    p.add_argument("--size", type=picture_size_arg, default="1200x720",
                   help=f"WIDTHxHEIGHT in pixels, from {MIN_SIZE[0]}x{MIN_SIZE[1]} to "
                        f"{MAX_SIZE[0]}x{MAX_SIZE[1]}")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        size = parse_size(args.size)  # before reading anything
        report = load_report(args.report)
        out = render_timeline(report, args.output or default_output(args.report), size=size,
                              backend=args.backend, force=args.force)
    except (UsageError, OutputExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (ReportError, ValueError) as exc:  # not a report: the CLI's one-line error
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    sm = report["summary"]
    print(f"{out}: {sm['frames']} frames, peak {format_bytes(sm['peak_bytes'])} of "
          f"{format_bytes(sm['budget_bytes'])}, p50 {sm['frame_ms_p50']:.2f} ms, "
          f"leaked {sm['leaked_objects']}")
    return 0
