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
import sys
from pathlib import Path
from typing import Any

from engine.demos import DEMOS, gallery
from engine.demos.pressure import BIND_FRACTION, binding_hooks

from engine.app.providers import PROVIDERS
from engine.hosts.command import headless_wanted, run_command_scene
from engine.cli_args import (
    add_trace_option,
    budget_arg,
    examples,
    input_file,
    image_output_file,
    json_output_file,
    positive_int,
    scene_count_arg,
    registry_arg,
    size_arg,
    texture_size_arg,
)
from engine.errors import BudgetError, UsageError
from engine.memory.budget import DEFAULT_BUDGET
from engine.memory.sizes import format_bytes, format_exact
from engine.resolution.upscale import MODES

log = logging.getLogger(__name__)
progress = logging.getLogger("engine.progress")


#: the scene options of the `demo` command, by argparse dest -> flag
SCENE_OPTIONS = {"count": "--count", "texture_size": "--texture-size", "format": "--format",
                 "model": "--model"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    listing = "\n".join(f"  {d.name:<10} {d.description}" for d in DEMOS.values())
    p = sub.add_parser("demo", help=f"run a demo scene ({', '.join(DEMOS)})",
                       epilog=f"demos:\n{listing}",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", type=registry_arg("demo", lambda: list(DEMOS)),
                   help=f"the demo to run: {', '.join(DEMOS)} (listed below)")
    p.add_argument("--frames", type=positive_int, default=None,
                   help="frames to run, 1 or more (default 300 headless, until closed in a "
                        "window)")
    p.add_argument("--budget", default=None, type=budget_arg,
                   help='"512MiB", "500MB" or "80%%" of detected VRAM (default: gallery: '
                        'measured from the scene as it runs, so that it binds; the others: '
                        '80%%)')
    p.add_argument("--screenshot", type=image_output_file,
                   help="save the last frame as a picture (.png, .jpg, ...)")
    p.add_argument("--report", type=json_output_file, help="write the per-frame JSON report")
    p.add_argument("--size", type=size_arg, default=(1280, 720), help="output WxH")
    p.add_argument("--count", type=scene_count_arg,
                   help="gallery, pressure, wall: number of textures")
    p.add_argument("--texture-size", type=texture_size_arg,
                   help="gallery, pressure, wall: texture edge (power of two)")
    p.add_argument("--format", choices=("bc7", "bc1"),
                   help="gallery, pressure: texture format")
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
    p.add_argument("--share", metavar="GROUP", type=share_group_arg,
                   help="share --budget with the other processes of GROUP on this machine "
                        "(joined or made; the first live member's budget is the group's)")
    p.add_argument("--share-weight", type=share_weight_arg, default=1.0,
                   help="this process's weight in the group, 0.001..1000 (default 1)")
    p.add_argument("--share-floor", type=share_floor_arg, default=0,
                   help="bytes this process keeps while the floors fit (default 0)")
    add_trace_option(p)
    p.set_defaults(func=run)


@examples("viewers", "../x", "", "-a", "a" * 65)
def share_group_arg(text: str) -> str:
    """A share group name (engine.memory.shares.check_group_name's rule)."""
    from engine.memory.shares import check_group_name

    try:
        check_group_name(text)
    except BudgetError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


@examples("2", "0", "-1", "nan", "inf", "heavy")
def share_weight_arg(text: str) -> float:
    """A weight in a share group: a finite number in MIN_WEIGHT..MAX_WEIGHT."""
    from engine.memory.shares import MAX_WEIGHT, MIN_WEIGHT, check_weight

    try:
        return check_weight(float(text))
    except (ValueError, BudgetError):
        raise argparse.ArgumentTypeError(f"share weight must be a finite number in "
                                         f"{MIN_WEIGHT:g}..{MAX_WEIGHT:g}, got {text!r}"
                                         ) from None


@examples("64MiB", "-5", "lots", "80%")
def share_floor_arg(text: str) -> int:
    """A floor: bytes >= 0 ("64MiB")."""
    from engine.memory.shares import size_bytes

    try:
        return size_bytes("share floor", text)
    except BudgetError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; accepted: a size like 64MiB") from None


def check_scene_options(args: argparse.Namespace) -> None:
    """UsageError when an option the chosen demo does not read was given: it would be
    ignored without a word."""
    demo = DEMOS[args.name]
    for dest, flag in SCENE_OPTIONS.items():
        if getattr(args, dest, None) is not None and dest not in demo.options:
            takers = [d.name for d in DEMOS.values() if dest in d.options]
            raise UsageError(f"{flag} does not apply to demo {demo.name!r} (it is read by "
                             f"{', '.join(takers)})")


def cache_summary(paths: list[Path], existed: set[Path]) -> dict[str, Any]:
    """Where the scene's textures are cached and how many bytes, and how many of those this
    run wrote (the first run generates them)."""
    sizes = {p: p.stat().st_size for p in paths if p.is_file()}
    folder = paths[0].parent if paths else None
    return {"dir": str(folder) if folder else None, "bytes": sum(sizes.values()),
            "written_bytes": sum(n for p, n in sizes.items() if p not in existed),
            "files": len(sizes)}


def budget_summary(frames: list[dict[str, Any]], measured: bool) -> dict[str, Any]:
    """How the budget bound: frames whose textures were held below what they wanted or whose
    render scale was below 1, the budgets in force (a measured one from frame 1 on: frame 0
    runs under the start budget while the first measurement is taken), and the last frame's
    texture bytes and scale."""
    ran = frames[1:] if measured and len(frames) > 1 else frames
    bound = [f for f in ran if int(f["texture_resident_bytes"]) < int(f["texture_wanted_bytes"])
             or float(f["render_scale"]) < 1.0]
    last = frames[-1] if frames else {}
    return {"bound_frames": len(bound), "of_frames": len(ran),
            "budget_min_bytes": min((int(f["budget_bytes"]) for f in ran), default=0),
            "budget_max_bytes": max((int(f["budget_bytes"]) for f in ran), default=0),
            "end": {k: last.get(k) for k in ("budget_bytes", "texture_resident_bytes",
                                             "texture_wanted_bytes", "render_scale")}}


def _cached_paths(demo_name: str, options: dict[str, Any]) -> list[Path]:
    """The scene's texture files in the cache (the gallery's; the others report none)."""
    if DEMOS[demo_name].factory is not gallery.build:
        return []
    return gallery.texture_paths(options)


def _say_outcome(summary: dict[str, Any]) -> None:
    """The run's end in two lines on stderr: what the budget did, where the cache went."""
    b = summary["budget"]
    end = b["end"]
    spread = format_bytes(b["budget_min_bytes"])
    if b["budget_max_bytes"] != b["budget_min_bytes"]:
        spread += f"-{format_bytes(b['budget_max_bytes'])}"
    over = (f"over it in {summary['over_budget_frames']} frame(s): "
            f"{summary['over_budget_reason']}" if summary.get("over_budget") else "never over it")
    progress.info("budget %s (%s): it bound in %d of %d frames; at the end textures held %s of "
                  "%s wanted at render scale %.2f; %s", spread, summary["budget_source"],
                  b["bound_frames"], b["of_frames"], format_bytes(end["texture_resident_bytes"]),
                  format_bytes(end["texture_wanted_bytes"]), end["render_scale"] or 1.0, over)
    c = summary.get("cache")
    if c is not None and c["dir"]:
        progress.info("texture cache: %s holds %s in %d files (%s written by this run)",
                      c["dir"], format_exact(c["bytes"]), c["files"],
                      format_bytes(c["written_bytes"]))


def run(args: argparse.Namespace) -> int:
    from engine.diagnostics.report import collect_metadata

    check_scene_options(args)
    demo = DEMOS[args.name]
    headless = headless_wanted(args.headless)
    frames = args.frames if args.frames is not None else (300 if headless else 0)
    options = {"count": args.count, "texture_size": args.texture_size, "format": args.format,
               "frames": frames, "model": args.model}
    hooks = list(demo.hooks(options))
    measured = args.budget is None and demo.measured_budget
    if measured:
        hooks += binding_hooks(options)
    budget = args.budget or DEFAULT_BUDGET
    cached = _cached_paths(demo.name, options)
    existed = {p for p in cached if p.is_file()}
    provider = args.provider
    if args.stress:
        if provider == "streaming":
            provider = "streaming-stress"
        if demo.name != "pressure":
            hooks += DEMOS["pressure"].hooks(options)
    metadata = collect_metadata(scene=demo.name, options={
        **options, "size": list(args.size), "budget": "measured" if measured else str(budget),
        "provider": provider,
        "upscale": args.upscale, "headless": headless, "stress": args.stress,
        "mip_debug": args.mip_debug})
    kwargs = {"size": args.size, "budget": budget,
              "screenshot": args.screenshot, "report": args.report, "provider": provider,
              "upscale": args.upscale, "view_mode": "mip" if args.mip_debug else "lit",
              "options": options, "metadata": metadata, "trace": args.trace}
    if args.share:
        from engine.memory.shares import ShareSettings
        kwargs["share"] = ShareSettings(args.share, weight=args.share_weight,
                                        floor=args.share_floor)
    result = run_command_scene(demo.factory, frames=frames, headless=headless, hud=args.hud,
                               headless_frames=300, hooks=hooks, **kwargs)
    summary = {**result.summary, "budget_source": (
        f"measured from the scene after frame 0: its floor + {BIND_FRACTION:g} of the detail "
        f"above it"
        if measured else f"--budget {budget}"), "budget": budget_summary(result.frames, measured)}
    if cached:
        summary["cache"] = cache_summary(_cached_paths(demo.name, options), existed)
    _say_outcome(summary)
    print(json.dumps(summary, indent=1))
    sys.stdout.flush()
    return 1 if result.summary["leaked_objects"] else 0
