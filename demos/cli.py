"""`python -m engine demo NAME ...`: run a demo scene headless or in a window.

The demos live in the repository's demos/ folder, installed as `engine.demos`.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from engine.app.run import run_scene
from engine.demos import DEMOS

log = logging.getLogger(__name__)


def parse_size(text: str) -> tuple[int, int]:
    """"1280x720" -> (1280, 720)."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must look like 1280x720, got {text!r}")
    if w < 1 or h < 1:
        raise argparse.ArgumentTypeError(f"size must be positive, got {text!r}")
    return w, h


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run a demo scene (gallery, pressure, ...)")
    p.add_argument("name", help="demo name (see demos/__init__.py)")
    p.add_argument("--frames", type=int, default=None,
                   help="frames to run (default 300 headless, until closed in a window)")
    p.add_argument("--budget", default="80%", help='"512MiB" or "80%%" of detected VRAM')
    p.add_argument("--screenshot", type=Path, help="save the last frame as PNG")
    p.add_argument("--report", type=Path, help="write the per-frame JSON report")
    p.add_argument("--size", type=parse_size, default=(1280, 720), help="output WxH")
    p.add_argument("--count", type=int, help="gallery: number of textures")
    p.add_argument("--texture-size", type=int, help="gallery: texture edge (power of two)")
    p.add_argument("--format", choices=("bc7", "bc1"), help="gallery: texture format")
    p.add_argument("--model", type=Path, help="gltf: the .gltf/.glb to show (default: the "
                                              "bundled BoxTextured; e.g. one from engine bake)")
    p.add_argument("--headless", action="store_true", help="no window even with a display")
    p.add_argument("--provider", default="streaming",
                   help="texture provider: streaming (default) or static (all resident)")
    p.add_argument("--upscale", default="bilinear", help="upscaler: bilinear|fsr")
    p.add_argument("--hud", action="store_true", help="draw the HUD (always on in a window)")
    p.add_argument("--mip-debug", action="store_true", help="colour by missing mip levels")
    p.add_argument("--stress", action="store_true",
                   help="stress mode: 2-40 ms of injected latency on every level read and the "
                        "pressure demo's random budget steps")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    demo = DEMOS.get(args.name)
    if demo is None:
        print(f"unknown demo {args.name!r}; known: {', '.join(sorted(DEMOS))}", file=sys.stderr)
        return 2
    headless = args.headless or not (os.environ.get("DISPLAY") or
                                     os.environ.get("WAYLAND_DISPLAY"))
    frames = args.frames if args.frames is not None else (300 if headless else 0)
    options = {"count": args.count, "texture_size": args.texture_size, "format": args.format,
               "frames": frames, "model": args.model}
    hooks = list(demo.hooks(options))
    provider = args.provider
    if args.stress:
        if provider == "streaming":
            provider = "streaming-stress"
        if demo.name != "pressure":
            hooks += DEMOS["pressure"].hooks(options)
    result = run_scene(demo.factory, frames=frames, size=args.size, budget=args.budget,
                       headless=headless, screenshot=args.screenshot, report=args.report,
                       provider=provider, upscale=args.upscale, hud=args.hud or not headless,
                       view_mode="mip" if args.mip_debug else "lit",
                       on_frame=hooks, options=options)
    print(json.dumps(result.summary, indent=1))
    return 1 if result.summary["leaked_objects"] else 0
