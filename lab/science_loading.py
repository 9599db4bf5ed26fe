"""Where a 20-channel ScienceView's loading frames go: the generated 4-channel OME-Zarr of
lab.science opened five times as five layers at 1920x1080, settled, then made to jump to an
unloaded place and pan 40 frames at one to one (twice), with four reader threads and with
two. Per frame: the CPU part (planned, uploaded, drawn), the main thread's own CPU time and
the whole frame; per phase (uploads, the quad table, covering missing tiles, the plan, the
draw), medians over the frames with more than 100 tiles pending. And how much of the GIL
the readers take: a pure-Python loop's speed on the main thread while they read 6,400
tiles, against its speed alone.

    python -m lab.science_loading [--size 16384] [--json OUT]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from engine.gl.device import Device
from engine.science import view as view_module
from engine.science.display import ChannelDisplay
from engine.science.readers import open_image_source
from engine.science.reads import TileReader
from engine.science.source import TileKey

from .science import LIMITS, make_image

COLOURS = ("green", "magenta", "cyan", "yellow")
LAYERS = 5
PHASES = ("_upload", "_plan", "_quads", "_size_cache")


def spin(seconds: float) -> int:
    """Iterations of a pure-Python loop in `seconds`."""
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(1000):
            n += 1
    return n


def gil_share(path: Path, workers: int) -> dict[str, Any]:
    """The main thread's loop speed while `workers` readers read 40x40 tiles of 4 channels,
    against its speed alone."""
    source = open_image_source(str(path))
    try:
        alone = spin(0.5)
        reader = TileReader(source, workers)
        start = time.perf_counter()
        reader.want([TileKey(0, c, y, x) for c in range(4) for y in range(40) for x in range(40)])
        reading = spin(0.5)
        reader.wait_idle(120)
        seconds = time.perf_counter() - start
        reader.close()
    finally:
        source.close()
    return {"workers": workers, "loop_alone": alone, "loop_while_reading": reading,
            "ratio": reading / alone, "reads": reader.reads, "read_s": seconds}


def loading_frames(path: Path, size: int, workers: int) -> dict[str, Any]:
    """Two jumps to unloaded places, 40 frames of pan each: per-frame times and phases."""
    device = Device.headless()
    lo, hi = LIMITS
    view = view_module.ScienceView(
        [str(path)] * LAYERS, device, size=(1920, 1080), budget="512MiB", workers=workers,
        displays=[ChannelDisplay(lo, hi, colormap=c) for c in COLOURS] * LAYERS)
    spent: collections.defaultdict[str, float] = collections.defaultdict(float)

    def timed(obj: Any, name: str, label: str) -> None:
        call = getattr(obj, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                spent[label] += (time.perf_counter() - start) * 1e3
        setattr(obj, name, wrapper)

    frames: list[dict[str, Any]] = []
    try:
        view.set_view(size / 4, size / 4, 1.0)
        view.settle(60)
        for name in PHASES:
            timed(view, name, name.strip("_"))
        timed(view._covers, "cover", "cover")
        timed(view.painter, "draw", "draw")
        for x, y in ((size * 0.73, size * 0.55), (size * 0.3, size * 0.8)):
            for i in range(40):
                view.set_view(x + 16 * i, y, 1.0)
                spent.clear()
                start, own = time.perf_counter(), time.thread_time()
                stats = view.frame()
                submitted, own_end = time.perf_counter(), time.thread_time()
                device.finish()
                done = time.perf_counter()
                frames.append({"cpu_ms": (submitted - start) * 1e3,
                               "own_cpu_ms": (own_end - own) * 1e3,
                               "frame_ms": (done - start) * 1e3, "pending": stats.pending,
                               "phases_ms": dict(spent)})
    finally:
        view.release()
        device.shutdown()
    loading = [f for f in frames if f["pending"] > 100]
    cpu = sorted(f["cpu_ms"] for f in frames)
    return {
        "workers": workers, "frames": frames,
        "cpu_ms_p50": statistics.median(cpu), "cpu_ms_p95": cpu[int(0.95 * len(cpu))],
        "frames_over_16_7_ms": sum(f["frame_ms"] > 1000 / 60 for f in frames),
        "loading_frames": len(loading),
        "loading_median_ms": {k: statistics.median(f[k] for f in loading)
                              for k in ("cpu_ms", "own_cpu_ms")} if loading else {},
        "loading_phase_median_ms": {
            p: statistics.median(f["phases_ms"].get(p, 0.0) for f in loading)
            for p in ("upload", "quads", "cover", "plan", "draw", "size_cache")}
        if loading else {}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.science_loading", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=16384, help="image edge in pixels")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    cache = Path(os.environ.get("ENGINE_CACHE", Path.home() / ".cache" / "engine"))
    root = cache / "bench-science"
    root.mkdir(parents=True, exist_ok=True)
    path, _ = make_image(root, args.size)
    result: dict[str, Any] = {"size": args.size, "layers": LAYERS, "screen": [1920, 1080],
                              "date": time.strftime("%Y-%m-%d"),
                              "gil": [gil_share(path, w) for w in (4, 2)],
                              "runs": [loading_frames(path, args.size, w) for w in (4, 2)]}
    for g in result["gil"]:
        print(f"readers {g['workers']}: main-thread loop at {g['ratio']:.2f}x while "
              f"{g['reads']} tiles are read in {g['read_s']:.2f} s")
    for r in result["runs"]:
        print(f"readers {r['workers']}: CPU part p50/p95 {r['cpu_ms_p50']:.1f}/"
              f"{r['cpu_ms_p95']:.1f} ms, {r['frames_over_16_7_ms']} of {len(r['frames'])} "
              f"frames over 16.7 ms; loading frames {r['loading_median_ms']}, phases "
              f"{ {k: round(v, 2) for k, v in r['loading_phase_median_ms'].items()} }")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
