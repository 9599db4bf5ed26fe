"""`python -m engine view PATH...`: show the user's images, no bake step.

PATH is a folder (walked recursively), a glob pattern ("photos/**/*.jpg", quoted) or a file:
JPEG, PNG, TIFF, WebP, BMP, GIF (first frame), KTX2, DDS; or scientific images (OME-Zarr,
OME-TIFF, slides, http(s) URLs; several are layers of one view) shown from raw values with
--channels, --contrast, --gamma and --colormap (docs/science.md). Several images are shown as a
zoomable wall, one image as a deep-zoom view. In a window: the wheel zooms at the cursor, a
left drag pans, arrows/PageUp/PageDown/Space step from image to image (Up/Down by rows),
Return or a double click opens the one under the pointer, Esc goes back (and quits from the
whole wall), Home or f fits all, q quits, +/- change the budget, H the HUD; the title names
the file under view. Headless (no display, or --headless): --frames frames, then
--screenshot / --report. The first frame is drawn from thumbnails (cached, see
docs/view.md); full detail is encoded in the background, what the screen shows first. A file
that cannot be read is reported once and skipped.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from ..hosts.command import headless_wanted, run_command_scene
from ..app.providers import PROVIDERS
from ..hosts.run import save_outputs
from ..cli_args import (
    add_trace_option,
    budget_arg,
    examples,
    image_output_file,
    json_output_file,
    positive_int,
    registry_arg,
    size_arg,
    whole_number_in,
)
from ..memory.budget import DEFAULT_BUDGET
from ..view.decode import MAX_PIXELS
from ..view.wall import ENCODERS, FORMATS, LAYOUTS, ORDERS, ImageView, ImageWall
from . import view_science

log = logging.getLogger(__name__)
progress = logging.getLogger("engine.progress")
#: Frames a --wait-detail run may add after --frames for its picture to settle.
SETTLE_FRAMES = 600


@examples(__file__, "")
def path_arg(text: str) -> str:
    """A folder, file or glob pattern; what it finds is checked when the run starts."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; accepted: a folder, a file or a "
                                         "glob pattern")
    return text


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("view", help="show folders, globs or files of images (no bake step)",
                       description=__doc__.split("\n\n")[1])
    p.add_argument("paths", nargs="+", type=path_arg, metavar="PATH",
                   help="folders (recursive), glob patterns or image files")
    p.add_argument("--frames", type=positive_int, default=None,
                   help="frames to run (default 120 headless, until closed in a window)")
    p.add_argument("--budget", default=DEFAULT_BUDGET, type=budget_arg,
                   help='GPU memory for the run: "256MiB" or "80%%" of detected VRAM')
    p.add_argument("--screenshot", type=image_output_file,
                   help="save the last frame as a picture (.png, .jpg, ...)")
    p.add_argument("--report", type=json_output_file, help="write the per-frame JSON report")
    p.add_argument("--size", type=size_arg, default=(1280, 720), help="output WxH")
    p.add_argument("--headless", action="store_true", help="no window even with a display")
    p.add_argument("--layout", choices=LAYOUTS, default="rows",
                   help="rows: justified rows, aspect kept (default); grid: equal cells")
    p.add_argument("--order", choices=ORDERS, default="path",
                   help="path: sorted by file path (default); given: as the arguments and "
                        "folder walks give them")
    p.add_argument("--format", choices=FORMATS, default="bc1",
                   help="full-detail format: bc1 (default, fastest) or bc7 (better colour, "
                        "twice the memory)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--zoom-to", type=positive_int, metavar="N",
                       help="start with image N (1 = the first) opened: fitted to the "
                            "screen, as the API's zoom_to(N - 1) and the window's Return")
    start.add_argument("--full-size", type=positive_int, metavar="N",
                       help="start at image N (1 = the first) at one image pixel per screen "
                            "pixel, as the API's full_size(N - 1)")
    p.add_argument("--no-detail", action="store_true",
                   help="thumbnails only: encode no full detail")
    p.add_argument("--wait-detail", action="store_true",
                   help="each frame waits for the full detail of what it shows, and a "
                        f"headless run goes on after --frames (at most {SETTLE_FRAMES} "
                        "frames more) until its picture is complete (reproducible, sharp "
                        "screenshots)")
    p.add_argument("--workers", type=positive_int,
                   help="decoder and encoder processes (default: every core)")
    p.add_argument("--encoder", choices=ENCODERS, default="cpu",
                   help="where full detail is encoded: cpu (the encoder processes, default) "
                        "or gpu (compute shaders, GL 4.3, a few ms of each frame; the "
                        "processes decode and write). `python -m lab bench encode` "
                        "measures which is faster here")
    p.add_argument("--max-pixels", type=whole_number_in(1), default=MAX_PIXELS,
                   help=f"largest image read, in pixels (default {MAX_PIXELS})")
    p.add_argument("--provider", default="streaming",
                   type=registry_arg("texture provider", lambda: list(PROVIDERS)),
                   help="texture provider: streaming (default) or static (all resident)")
    p.add_argument("--hud", action="store_true", help="draw the HUD (always on in a window)")
    view_science.add_options(p)
    add_trace_option(p)
    p.set_defaults(func=run)


def _start_at(wall: ImageWall, args: argparse.Namespace) -> None:
    """Where the camera starts: --zoom-to N (image N fitted) or --full-size N (image N at
    one image pixel per screen pixel); a number past the images shows them all."""
    option, n = (("--zoom-to", args.zoom_to) if args.zoom_to is not None
                 else ("--full-size", args.full_size))
    if n is None:
        return
    if n > len(wall.items):
        log.warning("%s %d: only %d image(s); showing all", option, n, len(wall.items))
        return
    wall.navigator.resize(*args.size)
    if args.zoom_to is not None:
        wall.browser.open(n - 1)
    else:
        wall.full_size(n - 1)


def run(args: argparse.Namespace) -> int:
    if view_science.wants_science(args.paths, args):
        return view_science.run(args)
    headless = headless_wanted(args.headless)
    kwargs = {"layout": args.layout, "order": args.order, "format": args.format,
              "workers": args.workers, "detail": not args.no_detail, "encoder": args.encoder,
              "wait_detail": args.wait_detail, "max_pixels": args.max_pixels}
    single = len(args.paths) == 1 and os.path.isfile(args.paths[0])
    wall = ImageView(args.paths[0], **kwargs) if single else ImageWall(args.paths, **kwargs)
    _start_at(wall, args)
    frames = args.frames if args.frames is not None else (120 if headless else 0)
    result = run_command_scene(wall, frames=frames, headless=headless, hud=args.hud,
                               headless_frames=120, hooks=wall.hooks(args.report is not None),
                               size=args.size, budget=args.budget, screenshot=args.screenshot,
                               provider=args.provider, trace=args.trace,
                               settle_frames=SETTLE_FRAMES if args.wait_detail else 0,
                               title=wall.browser.title(None))
    # the first frame's placeholders: images drawn as a box of their colour, not a picture
    first = result.frames[0].get("view_placeholders") if result.frames else None
    summary = {**result.summary, **wall.detail_clock.summary(), "images": len(wall.items),
               "first_frame_placeholders": first,
               "skipped": [{"path": p, "problem": q} for p, q in wall.problems]}
    if args.report is not None:  # written here: the summary's view part is known only now
        result.summary.update(summary, image_files=[str(it.source) for it in wall.items])
        save_outputs(result, None, args.report)
        progress.info("report written to %s", result.report)
    print(json.dumps(summary, indent=1))
    sys.stdout.flush()
    return 1 if result.summary["leaked_objects"] else 0
