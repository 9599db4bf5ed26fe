"""Deep zoom into one huge image from disk under a fixed budget (issue 23: a 65536^2 image
viewed under 128 MiB with camera cuts of at most 150 ms p95 from disk).

    python -m lab bench deepzoom                     (16384^2, quick: 4096^2)
    python -m lab.deepzoom --edge 65536 --source huge.tif --budget 128MiB \\
        --size 1920x1080 --cuts 32 --json out.json

The data: a tiled TIFF (generated once into the work folder by lab.viewers'
generator, or `--source`), baked once by `python -m engine bake` in a subprocess (by strips
for an image that large, with the tile-contiguous sidecar), its wall time recorded (its
memory: lab/bake_rss.py). The view is what `python -m engine view baked.ktx2` shows: an
`ImageView` of the baked file through the shipped streaming provider under the budget, the
image larger than the driver's largest texture streaming as a virtual texture.

The flight: the image fitted, then `cuts` camera cuts, each to a random point of the image
at one image pixel per screen pixel (the finest level everywhere on screen). Before each cut
the baked file and its sidecar are dropped from the OS page cache (posix_fadvise), so the
cut's tiles come from the disk. A cut is done when 95% of the pixels of a feedback pass
drawn at or after the cut's frame find the level they want resident
(`VirtualTextureSystem.feedback_coverage`); its time is wall time from the cut to the end of
that frame, frames drawn back to back. Per run: the cuts' p50 / p95 / worst, frames over the
budget, the ledger's peak, GL objects leaked when the view is released.
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.cli_args import budget_arg, input_file, positive_int, size_arg
from engine.errors import UsageError
from engine.gl.device import Device
from engine.memory.sizes import format_bytes
from engine.textures.cachedir import cache_root
from engine.textures.tiled import sidecar_path
from .common import SuiteResult, drop_page_cache

log = logging.getLogger(__name__)

CUT_GOAL_P95_MS = 150.0
REACHED = 0.95


@dataclass(frozen=True)
class DeepZoomProfile:
    edge: int = 16384
    budget: int = 128 << 20
    size: tuple[int, int] = (1280, 720)
    cuts: int = 24
    wait_s: float = 20.0
    settle_frames: int = 30
    seed: int = 23
    format: str = "bc1"


def profile_for(quick: bool) -> DeepZoomProfile:
    if quick:
        return DeepZoomProfile(edge=4096, budget=32 << 20, size=(320, 180), cuts=6,
                               wait_s=10.0, settle_frames=10)
    return DeepZoomProfile()


def bake(source: Path, out: Path, fmt: str) -> tuple[Path, dict[str, Any]]:
    """The baked KTX2 of `source` in `out` (baked once, kept), and what the bake took."""
    baked = out / f"{source.stem}.ktx2"
    if baked.is_file() and sidecar_path(baked).is_file():
        return baked, {"baked": "kept"}
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "engine", "bake", str(source), "-o", str(out), "--format",
           fmt, "--max-pixels", str(2 ** 33)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0 or not baked.is_file():
        said = done.stderr.strip().splitlines()
        raise UsageError(f"bake of {source} failed (rc {done.returncode}): "
                         f"{said[-1] if said else 'no message'}")
    return baked, {"baked": "now", "bake_wall_s": round(time.perf_counter() - start, 2),
                   "baked_bytes": baked.stat().st_size,
                   "sidecar_bytes": sidecar_path(baked).stat().st_size}


def cut_points(width: int, height: int, size: tuple[int, int], count: int, seed: int
               ) -> list[tuple[float, float]]:
    """`count` random image points whose one-to-one view lies inside the image."""
    rng = np.random.default_rng(seed)
    mx, my = min(width / 2, size[0] / 2), min(height / 2, size[1] / 2)
    xs = rng.uniform(mx, width - mx, count)
    ys = rng.uniform(my, height - my, count)
    return [(float(x), float(y)) for x, y in zip(xs, ys)]


def fly(profile: DeepZoomProfile, baked: Path) -> dict[str, Any]:
    """The cuts of one view of `baked` (module docstring); its figures."""
    from engine.app.loop import FrameContext, FrameLoop
    from engine.hosts.run import finish_run
    from engine.streaming.provider import StreamingProvider
    from engine.view.wall import ImageView

    device = Device.headless()
    mark = device.tracker.mark()
    view = ImageView(baked, progress=False)
    state: dict[str, Any] = {"cut_frame": 1 << 62, "at": 0.0, "virtual": False}

    def probe(ctx: FrameContext) -> None:
        provider = ctx.provider
        assert isinstance(provider, StreamingProvider)
        vts = provider.virtual_system()
        state["virtual"] = vts is not None and bool((provider.virtual_ids() >= 0).any())
        if vts is None or vts.feedback_frame < state["cut_frame"]:
            state["at"] = 0.0  # feedback of the view before the cut cannot finish it
        else:
            state["at"] = vts.feedback_coverage()[0]

    loop = FrameLoop.embedded(device, view, size=profile.size, budget=profile.budget,
                              on_frame=view.hooks(False) + [probe])
    frame = over = peak = 0
    ms: list[float] = []

    def step() -> None:
        nonlocal frame, over, peak
        r = loop.step(frame)
        frame += 1
        over += int(bool(r.get("over_budget_reason")))  # the frame's peak, not its end
        peak = max(peak, int(r["peak_bytes"]))
        ms.append(float(r["ms"]))

    cuts: list[dict[str, Any]] = []
    try:
        start = time.perf_counter()
        step()
        first_frame_s = time.perf_counter() - start
        for _ in range(profile.settle_frames):
            step()
        it = view.items[0]
        nav = view.navigator
        for point in cut_points(it.width, it.height, profile.size, profile.cuts, profile.seed):
            dropped = drop_page_cache(baked, sidecar_path(baked))
            nav.one_to_one(it.rect, it.height)
            nav.x = it.rect.x0 + point[0] / it.width * it.rect.width
            nav.y = it.rect.y1 - point[1] / it.height * it.rect.height
            state["cut_frame"] = frame
            began, first = time.perf_counter(), frame
            row: dict[str, Any] = {"point": [round(point[0]), round(point[1])],
                                   "from_disk": dropped, "reached": False}
            while time.perf_counter() - began < profile.wait_s:
                step()
                if state["at"] >= REACHED:
                    row.update(reached=True, ms=round((time.perf_counter() - began) * 1e3, 2),
                               frames=frame - first)
                    break
            row["at_wanted"] = round(state["at"], 4)
            cuts.append(row)
        stats = loop.provider.stats() if loop.provider is not None else None
        resident = int(stats.resident_bytes) if stats is not None else None
    finally:
        loop.release()
        leaked = finish_run(device, mark)
        renderer = device.caps.renderer
        device.shutdown()
    times = [c["ms"] for c in cuts if c["reached"]]
    return {
        "width": view.items[0].width, "height": view.items[0].height,
        "virtual": state["virtual"], "renderer": renderer,
        "first_frame_s": round(first_frame_s, 3), "frames": frame,
        "frame_ms_p50": round(statistics.median(ms), 2),
        "cuts": len(cuts), "reached": len(times),
        "cut_p50_ms": round(float(np.percentile(times, 50)), 1) if times else None,
        "cut_p95_ms": round(float(np.percentile(times, 95)), 1) if times else None,
        "cut_max_ms": round(max(times), 1) if times else None,
        "over_budget_frames": over, "peak_bytes": peak, "budget_bytes": profile.budget,
        "resident_bytes_end": resident, "leaked_objects": leaked, "cut_rows": cuts,
    }


def goal_notes(r: dict[str, Any], profile: DeepZoomProfile) -> list[str]:
    p95 = r["cut_p95_ms"] if r["reached"] == r["cuts"] else float("inf")
    met = "met" if p95 <= CUT_GOAL_P95_MS else "MISSED"
    return [f"goal cut p95 <= {CUT_GOAL_P95_MS:g} ms from disk under "
            f"{format_bytes(profile.budget)}: {met} (p95 {r['cut_p95_ms']} ms, "
            f"{r['reached']} of {r['cuts']} reached {REACHED:.0%}); "
            f"{r['over_budget_frames']} frames over budget; peak {format_bytes(r['peak_bytes'])}"]


def run_deepzoom(profile: DeepZoomProfile, work: Path, source: Path | None = None
                 ) -> dict[str, Any]:
    from .viewers import make_huge

    work.mkdir(parents=True, exist_ok=True)
    src = source or make_huge(work / f"huge_{profile.edge}.tif", (profile.edge, profile.edge))
    baked, made = bake(src, work / f"baked_{profile.format}", profile.format)
    result = {"source": str(src), **made, **fly(profile, baked)}
    result["notes"] = goal_notes(result, profile)
    return result


def run(device: Device, quick: bool = False) -> SuiteResult:
    """The `bench` suite: a fresh work folder for the quick run, the cache's otherwise."""
    profile = profile_for(quick)
    if quick:
        with tempfile.TemporaryDirectory(prefix="engine-deepzoom-") as tmp:
            r = run_deepzoom(profile, Path(tmp))
    else:
        r = run_deepzoom(profile, cache_root() / "bench-deepzoom")
    row = {k: v for k, v in r.items() if k != "cut_rows"}
    return SuiteResult("deepzoom", [row], r["notes"])


def budget_bytes_arg(text: str) -> int:
    """A budget of so many bytes (a percentage names no fixed slice to measure against)."""
    spec = budget_arg(text)
    if spec.absolute is None:
        raise argparse.ArgumentTypeError(f"{text!r} is a share of the device; accepted: a "
                                         f"size such as 128MiB")
    return int(spec.absolute)


def seconds_arg(text: str) -> float:
    """Seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is out of range; accepted: seconds > 0")
    return value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.deepzoom",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--edge", type=positive_int, default=DeepZoomProfile.edge,
                   help="side of the generated square image (without --source)")
    p.add_argument("--source", type=input_file, help="an image to bake and view instead")
    p.add_argument("--budget", type=budget_bytes_arg, default=128 << 20, help="GPU memory budget of the view")
    p.add_argument("--size", type=size_arg, default=DeepZoomProfile.size, help="output WxH")
    p.add_argument("--cuts", type=positive_int, default=DeepZoomProfile.cuts)
    p.add_argument("--wait", type=seconds_arg, default=DeepZoomProfile.wait_s,
                   help="seconds a cut may take before it counts as not reached")
    p.add_argument("--format", choices=("bc1", "bc7"), default="bc1")
    p.add_argument("--work", type=Path, help="work folder (default: the engine cache's)")
    p.add_argument("--json", type=Path, help="write the result here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    profile = DeepZoomProfile(edge=args.edge, budget=args.budget,
                              size=args.size, cuts=args.cuts, wait_s=args.wait,
                              format=args.format)
    try:
        r = run_deepzoom(profile, args.work or cache_root() / "bench-deepzoom", args.source)
    except UsageError as exc:
        p.exit(2, f"{p.prog}: error: {exc}\n")
    text = json.dumps({**r, "profile": asdict(profile)}, indent=1)
    if args.json:
        args.json.write_text(text)
    print(json.dumps({k: v for k, v in r.items() if k != "cut_rows"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
