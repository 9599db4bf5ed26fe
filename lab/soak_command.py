"""`python -m lab soak`: a long run under random budgets and injected faults
(lab.soak); exit status 0 only if every check holds."""
from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from engine.cli_args import (
    add_trace_option,
    output_file,
    positive_int,
    probability_arg,
    seed_arg,
    size_arg,
    texture_size_arg,
)
from engine.diagnostics.files import atomic_text

SOAK_SCENES = ("pressure", "wall")


def add_parser(sub: argparse._SubParsersAction) -> None:
    from .soak import SoakSettings

    d = SoakSettings()
    p = sub.add_parser("soak", help="a long run under random budgets and injected faults; "
                                    "exit 0 only if every check holds")
    p.add_argument("--scene", choices=SOAK_SCENES, default="pressure",
                   help="pressure: the gallery under moving budgets (default); wall")
    p.add_argument("--frames", type=positive_int, default=d.frames,
                   help=f"frames to run, 1 or more (default {d.frames})")
    p.add_argument("--size", type=size_arg, default=d.size, help="output WxH (default 320x180)")
    p.add_argument("--count", type=positive_int, default=16, help="textures in the scene")
    p.add_argument("--texture-size", type=texture_size_arg, default=256,
                   help="texture edge, a power of two (default 256)")
    p.add_argument("--seed", type=seed_arg, default=d.seed, help="random seed (default 1)")
    p.add_argument("--oom", type=probability_arg, default=d.oom_probability,
                   help="probability that an allocation of a streamed texture or render target "
                        f"fails as out of memory, in [0, 1] (default {d.oom_probability})")
    p.add_argument("--io-fault-every", type=positive_int, default=d.io_fault_every,
                   help=f"frames between I/O faults (default {d.io_fault_every})")
    p.add_argument("--budget-every", type=positive_int, default=d.budget_every,
                   help=f"frames between random budget changes (default {d.budget_every})")
    p.add_argument("--resize-every", type=positive_int, default=None,
                   help="frames between output resizes, as a window resize does (default: none "
                        "headless)")
    p.add_argument("--json", type=output_file, help="write the summary as JSON to this file")
    add_trace_option(p)
    p.set_defaults(func=run)


def _soak_scene(args: argparse.Namespace, into: Path) -> tuple[Any, dict, dict]:
    """The scene factory, options reading the soak's own copy of the textures (they get
    damaged) and options reading the cache (the clean reference frame)."""
    if args.scene == "wall":
        from engine.demos import wall
        from engine.demos.wall_assets import wall_textures

        assets = wall_textures(args.count, args.texture_size)
        factory = wall.build
    else:
        from engine.demos import gallery
        from engine.demos.gallery_assets import gallery_textures

        assets = gallery_textures(args.count, args.texture_size, "bc7")
        factory = gallery.build
    copy = into / assets.directory.parent.name
    from .soak import copy_textures

    copy_textures(assets.paths, copy / assets.directory.name)
    base = {"count": args.count, "texture_size": args.texture_size, "frames": args.frames}
    return factory, {**base, "cache_dir": copy}, {**base, "cache_dir": assets.directory.parent}


def run(args: argparse.Namespace) -> int:
    import tempfile

    from .soak import SoakSettings, run_soak
    from engine.gl.device import Device

    settings = SoakSettings(frames=args.frames, size=args.size, seed=args.seed,
                            oom_probability=args.oom, io_fault_every=args.io_fault_every,
                            budget_every=args.budget_every, resize_every=args.resize_every or 0,
                            trace=args.trace)
    say = logging.getLogger("engine.progress").info
    with tempfile.TemporaryDirectory(prefix="engine-soak-") as tmp:
        factory, options, clean = _soak_scene(args, Path(tmp))
        say(f"soak: {args.scene}, {settings.frames} frames at {args.size[0]}x{args.size[1]}, "
            f"textures copied to {tmp}")
        device = Device.headless()
        try:
            report = run_soak(device, factory, options, settings, reference_options=clean,
                              say=say)
        finally:
            device.shutdown()
    for line in report.lines():
        print(line)
    if args.json:
        data = {**report.to_json(), "scene": args.scene, "renderer": _renderer(device)}
        atomic_text(args.json, json.dumps(data, indent=1))
        say(f"soak summary written to {args.json}")
    return 0 if report.passed else 1


def _renderer(device: Any) -> str:
    return str(getattr(getattr(device, "caps", None), "renderer", ""))
