"""`python -m lab bench [SUITE...]`: run benchmark suites (lab), print their
rows as tables and write the figures as JSON after every suite."""
from __future__ import annotations

import argparse
import importlib
import json
import time
from pathlib import Path

from .harness import ON_REQUEST, SUITES, rows_table
from engine.cli_args import output_file, registry_arg


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks: ratios side by side in one run")
    p.add_argument("suites", nargs="*",
                   type=registry_arg("suite", lambda: SUITES + ON_REQUEST),
                   help=f"suites to run (default all): {', '.join(SUITES)}; and, only when "
                        f"named: {', '.join(ON_REQUEST)}")
    p.add_argument("--json", type=output_file, help="write the figures to this JSON file")
    p.add_argument("--quick", action="store_true", help="small sizes, for CI smoke runs")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .common import run_document
    from engine.gl.device import Device

    names = args.suites or list(SUITES)  # each checked by the parser (suite_arg)
    device = Device.headless()
    out = run_document(device, {}, quick=args.quick)
    try:
        for name in names:
            suite = importlib.import_module(f"lab.{name}")
            start = time.perf_counter()
            res = suite.run(device, quick=args.quick)
            seconds = time.perf_counter() - start
            out["suites"][name] = {"rows": res.rows, "notes": res.notes, "seconds": seconds}
            print(f"== {name} ({device.caps.renderer}, {seconds:.1f} s)")
            print(rows_table(res.rows))
            for note in res.notes:
                print(f"  note: {note}")
            if args.json:  # after every suite: a long run cut short keeps what it measured
                Path(args.json).parent.mkdir(parents=True, exist_ok=True)
                Path(args.json).write_text(json.dumps(out, indent=2))
    finally:
        device.shutdown()
    return 0
