"""`python -m engine inspect FILE...`: container, format and levels of KTX2/DDS files."""
from __future__ import annotations

import argparse
import json
import sys

from ..cli_args import input_file


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="container, format, levels of KTX2/DDS files")
    p.add_argument("files", nargs="+", type=input_file)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import TextureFormatError
    from ..textures import inspect

    status = 0
    for path in args.files:
        try:
            info = inspect(path)
            print(json.dumps(info, indent=2) if args.json else _describe(info))
        except TextureFormatError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
    return status


def _describe(info: dict) -> str:
    """inspect()'s dict as a few readable lines and a level table."""
    head = (f"{info['path']}: {info['container']} {info['format']} {info['width']}x"
            f"{info['height']} layers={info.get('layers', 1)} faces={info.get('faces', 1)} "
            f"supercompression={info.get('supercompression', 'none')}")
    rows = [head, f"  {'level':>5} {'size':>11} {'offset':>10} {'stored':>10} {'bytes':>10}"]
    for lv in info["levels"]:
        rows.append(f"  {lv['index']:>5} {str(lv['width']) + 'x' + str(lv['height']):>11} "
                    f"{lv['offset']:>10} {lv['stored_bytes']:>10} {lv['uncompressed_bytes']:>10}")
    return "\n".join(rows)
