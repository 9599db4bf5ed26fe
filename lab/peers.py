"""Peers: the engine against what other Python stacks do with the same textures, and against
the hardware ceiling.

1. VRAM at equal quality. The naive moderngl path (startup.NaiveProvider: PNG, RGBA8, driver
   mips, all resident) flies the gallery once and its frames are the reference. The engine
   then flies the same frames at growing budgets (fractions of the naive path's ledger
   peak) until every settled frame scores >= 40 dB against the naive frame at the same
   camera time; the figure is that flight's ledger peak (and NVX bytes where the driver
   has them) over the naive path's.
2. moderngl-window's own texture loader (resources.textures.load, in its headless setting:
   activate_context with our context) on the same PNGs: seconds and bytes per texture next to
   the naive path and the engine.
3. Panda3D, the one Python engine with a GPU-memory limit (graphics-memory-limit, an LRU of
   whole textures), run in a child process (its EGL context must not become current in this
   one) on the same PNGs: load time, and its own graphics-memory figure over a fly-by
   without and with a limit. Where it cannot run, the exact reason goes in the notes.
4. The ceiling: host memcpy and a raw synchronous compressed-upload loop of the same bytes.
"""
from __future__ import annotations

import json
import logging
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine import textures
from engine.errors import BudgetError
from engine.gl.device import Device
from engine.gl.tracking import UserObject
from engine.memory.ledger import Category
from engine.memory.sizes import format_bytes, mip_count, texture_bytes
from engine.streaming.levels.backends import CATEGORY
from engine.streaming.levels.streamer import LevelStreamer
from .common import SuiteResult
from .startup import NAIVE, NaiveProvider, naive_pngs
from .streaming import (
    QUALITY_DB,
    GalleryProfile,
    chain_bytes,
    chain_levels,
    fly,
    gallery_paths,
    gallery_profile,
    mib,
    raw_upload_seconds,
    use_bench_streamer,
)
from .upload import memcpy_seconds

log = logging.getLogger(__name__)

VRAM_GOAL = 0.10  # engine VRAM at >= 40 dB over the naive path's
FRACTIONS = (0.02, 0.05, 0.10, 0.25, 0.5, 1.0)
PANDA_LIMIT_FRACTION = 0.25
PANDA_TIMEOUT_S = 180


def moderngl_window_loader(device: Device) -> tuple[str, Callable[[Path], Any]]:
    """moderngl-window's version and its PNG texture loader (mipmapped) on `device`'s context,
    lent to moderngl-window as its current one (its headless setting), so both load into the
    same context. Raises ImportError without the library."""
    import moderngl_window
    from moderngl_window import resources
    from moderngl_window.meta import TextureDescription

    moderngl_window.activate_context(ctx=device.lend_context())

    def load(png: Path) -> Any:
        return resources.textures.load(TextureDescription(path=str(png), mipmap=True))
    return moderngl_window.__version__, load


# ---------------------------------------------------------------------------- 1. VRAM
def _vram_rows(device: Device, profile: GalleryProfile) -> tuple[list[dict], list[str]]:
    count = profile.peers_count
    paths = gallery_paths(profile, count)
    naive_pngs(paths)
    naive = fly(device, profile, NAIVE, count=count)
    footprint = naive.peak_bytes
    rows = [{"part": "vram@40dB", "path": "naive (PNG+RGBA8, all resident)",
             "budget_pct": None, "ledger_peak_mib": mib(footprint), "of_naive": 1.0,
             "nvx_used_mib": mib(naive.vram_used)}]
    provider = use_bench_streamer(footprint)
    base = device.ledger.total
    passed = None
    refused: list[int] = []
    for fraction in FRACTIONS:
        try:
            flight = fly(device, profile, provider, budget=base + int(fraction * footprint),
                         reference=naive.capture.images, count=count)
        except BudgetError:  # below what the scene needs to start: refused before frame 0
            refused.append(round(fraction * 100))
            continue
        scores = flight.capture.settled(profile.settle_frames)
        ok = bool(scores) and min(scores) >= QUALITY_DB
        rows.append({"part": "vram@40dB", "path": "engine (streaming)",
                     "budget_pct": round(fraction * 100), "ledger_peak_mib": mib(flight.peak_bytes),
                     "of_naive": flight.peak_bytes / footprint,
                     "nvx_used_mib": mib(flight.vram_used),
                     "nvx_of_naive": flight.vram_used / naive.vram_used
                     if flight.vram_used and naive.vram_used else None,
                     "psnr_min_db": min(scores) if scores else None,
                     "psnr_median_db": statistics.median(scores) if scores else None,
                     "all_ge_40db": ok})
        if ok:
            passed = rows[-1]
            break
    notes = [(f"vram@40dB: {count} gallery textures, {profile.frames} frames; budgets tried "
             "from the smallest up, stopping at the first whose settled frames all score "
             f">= {QUALITY_DB:g} dB against the naive frames")]
    if refused:
        notes.append(f"vram@40dB: budgets of {', '.join(f'{p}%' for p in refused)} are below "
                     "what the scene needs to start (refused before the first frame)")
    if passed is None:
        notes.append(f"goal: engine VRAM <= {VRAM_GOAL:.0%} of naive at >= {QUALITY_DB:g} dB: "
                     "NOT met (no budget tried reached it)")
    else:
        met = passed["of_naive"] <= VRAM_GOAL
        bound = " (the smallest budget run: an upper bound)" if passed is rows[1] else ""
        notes.append(f"goal: engine VRAM <= {VRAM_GOAL:.0%} of naive at >= {QUALITY_DB:g} dB: "
                     f"{'met' if met else 'NOT met'} ({passed['of_naive']:.1%} at the "
                     f"{passed['budget_pct']}% budget{bound})")
    return rows, notes


# ---------------------------------------------------------------------------- 2. loaders
def _timed_loads(device: Device, load, items: Sequence) -> tuple[float, list]:
    """Median seconds per item of `load(item)` (GPU finished after each), and what it made."""
    made, times = [], []
    for item in items:
        start = time.perf_counter()
        made.append(load(item))
        device.finish()
        times.append(time.perf_counter() - start)
    return statistics.median(times), made


def _loader_rows(device: Device, paths: Sequence[Path], pngs: Sequence[Path]
                 ) -> tuple[list[dict], list[str]]:
    """(name, seconds per texture, GPU bytes per texture) of each loader, as rows with
    their ratios to moderngl-window's loader (or to the naive path without it)."""
    from PIL import Image

    with Image.open(pngs[0]) as im:
        w, h = im.size
    rgba_bytes = texture_bytes("RGBA8", w, h, levels=mip_count(w, h))
    loaders: list[tuple[str, float, float]] = []
    notes: list[str] = []
    try:
        version, mglw_load = moderngl_window_loader(device)  # its headless setting: our context
    except ImportError as exc:
        notes.append(f"moderngl-window not installed ({exc}): its loader was not measured")
    else:
        def load(png: Path):
            tex = mglw_load(png)
            device.track_user_object(UserObject(tex), "texture", rgba_bytes,
                                     f"mglw {png.name}", category=Category.USER)
            return tex
        made: list = []
        try:
            seconds, made = _timed_loads(device, load, pngs)
        finally:
            for tex in made:
                tex.release()
            device.flush_releases()  # the ledger forgets what was released behind its back
        loaders.append((f"moderngl-window {version} (PNG, RGBA8 + mips)",
                        seconds, rgba_bytes))
    naive = NaiveProvider(device)
    try:
        seconds, _ = _timed_loads(device, lambda p: naive.register(p.stem, p), paths)
    finally:
        naive.release()
    loaders.append(("naive (PNG, RGBA8_SRGB + mips)", seconds, rgba_bytes))
    streamer = LevelStreamer(device)
    try:
        register_s, _ = _timed_loads(device, lambda p: streamer.register(p.stem, p), paths)
        tails = device.ledger.category_total(CATEGORY) / len(paths)
        streamer.grant(2 * chain_bytes(paths))  # a pool that holds every chain: a load test
        start = time.perf_counter()
        done = streamer.preload(timeout=120.0)
        device.finish()
        preload_s = (time.perf_counter() - start) / len(paths)
    finally:
        streamer.release()
    loaders.append(("engine register (tail resident)", register_s, tails))
    loaders.append(("engine register + preload (BC7, full chain)", register_s + preload_s,
                    chain_bytes(paths) / len(paths)))
    if not done:
        notes.append("engine preload did not finish within its timeout")
    ref_s, ref_bytes = loaders[0][1], loaders[0][2]
    rows = [{"part": "loader", "path": name, "textures": len(paths), "size": f"{w}x{h}",
             "s_per_texture": seconds, "mib_per_texture": mib(nbytes),
             "time_ratio": seconds / ref_s, "bytes_ratio": nbytes / ref_bytes}
            for name, seconds, nbytes in loaders]
    notes.append(f"loader ratios are to '{loaders[0][0]}'; seconds per texture are medians, "
                 "GPU finished after each load")
    return rows, notes


# ---------------------------------------------------------------------------- 3. Panda3D
def panda_child() -> None:
    """Child-process entry: load the PNGs with Panda3D offscreen (EGL, no display), fly a
    corridor of cards past them with no limit and then with graphics-memory-limit, print
    one JSON line. Run as `python -c "from lab.peers import panda_child;
    panda_child()" ARGS_JSON`."""
    args = json.loads(sys.argv[1])
    from panda3d.core import CardMaker, SamplerState, StringStream, loadPrcFileData
    w, h = args["size"]
    loadPrcFileData("", f"window-type offscreen\nload-display p3headlessgl\n"
                        f"aux-display p3headlessgl\naudio-library-name null\nwin-size {w} {h}\n"
                        "sync-video false\nnotify-level error\nnotify-level-device fatal\n")
    from direct.showbase.ShowBase import ShowBase

    base = ShowBase()
    gsg = base.win.getGsg()
    pgo = gsg.getPreparedObjects()
    card = CardMaker("panel")
    card.setFrame(-1.5, 1.5, -1.5, 1.5)
    load_times = []
    for i, png in enumerate(args["pngs"]):
        start = time.perf_counter()
        tex = base.loader.loadTexture(png)
        tex.setMinfilter(SamplerState.FT_linear_mipmap_linear)
        load_times.append(time.perf_counter() - start)
        node = base.render.attachNewNode(card.generate())
        side = -1.0 if i % 2 == 0 else 1.0
        node.setPos(side * 3.48, -(i // 2) * 4.0, 1.9)
        node.setH(90.0 * side)
        node.setTexture(tex)
    base.disableMouse()

    def lru_bytes() -> int:
        out = StringStream()
        pgo.showGraphicsMemoryLru(out)
        found = re.search(rb"graphics_memory_lru, (\d+) of", out.getData())
        return int(found.group(1)) if found else -1

    def flight(limit: int | None) -> dict:
        if limit is not None:
            pgo.setGraphicsMemoryLimit(limit)
        length = (len(args["pngs"]) // 2 + 1) * 4.0
        frames, times, sizes = args["frames"], [], []
        for f in range(frames):
            y = 3.0 - f * length / frames
            base.camera.setPos(0, y, 1.7)
            base.camera.lookAt(0, y - 6.0, 1.8)
            start = time.perf_counter()
            base.graphicsEngine.renderFrame()
            times.append(time.perf_counter() - start)
            sizes.append(lru_bytes())
        settled = sorted(times[1:]) or times
        return {"limit": limit, "first_frame_s": times[0], "peak_bytes": max(sizes),
                "end_bytes": sizes[-1], "p99_ms": settled[int(0.99 * (len(settled) - 1))] * 1e3,
                "p50_ms": settled[len(settled) // 2] * 1e3}

    free = flight(None)
    pgo.releaseAllTextures()  # the limited flight starts, like the first, with none on the GPU
    limited = flight(int(free["peak_bytes"] * args["limit_fraction"]))
    print(json.dumps({"renderer": gsg.getDriverRenderer(),
                      "interface": base.win.getPipe().getInterfaceName(),
                      "load_s": load_times, "flights": [free, limited]}))


def _panda_rows(pngs: Sequence[Path], profile: GalleryProfile) -> tuple[list[dict], list[str]]:
    try:
        import panda3d
    except ImportError as exc:
        return [], [(f"Panda3D: not installed here ({exc}); `pip install panda3d` (1.10 wheels "
                    "carry p3headlessgl, its EGL offscreen pipe) and run again")]
    args = {"pngs": [str(p) for p in pngs], "size": list(profile.size),
            "frames": min(profile.frames, 240), "limit_fraction": PANDA_LIMIT_FRACTION}
    cmd = [sys.executable, "-c", "from lab.peers import panda_child; panda_child()",
           json.dumps(args)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              timeout=PANDA_TIMEOUT_S, cwd=Path(__file__).resolve().parents[2])
    except subprocess.TimeoutExpired:
        return [], [(f"Panda3D {panda3d.__version__}: offscreen run exceeded "
                    f"{PANDA_TIMEOUT_S} s")]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        why = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return [], [(f"Panda3D {panda3d.__version__}: offscreen rendering failed here "
                    f"(exit {proc.returncode}): {why}")]
    out = json.loads(lines[-1])
    rows = []
    for flight in out["flights"]:
        limit = flight["limit"]
        rows.append({"part": "panda3d", "path": f"Panda3D {panda3d.__version__} "
                     + ("no limit" if limit is None else f"limit {format_bytes(limit)}"),
                     "textures": len(pngs), "s_per_texture": statistics.median(out["load_s"]),
                     "first_frame_s": flight["first_frame_s"],
                     "panda_peak_mib": mib(flight["peak_bytes"]),
                     "panda_end_mib": mib(flight["end_bytes"]),
                     "peak_of_limit": flight["peak_bytes"] / limit if limit else None,
                     "p99_ms": flight["p99_ms"], "p50_ms": flight["p50_ms"]})
    notes = [(f"Panda3D ran offscreen on '{out['renderer']}' ({out['interface']}); its bytes "
              "are its own LRU accounting (whole RGBA8 textures with mips, plus vertex "
              "buffers): every visible texture is resident whole, the LRU evicts whole "
              "textures gradually (peak_of_limit: how far above the limit it went) and "
              "re-uploads one when it is seen again; the RAM image of every texture stays "
              "on the host; its frame times are renderFrame's CPU-side time, limited flight "
              f"at {PANDA_LIMIT_FRACTION:.0%} of the unlimited peak")]
    return rows, notes


# ---------------------------------------------------------------------------- 4. ceiling
def _ceiling_rows(device: Device, paths: Sequence[Path], repeats: int) -> list[dict]:
    """Host memcpy and a raw synchronous upload loop of every level of `paths`."""
    levels = chain_levels(paths, [len(textures.open(p).levels) for p in paths])
    data = b"".join(d for _, _, d in levels)
    raw_s = statistics.median(raw_upload_seconds(device, levels) for _ in range(repeats))
    memcpy_s = statistics.median(memcpy_seconds(data, 1) for _ in range(repeats))
    return [{"part": "ceiling", "path": "host memcpy", "mib": mib(len(data)),
             "MBps": len(data) / memcpy_s / 1e6, "of_memcpy": 1.0},
            {"part": "ceiling", "path": "raw compressed upload (sync)",
             "mib": mib(len(data)), "MBps": len(data) / raw_s / 1e6,
             "of_memcpy": memcpy_s / raw_s}]


# ---------------------------------------------------------------------------- suite
def run(device: Device, quick: bool = False) -> SuiteResult:
    result = SuiteResult("peers")
    profile = gallery_profile(device, quick)
    result.notes.append(profile.describe())
    rows, notes = _vram_rows(device, profile)
    result.rows += rows
    result.notes += notes
    sample = gallery_paths(profile, profile.sample_textures)
    pngs = naive_pngs(sample)
    for rows, notes in (_loader_rows(device, sample, pngs), _panda_rows(pngs, profile)):
        result.rows += rows
        result.notes += notes
    result.rows += _ceiling_rows(device, sample, profile.repeats)
    return result
