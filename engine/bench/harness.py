"""The bench command: run suites, print their rows as tables, write JSON."""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import time
from pathlib import Path

log = logging.getLogger(__name__)

SUITES = ("accounting", "streaming", "wall", "upload", "startup", "peers", "bake", "resolution",
          "scaling", "frame", "virtual", "encode", "transcode")
#: Suites run only when named: `viewers` starts a process per viewer and data set and runs
#: the peers (napari, fastplotlib) where they are installed (the `peers` extra); `deepzoom`
#: generates and bakes a huge image first.
ON_REQUEST = ("viewers", "deepzoom")


def _table(rows: list[dict]) -> str:
    if not rows:
        return "  (no rows)"
    cols = list(dict.fromkeys(k for r in rows for k in r))
    fmt = lambda v: f"{v:.3g}" if isinstance(v, float) else str(v)
    widths = {c: max(len(c), *(len(fmt(r.get(c, ""))) for r in rows)) for c in cols}
    lines = ["  " + "  ".join(c.ljust(widths[c]) for c in cols)]
    for r in rows:
        lines.append("  " + "  ".join(fmt(r.get(c, "")).ljust(widths[c]) for c in cols))
    return "\n".join(lines)


def bench_main(args: argparse.Namespace) -> int:
    from ..gl.device import Device
    from .common import run_document

    names = args.suites or list(SUITES)  # each checked by the parser (suite_arg)
    device = Device.headless()
    out = run_document(device, {}, quick=args.quick)
    try:
        for name in names:
            suite = importlib.import_module(f"engine.bench.{name}")
            start = time.perf_counter()
            res = suite.run(device, quick=args.quick)
            seconds = time.perf_counter() - start
            out["suites"][name] = {"rows": res.rows, "notes": res.notes, "seconds": seconds}
            print(f"== {name} ({device.caps.renderer}, {seconds:.1f} s)")
            print(_table(res.rows))
            for note in res.notes:
                print(f"  note: {note}")
            if args.json:  # after every suite: a long run cut short keeps what it measured
                Path(args.json).parent.mkdir(parents=True, exist_ok=True)
                Path(args.json).write_text(json.dumps(out, indent=2))
    finally:
        device.shutdown()
    return 0


def add_parser(sub) -> None:
    from ..cli_args import output_file, registry_arg

    p = sub.add_parser("bench", help="benchmarks: ratios side by side in one run")
    p.add_argument("suites", nargs="*",
                   type=registry_arg("suite", lambda: SUITES + ON_REQUEST),
                   help=f"suites to run (default all): {', '.join(SUITES)}; and, only when "
                        f"named: {', '.join(ON_REQUEST)}")
    p.add_argument("--json", type=output_file, help="write the figures to this JSON file")
    p.add_argument("--quick", action="store_true", help="small sizes, for CI smoke runs")
    p.set_defaults(func=bench_main)
