"""`python -m engine demo NAME ...`: run a demo scene headless or in a window.

The demos live in the repository's demos/ folder, installed as `engine.demos`. Every value is
checked while parsing (engine.cli's argument types), before any texture is generated: a bad
one is a one-line error with exit status 2. While it runs the command says what it is doing
on stderr (generation progress, a line when rendering starts and every few seconds after),
and at the end where the screenshot and the report went; stdout carries only the summary.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import warnings
from pathlib import Path

from engine.demos import DEMOS

from engine.app.providers import PROVIDERS
from engine.app.run import progress_hook, run_scene
from engine.cli_args import (
    budget_arg,
    input_file,
    output_file,
    positive_int,
    registry_arg,
    size_arg,
    texture_size_arg,
)
from engine.errors import ContextError
from engine.resolution.upscale import MODES

log = logging.getLogger(__name__)
progress = logging.getLogger("engine.progress")

#: Seconds between "frame N/M" lines while a run renders.
PROGRESS_EVERY_S = 5.0


def parse_size(text: str) -> tuple[int, int]:
    """"1280x720" -> (1280, 720); kept for callers of the old name (engine.cli_args.size_arg)."""
    return size_arg(text)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run a demo scene (gallery, pressure, ...)")
    p.add_argument("name", type=registry_arg("demo", lambda: list(DEMOS)),
                   help="demo name (see demos/__init__.py)")
    p.add_argument("--frames", type=positive_int, default=None,
                   help="frames to run, 1 or more (default 300 headless, until closed in a "
                        "window)")
    p.add_argument("--budget", default="80%", type=budget_arg,
                   help='"512MiB" or "80%%" of detected VRAM')
    p.add_argument("--screenshot", type=output_file, help="save the last frame as PNG")
    p.add_argument("--report", type=output_file, help="write the per-frame JSON report")
    p.add_argument("--size", type=size_arg, default=(1280, 720), help="output WxH")
    p.add_argument("--count", type=positive_int, help="gallery: number of textures")
    p.add_argument("--texture-size", type=texture_size_arg,
                   help="gallery: texture edge (power of two)")
    p.add_argument("--format", choices=("bc7", "bc1"), help="gallery: texture format")
    p.add_argument("--model", type=input_file,
                   help="gltf: the .gltf/.glb to show (default: the bundled BoxTextured; "
                        "e.g. one from engine bake)")
    p.add_argument("--headless", action="store_true", help="no window even with a display")
    p.add_argument("--provider", default="streaming",
                   type=registry_arg("texture provider", lambda: list(PROVIDERS)),
                   help="texture provider: streaming (default) or static (all resident)")
    p.add_argument("--upscale", default="bilinear", type=registry_arg("upscaler", lambda: MODES),
                   help=f"upscaler: {'|'.join(MODES)}")
    p.add_argument("--hud", action="store_true", help="draw the HUD (always on in a window)")
    p.add_argument("--mip-debug", action="store_true", help="colour by missing mip levels")
    p.add_argument("--stress", action="store_true",
                   help="stress mode: 2-40 ms of injected latency on every level read and the "
                        "pressure demo's random budget steps")
    p.set_defaults(func=run)


def x_display_missing(display: str | None) -> bool:
    """True when DISPLAY names a local X server (":N" or "unix:N") whose socket is absent:
    no window can open, so the run goes headless without trying. Other forms (host:N over
    TCP) are left to the window attempt, which fails with ContextError."""
    if not display:
        return False
    host, _, rest = display.rpartition(":")
    if host not in ("", "unix") or not rest:
        return False
    number = rest.split(".")[0]
    return number.isdigit() and not Path(f"/tmp/.X11-unix/X{number}").exists()


def run(args: argparse.Namespace) -> int:
    from engine.diagnostics.report import collect_metadata

    demo = DEMOS[args.name]
    headless = args.headless or not (os.environ.get("DISPLAY") or
                                     os.environ.get("WAYLAND_DISPLAY"))
    if not headless and not os.environ.get("WAYLAND_DISPLAY") and \
            x_display_missing(os.environ.get("DISPLAY")):
        log.warning("DISPLAY=%s has no X server behind it: running headless",
                    os.environ.get("DISPLAY"))
        headless = True
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
    hooks.append(progress_hook(frames, PROGRESS_EVERY_S))
    metadata = collect_metadata(scene=demo.name, options={
        **options, "size": list(args.size), "budget": args.budget, "provider": provider,
        "upscale": args.upscale, "headless": headless, "stress": args.stress,
        "mip_debug": args.mip_debug})
    kwargs = {"frames": frames, "size": args.size, "budget": args.budget,
              "screenshot": args.screenshot, "report": args.report, "provider": provider,
              "upscale": args.upscale, "view_mode": "mip" if args.mip_debug else "lit",
              "on_frame": hooks, "options": options, "metadata": metadata}
    if not headless:
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", module="glfw")  # the ContextError says it
                result = run_scene(demo.factory, headless=False, hud=True, **kwargs)
        except ContextError as exc:  # raised making the window, before any work
            log.warning("no window (%s): running headless", exc)
            headless = True
            frames = frames or 300
            kwargs["frames"] = frames
            hooks[-1] = progress_hook(frames, PROGRESS_EVERY_S)
    if headless:
        result = run_scene(demo.factory, headless=True, hud=args.hud, **kwargs)
    if result.screenshot is not None:
        progress.info("screenshot written to %s", result.screenshot)
    if result.report is not None:
        progress.info("report written to %s", result.report)
    print(json.dumps(result.summary, indent=1))
    sys.stdout.flush()
    return 1 if result.summary["leaked_objects"] else 0
