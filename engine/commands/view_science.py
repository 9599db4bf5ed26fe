"""`python -m engine view data.zarr [more.zarr ...]` (or .ome.tif, .svs, http(s) URLs):
scientific images shown from their raw values, channel by channel, several as layers of one view
(engine.science, docs/science.md).

The options that say how channels look (`--channels`, `--contrast`, `--gamma`,
`--colormap`) take one value for every channel or `CHANNEL=VALUE` pairs separated by
commas; they are checked by the same rules as the API's `ChannelDisplay`. With a display
the image opens in a window (engine.hosts.science: the photo wall's keys) until closed or
--frames; headless (no display, or --headless), frames are drawn until the picture is
complete (or --frames), then --screenshot and a JSON summary (first frame, complete
picture, cache bytes, reads).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import replace
from typing import Any

import numpy as np

from ..hosts.command import headless_wanted
from ..cli_args import examples
from ..errors import ContextError, UsageError
from ..gl.device import Device
from ..science.display import ChannelDisplay
from ..science.gpu import ENCODINGS, SAMPLING
from ..science.readers import (
    TIFF_SUFFIXES,
    is_science_location,
    is_url,
    open_image_source,
)
from ..science.source import ChunkedSource
from ..science.view import ScienceView, default_displays

log = logging.getLogger(__name__)
#: the longest a headless run waits for a complete picture
SETTLE_S = 120.0


def wants_science(paths: list[str], args: argparse.Namespace) -> bool:
    """Paths that are each a URL, an OME-Zarr, an OME-TIFF or a slide (a TIFF too when a
    channel, sampling or encoding option is given): one image, or several as layers of one
    view."""
    given = any(getattr(args, k, None) is not None
                for k in ("channels", "contrast", "colormap", "gamma")) or (
        getattr(args, "sampling", "nearest"), getattr(args, "encoding", "exact")) != (
        "nearest", "exact")
    return bool(paths) and all(
        is_science_location(p) or (given and p.rstrip("/").lower().endswith(TIFF_SUFFIXES))
        for p in paths)


def _per_channel(text: str, parse, what: str) -> dict[int | None, Any]:
    """"V" (every channel) or "C=V,C=V" as {None: V} or {C: V, ...}."""
    out: dict[int | None, Any] = {}
    for part in text.split(","):
        key, sep, value = part.strip().rpartition("=") if "=" in part else ("", "", part)
        channel = None
        if sep:
            try:
                channel = int(key)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{what} {part!r}: {key!r} is not a channel "
                                                 f"number") from None
            if channel < 0:
                raise argparse.ArgumentTypeError(f"{what} {part!r}: channels count from 0")
        out[channel] = parse(value.strip())
    return out


def _limits(text: str) -> tuple[float, float]:
    low, sep, high = text.partition(":")
    try:
        pair = (float(low), float(high))
    except ValueError:
        raise argparse.ArgumentTypeError(f"contrast {text!r}: accepted LOW:HIGH, e.g. "
                                         f"100:4000") from None
    if not sep or not all(np.isfinite(pair)) or pair[1] <= pair[0]:
        raise argparse.ArgumentTypeError(f"contrast {text!r}: need finite LOW < HIGH")
    return pair


def _gamma(text: str) -> float:
    try:
        g = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"gamma {text!r} is not a number") from None
    if not (np.isfinite(g) and g > 0):
        raise argparse.ArgumentTypeError(f"gamma {text!r}: need a number > 0")
    return g


def _colormap(text: str) -> str:
    try:
        ChannelDisplay(0, 1, colormap=text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


@examples("0=100:4000,1=0:65535", "5:1", "a:b", "x=1:2", "1:nan", "-1=0:1")
def contrast_arg(text: str) -> dict[int | None, tuple[float, float]]:
    """LOW:HIGH for every channel, or CHANNEL=LOW:HIGH pairs."""
    return _per_channel(text, _limits, "contrast")


@examples("0=green,1=magenta", "nosuchmap", "0=nosuchmap")
def colormap_arg(text: str) -> dict[int | None, str]:
    """A colormap for every channel, or CHANNEL=NAME pairs."""
    return _per_channel(text, _colormap, "colormap")


@examples("0.8", "0", "-1", "x", "0=nan")
def gamma_arg(text: str) -> dict[int | None, float]:
    """A gamma for every channel, or CHANNEL=GAMMA pairs."""
    return _per_channel(text, _gamma, "gamma")


@examples("0,2", "", "a", "-1", "0,,1")
def channels_arg(text: str) -> list[int]:
    """The channels shown, by number from 0."""
    try:
        chosen = [int(p) for p in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"channels {text!r}: accepted numbers from 0 "
                                         f"separated by commas, e.g. 0,2") from None
    if any(c < 0 for c in chosen):
        raise argparse.ArgumentTypeError(f"channels {text!r}: channels count from 0")
    return chosen


def add_options(p: argparse.ArgumentParser) -> None:
    """The channel options of `engine view` (scientific images only)."""
    g = p.add_argument_group("scientific images (OME-Zarr, OME-TIFF, slides, URLs)")
    g.add_argument("--channels", type=channels_arg,
                   help="channels shown, e.g. 0,2 (default: all)")
    g.add_argument("--contrast", type=contrast_arg, metavar="LOW:HIGH",
                   help="contrast limits in raw values, for all channels or as "
                        "0=100:4000,1=0:65535 (default: the coarsest level's 0.5-99.5%%)")
    g.add_argument("--gamma", type=gamma_arg, help="gamma, all channels or 0=0.8,1=1.2")
    g.add_argument("--sampling", choices=SAMPLING, default="nearest",
                   help="nearest: each texel's own value (default); linear: bilinear "
                        "between texels, float data only (pick stays exact)")
    g.add_argument("--encoding", choices=ENCODINGS, default="exact",
                   help="exact: tiles in the source's own format (default); bc4: a quarter "
                        "of a 16-bit cache's GPU bytes, lossy on screen (pick stays exact)")
    g.add_argument("--colormap", type=colormap_arg,
                   help="gray, viridis, magma, inferno, red, green, ..., #rrggbb or a "
                        "matplotlib/cmap name; all channels or 0=green,1=magenta")


def _apply(displays: list[ChannelDisplay], args: argparse.Namespace) -> list[ChannelDisplay]:
    n = len(displays)
    for option in ("contrast", "gamma", "colormap", "channels"):
        given = getattr(args, option)
        if given is None:
            continue
        keys = given if option == "channels" else [k for k in given if k is not None]
        bad = [k for k in keys if k >= n]
        if bad:
            raise UsageError(f"--{option}: channel {bad[0]} out of range; the source has {n} "
                             f"(0 to {n - 1})")
    out = []
    for c, d in enumerate(displays):
        changes: dict[str, Any] = {}
        for option, fields in (("contrast", ("low", "high")), ("gamma", ("gamma",)),
                               ("colormap", ("colormap",))):
            given = getattr(args, option) or {}
            value = given.get(c, given.get(None))
            if value is not None:
                values = value if isinstance(value, tuple) else (value,)
                changes.update(zip(fields, values))
        if args.channels is not None:
            changes["visible"] = c in args.channels
        out.append(replace(d, **changes))
    return out


def _draw(view: ScienceView, frames: int | None) -> dict[str, Any]:
    """Frames until the picture is complete (or `frames`); what they took."""
    device = view.device
    t0 = time.perf_counter()
    stats = view.frame()
    device.finish()
    first_s = time.perf_counter() - t0
    drawn, peak = 1, device.ledger.total
    end = time.monotonic() + SETTLE_S
    while (stats.missing or stats.pending) and time.monotonic() < end and (
            frames is None or drawn < frames):
        view.reader.wait_idle(0.05)
        stats = view.frame()
        drawn += 1
        peak = max(peak, device.ledger.total)
    device.finish()
    return {"frames": drawn, "first_frame_s": round(first_s, 4),
            "complete": not (stats.missing or stats.pending),
            "complete_s": round(time.perf_counter() - t0, 4), "level": stats.level,
            "cache_bytes": stats.cache_bytes, "peak_bytes": peak,
            "budget_bytes": view.governor.budget_bytes, "reads": view.reader.reads,
            "cancelled": view.reader.cancelled}


def _window(args: argparse.Namespace, source: list[ChunkedSource],
            displays: list[ChannelDisplay]) -> dict[str, Any]:
    """The view in a window until closed (or --frames); ContextError when none opens."""
    from ..hosts.science import run_window

    def make(device: Device) -> ScienceView:
        return ScienceView(source, device, size=args.size, budget=args.budget,
                           displays=displays, sampling=args.sampling,
                           encoding=args.encoding)

    name = " + ".join(s.name for s in source)
    summary = run_window(make, size=args.size, frames=args.frames or 0,
                         title=f"engine view - {name}", screenshot=args.screenshot)
    return {"source": name, "window": True, **summary}


def _headless(args: argparse.Namespace, source: list[ChunkedSource],
              displays: list[ChannelDisplay]) -> dict[str, Any]:
    """Frames until the picture is complete (or --frames), then --screenshot."""
    device = Device.headless()
    try:
        with device.leak_check():
            view = ScienceView(source, device, size=args.size, budget=args.budget,
                               displays=displays, sampling=args.sampling,
                               encoding=args.encoding)
            try:
                summary = {"source": view.source.name, "dtype": view.source.dtype.name,
                           "channels": view.source.channels, "layers": len(source),
                           "levels": [list(lv.shape) for lv in source[0].levels],
                           **_draw(view, args.frames)}
                if args.screenshot is not None:
                    from PIL import Image
                    Image.fromarray(view.picture()).save(args.screenshot)
            finally:
                view.release()
    finally:
        device.shutdown()
    return summary


def run(args: argparse.Namespace) -> int:
    """Open the source; show it in a window, or headless until the picture is complete;
    write what was asked."""
    sources: list[ChunkedSource] = []
    summary: dict[str, Any] | None = None
    try:
        for path in args.paths:  # several: layers, their channels numbered in turn
            if not is_url(path) and not os.path.exists(path):  # a typo, like a picture's
                raise UsageError(f"{path}: no such file or folder")
            sources.append(open_image_source(path))
        displays = _apply([d for s in sources for d in default_displays(s)], args)
        if not headless_wanted(args.headless):
            try:
                summary = _window(args, sources, displays)
            except ContextError as exc:  # raised making the window, before any work
                log.warning("no window (%s): running headless", exc)
        if summary is None:
            summary = _headless(args, sources, displays)
    finally:
        for s in sources:
            s.close()
    if args.report is not None:
        with open(args.report, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))
    sys.stdout.flush()
    return 1 if summary.get("leaked_objects") else 0
