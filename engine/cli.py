"""Command line: `python -m engine info | bake | inspect | demo | bench | report`."""
from __future__ import annotations

import argparse
import json
import logging
import sys

from .memory.sizes import format_bytes


def _info(args: argparse.Namespace) -> int:
    from .gl.device import Device
    from .memory.budget import Budget

    dev = Device.headless() if args.headless else Device.auto()
    try:
        reading = dev.vram()
        budget = Budget(args.budget, vram_total=reading.total_bytes)
        caps = dev.caps
        data = {
            "renderer": caps.renderer,
            "vendor": caps.vendor,
            "gl_version": caps.gl_version,
            "context": dev.handle.mode,
            "compressed_formats": caps.compressed_families,
            "compressed_format_variants": sorted(caps.compressed),
            "max_texture_size": caps.max_texture_size,
            "sparse_texture": caps.sparse_texture,
            "copy_image": caps.copy_image,
            "buffer_storage": caps.buffer_storage,
            "debug_output": caps.debug_output,
            "vram": {"source": reading.source, "total_bytes": reading.total_bytes,
                     "available_bytes": reading.available_bytes},
            "budget": str(budget.spec),
            "budget_bytes": budget.bytes,
            # What a percentage budget is taken of: probed VRAM, or the virtual size where
            # the driver reports none (llvmpipe).
            "budget_reference_bytes": budget.reference_total,
            "budget_reference": "probed" if budget.vram_total else "virtual",
        }
    finally:
        dev.shutdown()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        v = data["vram"]
        print(f"renderer      {data['renderer']} ({data['vendor']})")
        print(f"GL            {data['gl_version']} via {data['context']}")
        print(f"compressed    {', '.join(data['compressed_formats']) or 'none'}")
        print(f"max texture   {data['max_texture_size']}")
        print(f"features      sparse={data['sparse_texture']} copy_image={data['copy_image']} "
              f"buffer_storage={data['buffer_storage']} debug={data['debug_output']}")
        print(f"VRAM          source={v['source'] or 'none'} total={format_bytes(v['total_bytes'])}"
              f" available={format_bytes(v['available_bytes'])}")
        print(f"budget        {data['budget']} = {format_bytes(data['budget_bytes'])} (of "
              f"{data['budget_reference']} {format_bytes(data['budget_reference_bytes'])})")
    return 0


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


def _inspect(args: argparse.Namespace) -> int:
    from .errors import TextureFormatError
    from .textures import inspect

    status = 0
    for path in args.files:
        try:
            info = inspect(path)
            print(json.dumps(info, indent=2) if args.json else _describe(info))
        except TextureFormatError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
    return status


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = p.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="GL renderer, compressed formats, VRAM and budget")
    info.add_argument("--json", action="store_true")
    info.add_argument("--budget", default="80%", help='"512MiB" or "80%%" of detected VRAM')
    info.add_argument("--headless", action="store_true", help="force EGL even with a display")
    info.set_defaults(func=_info)
    from .demos.cli import add_parser as add_demo
    add_demo(sub)
    # `bake` is dispatched in main() before parsing; listed here for --help.
    sub.add_parser("bake", help="images -> mip chain -> BCn -> KTX2 (see bake --help)")
    insp = sub.add_parser("inspect", help="container, format, levels of KTX2/DDS files")
    insp.add_argument("files", nargs="+")
    insp.add_argument("--json", action="store_true")
    insp.set_defaults(func=_inspect)
    from .bench.harness import add_parser as add_bench
    add_bench(sub)
    from .diagnostics.timeline import add_parser as add_report
    add_report(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bake"]:  # bake owns its whole argument list (and its --help)
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        if any(a.lower().endswith((".gltf", ".glb")) for a in argv[1:]):  # a whole scene
            from .render.gltf_bake import bake_gltf_main
            return bake_gltf_main(argv[1:])
        from .textures.bake import bake_main
        return bake_main(argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
