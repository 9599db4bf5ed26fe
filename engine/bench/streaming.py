"""Texture streamer benchmarks, each figure measured against a baseline in the same run.

(a) the wall (issue 12), where the budget binds: the wall demo's scripted flight (overview,
    dive to one image at full size, pan along its row, cuts, zoom out) with the render scale
    held at 1 and the streamer given a fixed pool of tails + f x (peak wanted - tails) for f
    = 100/50/25/10 %, the peak *wanted* bytes measured by an unconstrained streamed flight
    (budgets set from the all-resident footprint never bound: the camera asks for a few % of
    it). Per budget: PSNR of every frame against the all-resident frame (min, median), the
    screen-weighted coarser-than-wanted fractions, frames over the pool (must be 0),
    evictions and re-uploads; the same flights with two baselines run by the same executor
    (whole textures with LRU eviction, as Panda3D does; one global mip bias);
(b) efficiency per segment: resident texture bytes over the screen's own need;
(c) prefetch on vs off: coarser-than-wanted on the pan and zoom segments;
(d) camera cuts: time from a cut until 95% of the visible screen weight is at its wanted
    level, p50/p95, from the OS page cache and from disk (pages dropped with
    posix_fadvise(POSIX_FADV_DONTNEED) per file, checked by timing a read after the drop);
(e) scale: bulk header registration, RAM per texture, streamer registration and per-frame
    CPU at 10,000 textures;
(f) upload: bytes the streamer makes resident per second of its own frame time, over a raw
    synchronous `Device.upload` loop of the same level bytes (gallery textures);
(g) latency: request-to-resident time of a texture's whole chain, first from the file (OS
    page cache dropped where the OS allows it) and then from the streamer's RAM cache.

Why fly at the wall-clock rate: the streamer fades levels in over wall time and its I/O
threads read in wall time, while the scene advances a fixed step per frame. Unpaced frames on
a fast GPU would fly many times faster than real time and starve the streamer; on a slow
software rasterizer the flight is slower than real time, which favours the streamer (the
notes say so).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pyglm import glm

from .. import textures
from ..app.providers import register_provider
from ..app.run import FrameContext, SceneFactory, run_scene
from ..demos.gallery_assets import gallery_textures
from ..gl.device import Device
from ..memory.sizes import format_bytes, texture_bytes
from ..render.camera import mat_to_numpy
from ..streaming.contract import TEXTURE_SLOTS, FrameView
from ..streaming.provider import TextureStreamer
from ..textures.quality import psnr
from .common import SuiteResult

log = logging.getLogger(__name__)

QUALITY_DB = 40.0
IDENTICAL_DB = 100.0  # the score of identical images (inf is not valid JSON)
BUDGET_FRACTIONS = (1.0, 0.5, 0.25, 0.1)
GOAL_FRACTION = 0.25  # every settled frame >= QUALITY_DB at this budget
PACING_GOAL = 1.25  # p99 frame time streamed / all-resident
UPLOAD_GOAL = 0.70  # streamer bytes/s over the raw upload loop (on a GPU)
BENCH_STREAMING = "bench-streaming"
DEFAULT_STAGING = 4 << 20
SOFTWARE_RENDERERS = ("llvmpipe", "softpipe", "swrast", "software")


# ---------------------------------------------------------------------------- the flight
@dataclass(frozen=True)
class GalleryProfile:
    """The gallery flight the benchmarks use on this device, and why that size."""

    name: str
    count: int
    texture_size: int
    size: tuple[int, int]  # output resolution
    frames: int  # frames per flight
    capture_every: int  # score every K-th frame
    settle_frames: int  # frames before the first scored one
    speed: float  # metres per second along the corridor
    repeats: int
    naive_repeats: int  # the naive path loads every texture: slow, so fewer repeats
    sample_textures: int  # textures the upload and latency measurements use
    peers_count: int  # textures of the peers suite's gallery
    why: str

    def options(self, count: int | None = None) -> dict:
        return {"count": count or self.count, "texture_size": self.texture_size,
                "format": "bc7", "speed": self.speed}

    def describe(self) -> str:
        return (f"profile '{self.name}': gallery {self.count} x {self.texture_size}^2 BC7, "
                f"{self.size[0]}x{self.size[1]}, {self.frames} frames at {self.speed:g} m/s, "
                f"{self.repeats} repeat(s): {self.why}")


QUICK = GalleryProfile("quick", 12, 512, (192, 108), 90, 6, 30, 10.0, 1, 1, 6, 12,
                       "CI smoke run; figures are not meaningful at this size")
SOFTWARE = GalleryProfile(
    "software", 64, 2048, (480, 270), 360, 12, 60, 10.0, 3, 3, 16, 64,
    "software rasterizer: textures live in host RAM and the naive path's all-resident "
    "200 x 4096^2 RGBA8 (17.9 GB) does not fit this machine's RAM, so 64 x 2048^2; frames "
    "are slower than real time here, which gives the streamer more wall time per metre")
GPU = GalleryProfile(
    "gpu", 200, 4096, (1280, 720), 360, 30, 60, 10.0, 3, 1, 16, 32,
    "the issue's gallery, 200 x 4096^2 BC7 (4.4 GB with mips); flights, samples and the "
    "peers gallery sized so that every suite together fits 8 minutes on 16 cores, the "
    "naive path's 200 PNG decodes (~2 minutes) and the gallery's generation included")


def mib(nbytes: float | None) -> float | None:
    """Bytes as MiB: readable in the tables, still a number in the JSON."""
    return None if nbytes is None else nbytes / (1 << 20)


def is_software(device: Device) -> bool:
    renderer = device.caps.renderer.lower()
    return any(name in renderer for name in SOFTWARE_RENDERERS)


def gallery_profile(device: Device, quick: bool) -> GalleryProfile:
    if quick:
        return QUICK
    return SOFTWARE if is_software(device) else GPU


def gallery_factory() -> SceneFactory:
    """The gallery scene, from the repository's demos package (not installed with the engine)."""
    try:
        from engine.demos import DEMOS
    except ImportError as exc:
        raise RuntimeError(f"the gallery benchmarks need the repository's demos package "
                           f"({exc}); run them from the repository root") from exc
    return DEMOS["gallery"].factory


def gallery_paths(profile: GalleryProfile, count: int | None = None) -> list[Path]:
    """The profile's gallery files, generated (and cached) when missing."""
    return gallery_textures(count or profile.count, profile.texture_size, "bc7").paths


def chain_bytes(paths: Sequence[Path]) -> int:
    """Full-chain GPU bytes of texture files, as the static provider allocates them."""
    total = 0
    for p in paths:
        tf = textures.open(p)
        total += texture_bytes(tf.pixel_format, tf.width, tf.height, levels=len(tf.levels),
                               layers=tf.layers, faces=tf.faces)
    return total


def use_bench_streamer(footprint: int) -> str:
    """Register (under BENCH_STREAMING) the shipped streamer with its staging ring capped at
    1 % of the footprint per segment. At the gallery sizes the benchmarks care about that
    is the default 4 MiB; only the tiny CI gallery, whose whole footprint is smaller than the
    default ring, gets a smaller one, so that its budgets still leave room to stream."""
    staging = min(DEFAULT_STAGING, max(1 << 16, footprint // 100))
    register_provider(BENCH_STREAMING, lambda device, settings, clock: TextureStreamer(
        device, settings.streamer, staging_bytes=staging))
    return BENCH_STREAMING


class WallClockPacer:
    """An on_frame hook sleeping until frame N ends at N+1 frame steps of wall time after
    frame 0: the flight then moves at the scene's speed in real time, as at vsync."""

    def __init__(self, dt: float = 1.0 / 60.0) -> None:
        self.dt = dt
        self.start: float | None = None

    def __call__(self, ctx: FrameContext) -> None:
        now = time.perf_counter()
        if self.start is None:
            self.start = now
        delay = self.start + (ctx.frame + 1) * self.dt - now
        if delay > 0:
            time.sleep(delay)


@dataclass
class Capture:
    """An on_frame hook reading back every `every`-th frame (frames a fixed step apart
    show the same camera in every run), either keeping the image (the reference run) or
    scoring it against the reference. It also samples the driver's free VRAM (NVX)."""

    every: int
    reference: dict[int, np.ndarray] | None = None
    images: dict[int, np.ndarray] = field(default_factory=dict)
    scores: dict[int, float] = field(default_factory=dict)
    min_scale: float = 1.0
    min_available: int | None = None

    def __call__(self, ctx: FrameContext) -> None:
        self.min_scale = min(self.min_scale, ctx.renderer.render_scale)
        if ctx.frame % self.every:
            return
        reading = ctx.device.vram()
        if reading.available_bytes is not None:
            self.min_available = min(self.min_available or reading.available_bytes,
                                     reading.available_bytes)
        image = ctx.renderer.read_output()
        if self.reference is None:
            self.images[ctx.frame] = image
        else:
            self.scores[ctx.frame] = min(psnr(image, self.reference[ctx.frame]), IDENTICAL_DB)

    def settled(self, settle_frames: int) -> list[float]:
        return [s for f, s in sorted(self.scores.items()) if f >= settle_frames]


@dataclass(frozen=True)
class Flight:
    """One flight's figures: frame time percentiles after the settling frames (frame 0
    compiles shaders, and the all-resident run did its loading before frame 0), ledger peak
    above the run's baseline, the capture hook (images or scores), and the NVX bytes used
    (None without NVX)."""

    p99_ms: float
    p50_ms: float
    peak_bytes: int
    capture: Capture
    vram_used: int | None
    wanted_peak: int  # the most texture bytes the camera asked for in one frame


def fly(device: Device, profile: GalleryProfile, provider: str, *, budget: int | None = None,
        reference: dict[int, np.ndarray] | None = None, count: int | None = None) -> Flight:
    """One gallery flight. Without a budget it is a reference run: no memory reaction (the
    render scale must stay 1 for the images to be a reference) and no pacing (nothing in
    it depends on wall time)."""
    base = device.ledger.total
    before = device.vram().available_bytes
    capture = Capture(profile.capture_every, reference)
    hooks: list = [capture]
    if budget is not None:
        hooks.append(WallClockPacer())
    res = run_scene(gallery_factory(), frames=profile.frames, size=profile.size,
                    budget=budget, provider=provider, options=profile.options(count),
                    device=device, on_frame=hooks, react=budget is not None)
    if res.summary["leaked_objects"]:
        log.error("flight with provider %s leaked %d GL objects", provider,
                  res.summary["leaked_objects"])
    used = (before - capture.min_available
            if before is not None and capture.min_available is not None else None)
    ms = [f["ms"] for f in res.frames[profile.settle_frames:]]
    return Flight(float(np.percentile(ms, 99)), float(np.percentile(ms, 50)),
                  res.summary["peak_bytes"] - base, capture, used,
                  max(f["texture_wanted_bytes"] for f in res.frames))


# ---------------------------------------------------------------------------- (a) + (b)
def _quality_rows(device: Device, profile: GalleryProfile) -> tuple[list[dict], list[str]]:
    reference: dict[int, np.ndarray] = {}
    static: list[Flight] = []
    streamed: dict[float, list[Flight]] = {f: [] for f in BUDGET_FRACTIONS}
    footprint = 0
    for r in range(profile.repeats):
        flight = fly(device, profile, "static")
        static.append(flight)
        if r == 0:
            reference = flight.capture.images
            footprint = flight.peak_bytes
        provider = use_bench_streamer(footprint)
        base = device.ledger.total
        for fraction in BUDGET_FRACTIONS:
            streamed[fraction].append(fly(device, profile, provider,
                                          budget=base + int(fraction * footprint),
                                          reference=reference))
    static_p99 = statistics.median(f.p99_ms for f in static)
    rows = [{"part": "quality+pacing", "provider": "static (all resident)", "budget_pct": None,
             "budget_mib": mib(footprint), "p99_ms": static_p99,
             "p50_ms": statistics.median(f.p50_ms for f in static)}]
    notes = [(f"all-resident footprint (static run's ledger peak): {format_bytes(footprint)}; "
             "wanted_peak: the most texture bytes the camera asked for in one frame (at this "
             "output size); a budget above it should lose nothing")]
    for fraction, flights in streamed.items():
        scores = [s for f in flights for s in f.capture.settled(profile.settle_frames)]
        p99 = statistics.median(f.p99_ms for f in flights)
        rows.append({
            "part": "quality+pacing", "provider": "streaming",
            "budget_pct": round(fraction * 100), "budget_mib": mib(fraction * footprint),
            "psnr_min_db": min(scores) if scores else None,
            "psnr_median_db": statistics.median(scores) if scores else None,
            "frames_ge_40db": (sum(s >= QUALITY_DB for s in scores) / len(scores)
                               if scores else None),
            "scored_frames": len(scores),
            "wanted_peak_mib": mib(max(f.wanted_peak for f in flights)),
            "p99_ms": p99, "p50_ms": statistics.median(f.p50_ms for f in flights),
            "p99_ratio": p99 / static_p99 if static_p99 else None,
            "peak_over_budget": max(f.peak_bytes for f in flights) / (fraction * footprint),
            "min_render_scale": min(f.capture.min_scale for f in flights)})
    goal = next(r for r in rows if r["budget_pct"] == round(GOAL_FRACTION * 100))
    if goal["psnr_min_db"] is None:
        notes.append(f"goal at {GOAL_FRACTION:.0%} budget: no frame scored (too few frames)")
    else:
        met = goal["psnr_min_db"] >= QUALITY_DB
        notes.append(f"goal: every frame after {profile.settle_frames} settling frames >= "
                     f"{QUALITY_DB:g} dB at {GOAL_FRACTION:.0%} budget: "
                     f"{'met' if met else 'NOT met'} (min {goal['psnr_min_db']:.1f} dB, "
                     f"{goal['frames_ge_40db']:.0%} of scored frames >= {QUALITY_DB:g} dB)")
    worst = max(rows[1:], key=lambda r: r["p99_ratio"])
    verdict = "met at every budget" if worst["p99_ratio"] <= PACING_GOAL else "NOT met"
    notes.append(f"goal: p99 frame time streamed <= {PACING_GOAL}x all-resident (frames after "
                 f"settling): {verdict} (worst {worst['p99_ratio']:.2f}x, at "
                 f"{worst['budget_pct']}%)")
    return rows, notes


# ---------------------------------------------------------------------------- no renderer
def close_view(frame: int, ids: Sequence[int], viewport: tuple[int, int] = (1920, 1080)
               ) -> FrameView:
    """A FrameView in which each texture of `ids` covers the screen from up close, so its
    desired level is 0 (the estimator clamps the distance to the near plane)."""
    n = len(ids)
    view = glm.lookAt(glm.vec3(0, 0, 0), glm.vec3(0, 0, -1), glm.vec3(0, 1, 0))
    fovy = float(np.radians(60.0))
    proj = glm.perspective(fovy, viewport[0] / viewport[1], 0.1, 100.0)
    tex_ids = np.full((n, len(TEXTURE_SLOTS)), -1, np.int32)
    tex_ids[:, 0] = np.asarray(ids, np.int32)
    return FrameView(frame=frame, time=frame / 60.0, camera_pos=np.zeros(3, np.float32),
                     view=mat_to_numpy(view), proj=mat_to_numpy(proj), fovy=fovy,
                     viewport=viewport, render_scale=1.0,
                     centers=np.tile(np.array([[0.0, 0.0, -1.0]], np.float32), (n, 1)),
                     radii=np.full(n, 2.0, np.float32), uv_density=np.ones(n, np.float32),
                     texture_ids=tex_ids)


class Driver:
    """Runs a streamer without a renderer: begin_frame/end_frame with synthetic views, the
    GPU finished every frame so that a frame's time covers its uploads' real cost."""

    def __init__(self, device: Device, streamer: TextureStreamer) -> None:
        self.device = device
        self.streamer = streamer
        self.frame = 0

    def step(self, view_of: Callable[[int], FrameView]) -> float:
        """One frame; returns its seconds (begin_frame to GPU idle)."""
        view = view_of(self.frame)
        start = time.perf_counter()
        self.streamer.begin_frame(view)
        self.streamer.end_frame()
        self.device.finish()
        self.frame += 1
        return time.perf_counter() - start

    def until(self, ids: Sequence[int], done: Callable[[], bool], timeout_s: float
              ) -> tuple[float, int, float, int]:
        """Frames showing `ids` until `done()`: (wall seconds, frames, seconds inside the
        frames, bytes uploaded). A 1 ms gap between frames (as `preload` leaves) lets the
        I/O threads run; it is not counted in the frame seconds."""
        start = time.perf_counter()
        busy, moved, frames = 0.0, 0, 0
        while not done():
            if time.perf_counter() - start > timeout_s:
                raise TimeoutError(f"streamer did not settle within {timeout_s:.0f} s")
            busy += self.step(lambda f: close_view(f, ids))
            moved += int(self.streamer.stats().upload_bytes_this_frame)
            frames += 1
            time.sleep(0.001)
        return time.perf_counter() - start, frames, busy, moved


def bench_streamer(device: Device, paths: Sequence[Path]) -> TextureStreamer:
    """A streamer over `paths` whose pool and RAM cache hold everything (these measurements
    are about speed, not budgets) and which drops a texture's detail the frame after it
    leaves the view (so a measurement can start again from the tail)."""
    full = chain_bytes(paths)
    streamer = TextureStreamer(device, ram_cache_bytes=2 * full + (64 << 20))
    streamer.grant(2 * full + (64 << 20))  # a fixed pool: no budget in these measurements
    streamer.config = dataclasses.replace(streamer.config, recent_frames=0,
                                          evict_delay_frames=0)
    try:
        for i, path in enumerate(paths):
            streamer.register(f"bench-{i}", path)
    except BaseException:
        streamer.release()
        raise
    return streamer


def _at(streamer: TextureStreamer, ids: Sequence[int], bases: Sequence[int]) -> Callable[[], bool]:
    return lambda: all(streamer.items[t].base == b for t, b in zip(ids, bases))


# ---------------------------------------------------------------------------- (c) upload
def chain_levels(paths: Sequence[Path], stops: Sequence[int]) -> list[tuple[Path, int, bytes]]:
    """(path, level, bytes) of levels 0..stop-1 of each file: with stop = the tail, what
    streaming the texture in uploads; with stop = its level count, the whole chain."""
    out = []
    for path, stop in zip(paths, stops):
        tf = textures.open(path)
        out += [(path, lvl, tf.read_level_all(lvl)) for lvl in range(stop)]
    return out


def raw_upload_seconds(device: Device, levels: Sequence[tuple[Path, int, bytes]]) -> float:
    """Seconds of a synchronous `Device.upload` loop over `levels` into full-chain storage
    (allocated before the clock starts), the GPU finished at the end."""
    made = {}
    try:
        for path, _, _ in levels:
            if path not in made:
                tf = textures.open(path)
                made[path] = device.storage_texture(tf.pixel_format, tf.width, tf.height,
                                                    levels=len(tf.levels), label="raw-upload")
        device.finish()
        start = time.perf_counter()
        for path, lvl, data in levels:
            device.upload(made[path], lvl, data)
        device.finish()
        return time.perf_counter() - start
    finally:
        for tex in made.values():
            device.release(tex)


def _upload_rows(device: Device, paths: Sequence[Path], repeats: int
                 ) -> tuple[list[dict], list[str]]:
    streamer = bench_streamer(device, paths)
    try:
        ids = list(range(len(paths)))
        tails = [it.base for it in streamer.items]
        driver = Driver(device, streamer)
        driver.until(ids, _at(streamer, ids, [0] * len(ids)), 120.0)  # fills the RAM cache
        rates = []
        for _ in range(repeats):
            driver.until([], _at(streamer, ids, tails), 60.0)
            _, frames, busy, moved = driver.until(ids, _at(streamer, ids, [0] * len(ids)),
                                                  120.0)
            rates.append(moved / busy)
        backend = streamer.backend.name
    finally:
        streamer.release()
    levels = chain_levels(paths, tails)
    nbytes = sum(len(d) for _, _, d in levels)
    raw_s = statistics.median(raw_upload_seconds(device, levels) for _ in range(repeats))
    streamer_rate, raw_rate = statistics.median(rates), nbytes / raw_s
    ratio = streamer_rate / raw_rate
    row = {"part": "upload", "provider": f"streaming ({backend})", "textures": len(paths),
           "mib": mib(nbytes), "streamer_MBps": streamer_rate / 1e6,
           "raw_upload_MBps": raw_rate / 1e6, "ratio": ratio, "frames": frames}
    notes = [(f"goal (GPU): streamer >= {UPLOAD_GOAL:.0%} of the raw upload loop: "
             f"{'met' if ratio >= UPLOAD_GOAL else 'NOT met'} ({ratio:.0%}); the streamer's "
             "time is its whole frame (plan, reallocate/commit, copy, upload, GPU finish), "
             "levels served from its RAM cache")]
    return [row], notes


# ---------------------------------------------------------------------------- (d) latency
def drop_page_cache(path: Path) -> bool:
    """Ask the OS to forget a file's cached pages (no privileges needed), so the next read
    comes from the disk. False where the OS has no such call."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


def _latency_rows(device: Device, paths: Sequence[Path]) -> tuple[list[dict], list[str]]:
    streamer = bench_streamer(device, paths)
    rows = []
    dropped = True
    try:
        tails = [it.base for it in streamer.items]
        driver = Driver(device, streamer)
        for source in ("file", "ram cache"):
            seconds, frames = [], []
            for t, path in enumerate(paths):
                driver.until([], _at(streamer, [t], [tails[t]]), 60.0)
                if source == "file":
                    dropped = drop_page_cache(path) and dropped
                wall, n, _, _ = driver.until([t], _at(streamer, [t], [0]), 60.0)
                seconds.append(wall)
                frames.append(n)
            rows.append({"part": "latency", "source": source, "textures": len(paths),
                         "levels": tails[0], "p50_ms": float(np.percentile(seconds, 50)) * 1e3,
                         "p95_ms": float(np.percentile(seconds, 95)) * 1e3,
                         "frames_p50": float(np.median(frames))})
    finally:
        streamer.release()
    rows[1]["ratio"] = rows[0]["p50_ms"] / rows[1]["p50_ms"]
    notes = ["latency: a texture made wanted at level 0 (from its tail) until level 0 is "
             "resident; the streamer loads one level per frame, so this is levels x (read + "
             "a frame). " + ("The OS page cache was dropped for each file first."
                             if dropped else "The OS page cache could not be dropped: "
                             "'file' reads may come from it.")]
    return rows, notes


# ---------------------------------------------------------------------------- suite
# ---------------------------------------------------------------------------- the wall
# Where the budget binds (issue 12): the wall demo's scripted flight (overview, dive to one
# image at full size, pan along its row, cuts, zoom out) with budgets set from the flight's
# own measured peak *wanted* bytes, our tiered policy against two baselines run by the same
# executor, camera-cut times from RAM and from disk, prefetch on and off, efficiency per
# segment, and the streamer's costs at 10,000 textures.
@dataclass(frozen=True)
class WallProfile:
    name: str
    count: int
    texture_size: int
    size: tuple[int, int]
    frames: int
    cuts: int  # cuts in the quality flights
    cut_flight_cuts: int  # cuts in the flights that time them
    scale_count: int  # textures of the scale measurements
    why: str
    fractions: tuple[float, ...] = (1.0, 0.5, 0.25, 0.1)  # budgets, of the peak wanted
    cut_sources: tuple[str, ...] = ("ram", "disk")

    def options(self, cuts: int | None = None) -> dict:
        return {"count": self.count, "texture_size": self.texture_size,
                "cuts": self.cuts if cuts is None else cuts, "frames": self.frames,
                "metrics": False}


WALL_QUICK = WallProfile("quick", 12, 128, (128, 72), 40, 1, 2, 200,
                         "CI smoke run; figures are not meaningful at this size",
                         fractions=(0.25,), cut_sources=("ram",))
WALL_SOFTWARE = WallProfile(
    "software", 256, 512, (384, 216), 810, 3, 8, 10_000,
    "llvmpipe (CI sizes): 256 x 512^2 BC7 at 384x216; the script at its natural speed "
    "(13.5 s at 60 frames a second: new levels fade in over 0.3 s each, as on a GPU)")
WALL_GPU = WallProfile("gpu", 10_000, 1024, (1280, 720), 810, 3, 12, 10_000,
                       "the issue's wall: 10,000 x 1024^2 BC7 (about 14 GB of files)")

POLICIES = ("tiered", "lru-whole", "global-bias")
PSNR_MARGIN_DB = 3.0  # goal: our median at least this far above both baselines at 25%, 10%
PREFETCH_FRACTION = 0.5  # the budget of the prefetch on/off flights
DETERMINISTIC = {"deterministic": True, "pace": False}
BYTES_PER_TEXEL = 1.0  # BC7


def wall_profile(device: Device, quick: bool) -> WallProfile:
    if quick:
        return WALL_QUICK
    return WALL_SOFTWARE if is_software(device) else WALL_GPU


def wall_demo():
    try:
        from ..demos import DEMOS
    except ImportError as exc:
        raise RuntimeError(f"the wall benchmarks need the demos package ({exc})") from exc
    return DEMOS["wall"]


class FixedPoolStreamer(TextureStreamer):
    """The shipped streamer with a fixed pool instead of the governor's allowance: the wall
    flights hold the render scale at 1 (no memory reaction), so the pool is the budget the
    texture policy alone must live in, and the pictures differ from the all-resident ones
    only by texture detail."""

    def __init__(self, device: Device, settings, pool: int, **kw) -> None:
        self.fixed_pool = int(pool)
        super().__init__(device, settings, **kw)
        self.grant(self.fixed_pool)

    def grant(self, pool_bytes: int) -> None:
        super().grant(getattr(self, "fixed_pool", pool_bytes))


def use_wall_streamer(policy: str, pool: int, prefetch: bool = True) -> str:
    """Register a fixed-pool streamer running `policy` and return its provider name."""
    from ..app.settings import RunSettings  # noqa: F401  (the factory's settings type)
    from ..streaming.policy import PolicyConfig

    name = f"bench-wall-{policy}-{pool}-{'pf' if prefetch else 'nopf'}"

    def make(device, settings, clock):
        cfg = dataclasses.replace(settings.streamer, policy=PolicyConfig(
            policy=policy, prefetch=prefetch))
        if settings.deterministic:  # frame clock and inline reads, as the registry does
            from ..streaming.inline_io import InlineLevelIO
            return FixedPoolStreamer(device, cfg, pool, clock=clock, io=InlineLevelIO)
        return FixedPoolStreamer(device, cfg, pool)

    register_provider(name, make)
    return name


@dataclass
class WallProbe:
    """Per frame of a wall flight: the picture (kept as reference, or scored against it),
    the screen-weighted coverage, cut times, pool keeping, evictions and re-uploads."""

    reference: dict[int, np.ndarray] | None = None
    keep_images: bool = False
    images: dict[int, np.ndarray] = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    tracker: object = None
    frame_tracker: object = None
    finest: np.ndarray | None = None
    last_base: np.ndarray | None = None
    reuploads: int = 0

    def __post_init__(self) -> None:
        from ..streaming.metrics import CutTracker
        self.tracker = CutTracker()  # wall-clock seconds
        self.frame_tracker = CutTracker()  # frames

    def __call__(self, ctx: FrameContext) -> None:
        from ..streaming.metrics import measure_view

        image = ctx.renderer.read_output()
        row: dict = {"frame": ctx.frame, "segment": ctx.record.get("wall_segment", ""),
                     "ms": ctx.record["ms"]}
        if self.keep_images:
            self.images[ctx.frame] = image
        if self.reference is not None:
            row["psnr"] = min(psnr(image, self.reference[ctx.frame]), IDENTICAL_DB)
        view = ctx.renderer.frame_view(ctx.scene, ctx.frame, ctx.time)
        count = int(view.texture_ids.max(initial=-1)) + 1
        cov, _ = measure_view(view, ctx.provider, count)
        row.update(cov.as_record())
        arrived = cov
        if isinstance(ctx.provider, TextureStreamer):
            arrived, _ = measure_view(view, ctx.provider, count,
                                      resident=ctx.provider.resident_levels())
        row["resident_at_wanted_fraction"] = arrived.at_wanted
        stats = ctx.provider.stats()
        row["resident_bytes"] = int(stats.resident_bytes)
        row["wanted_bytes"] = int(stats.wanted_bytes)
        row["min_bytes"] = int(stats.min_bytes)
        if isinstance(ctx.provider, TextureStreamer):
            streamed = ctx.device.ledger.category_total("texture.streamed")
            pool = ctx.provider.pool_bytes
            row["over_budget"] = bool(streamed > pool or stats.peak_bytes > pool
                                      or stats.budget_violations)
            row["evictions"] = int(stats.evictions)
            base = ctx.provider.resident_levels()
            if self.finest is None:
                self.finest, self.last_base = base.copy(), base.copy()
            # A load of a level that was resident before (at or coarser than the finest
            # level this texture ever had) is a re-upload: eviction cost paid twice.
            grew = base < self.last_base
            for t in np.flatnonzero(grew):
                lo, hi = int(base[t]), int(self.last_base[t])
                self.reuploads += max(0, hi - max(lo, int(self.finest[t])))
            self.finest = np.minimum(self.finest, base)
            self.last_base = base
            row["reuploads"] = self.reuploads
        cut = bool(ctx.record.get("wall_cut"))
        done_before = len(self.tracker.times)
        self.tracker.update(time.perf_counter(), arrived.at_wanted, cut)
        self.frame_tracker.update(float(ctx.frame), arrived.at_wanted, cut)
        if len(self.tracker.times) > done_before and self.tracker.times[-1] is not None:
            row["cut_to_95_s"] = self.tracker.times[-1]
            row["cut_to_95_frames"] = self.frame_tracker.times[-1]
        self.rows.append(row)


def wall_flight(device: Device, profile: WallProfile, provider: str, *,
                reference: dict[int, np.ndarray] | None = None, keep_images: bool = False,
                cuts: int | None = None, pace: bool = True,
                deterministic: bool = False, cache_dir: Path | None = None) -> WallProbe:
    """One wall flight (render scale held at 1); `deterministic`: frame clock and inline
    reads, so the flight depends on the frame number only (tests)."""
    demo = wall_demo()
    options = profile.options(cuts)
    if cache_dir is not None:
        options["cache_dir"] = cache_dir
    probe = WallProbe(reference=reference, keep_images=keep_images)
    hooks = [*demo.hooks(options), probe]
    if pace:
        hooks.append(WallClockPacer())
    res = run_scene(demo.factory, frames=profile.frames, size=profile.size,
                    budget=1 << 40, provider=provider, options=options, device=device,
                    on_frame=hooks, react=False, deterministic=deterministic)
    probe.tracker.close()
    probe.frame_tracker.close()
    if res.summary["leaked_objects"]:
        log.error("wall flight %s leaked %d GL objects", provider, res.summary["leaked_objects"])
    probe.leaked = res.summary["leaked_objects"]  # type: ignore[attr-defined]
    return probe


def _pct(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def _segment_means(rows: Sequence[dict], key: str, segments: Sequence[str]) -> float | None:
    vals = [r[key] for r in rows if r["segment"] in segments and key in r]
    return float(np.mean(vals)) if vals else None


def _flight_row(probe: WallProbe, policy: str, fraction: float | None, pool: int | None,
                prefetch: bool = True) -> dict:
    rows = probe.rows
    scores = [r["psnr"] for r in rows if "psnr" in r]
    # Zoomed in (hold, pan, after cuts) is where the budget binds; the overview and zoom
    # frames are often identical to the reference at every budget and saturate the median.
    zoomed = [r["psnr"] for r in rows if "psnr" in r
              and (r["segment"] in ("hold", "pan") or r["segment"].startswith("cut"))]
    return {
        "part": "wall", "policy": policy + ("" if prefetch else " (no prefetch)"),
        "budget_pct": None if fraction is None else round(fraction * 100),
        "pool_mib": mib(pool),
        "psnr_min_db": min(scores) if scores else None,
        "psnr_median_db": statistics.median(scores) if scores else None,
        "psnr_mean_db": float(np.mean(scores)) if scores else None,
        "psnr_zoomed_median_db": statistics.median(zoomed) if zoomed else None,
        "coarser_1": float(np.mean([r["coarser_1_fraction"] for r in rows])),
        "coarser_2plus": float(np.mean([r["coarser_2plus_fraction"] for r in rows])),
        "frames_over_budget": sum(bool(r.get("over_budget")) for r in rows),
        "evictions": rows[-1].get("evictions"),
        "reuploads": rows[-1].get("reuploads"),
        "leaked": getattr(probe, "leaked", None),
    }


def _efficiency_rows(probe: WallProbe, profile: WallProfile, label: str) -> list[dict]:
    from ..streaming.metrics import efficiency

    pixels = profile.size[0] * profile.size[1]
    out = []
    for seg in dict.fromkeys(r["segment"] for r in probe.rows):
        rows = [r for r in probe.rows if r["segment"] == seg]
        res = float(np.mean([r["resident_bytes"] for r in rows]))
        above = float(np.mean([r["resident_bytes"] - r["min_bytes"] for r in rows]))
        out.append({"part": "efficiency", "policy": label, "segment": seg, "frames": len(rows),
                    "resident_mib": mib(res),
                    "efficiency": efficiency(int(res), pixels, BYTES_PER_TEXEL),
                    "efficiency_above_tails": efficiency(int(above), pixels, BYTES_PER_TEXEL),
                    "at_wanted": float(np.mean([r["at_wanted_fraction"] for r in rows]))})
    return out


def drop_files_from_page_cache(paths: Sequence[Path]) -> float | None:
    """posix_fadvise(POSIX_FADV_DONTNEED) on every file; returns the seconds a read of all of
    them then takes (compared by the caller with a warm read, to show the drop took effect),
    or None where the OS lacks the call."""
    if not all(drop_page_cache(p) for p in paths):
        return None
    start = time.perf_counter()
    for p in paths:
        with open(p, "rb") as fh:
            while fh.read(1 << 20):
                pass
    seconds = time.perf_counter() - start
    for p in paths:
        drop_page_cache(p)
    return seconds


def _warm_read_seconds(paths: Sequence[Path]) -> float:
    start = time.perf_counter()
    for p in paths:
        with open(p, "rb") as fh:
            while fh.read(1 << 20):
                pass
    return time.perf_counter() - start


def _wall_rows(device: Device, profile: WallProfile) -> tuple[list[dict], list[str]]:
    from ..demos.wall_assets import wall_textures

    assets = wall_textures(profile.count, profile.texture_size)
    rows: list[dict] = []
    notes: list[str] = [(f"wall profile '{profile.name}': {profile.count} x "
                         f"{profile.texture_size}^2 BC7, {profile.size[0]}x{profile.size[1]}, "
                         f"{profile.frames} frames, {profile.cuts} cut(s): {profile.why}")]
    reference = wall_flight(device, profile, "static", keep_images=True, pace=False)
    ref_images = reference.images
    notes.append("policy, budget and prefetch flights are deterministic (frame clock, inline "
                 "reads: the streamer's decisions depend on the frame number only, so policies "
                 "are compared on equal terms and reruns agree; paced flights with I/O threads "
                 "varied by up to 3x in coarser-than-wanted between identical runs on this "
                 "shared machine); the cut flights use the I/O threads and wall-clock time")
    # The flight's own demand: our streamer with a pool nothing binds.
    free = wall_flight(device, profile, use_wall_streamer("tiered", 1 << 40),
                       reference=ref_images, **DETERMINISTIC)
    peak = max(r["wanted_bytes"] for r in free.rows)
    tails = max(r["min_bytes"] for r in free.rows)
    rows.append({**_flight_row(free, "tiered", None, None), "budget_pct": "unlimited"})
    notes.append(f"peak wanted {format_bytes(peak)} of which {format_bytes(tails)} are the "
                 f"always-resident tails; a budget of f% is a pool of tails + f% of the "
                 f"{format_bytes(peak - tails)} above them (the tails alone cannot be cut)")
    results: dict[tuple[str, float], dict] = {}
    main: dict[float, WallProbe] = {}
    for fraction in profile.fractions:
        pool = tails + int(fraction * (peak - tails))
        for policy in POLICIES:
            probe = wall_flight(device, profile, use_wall_streamer(policy, pool),
                                reference=ref_images, **DETERMINISTIC)
            row = _flight_row(probe, policy, fraction, pool)
            results[(policy, fraction)] = row
            rows.append(row)
            if policy == "tiered":
                main[fraction] = probe
    # Goals: PSNR margin over both baselines at 25% and 10%, worst frame no worse.
    for fraction in [f for f in (0.25, 0.1) if f in profile.fractions]:
        ours = results[("tiered", fraction)]
        for base in POLICIES[1:]:
            other = results[(base, fraction)]
            margin = (ours["psnr_median_db"] or 0) - (other["psnr_median_db"] or 0)
            worst = (ours["psnr_min_db"] or 0) - (other["psnr_min_db"] or 0)
            zoomed = ((ours["psnr_zoomed_median_db"] or 0)
                      - (other["psnr_zoomed_median_db"] or 0))
            notes.append(f"goal at {fraction:.0%}: median PSNR >= {PSNR_MARGIN_DB:g} dB above "
                         f"{base}: {'met' if margin >= PSNR_MARGIN_DB else 'NOT met'} "
                         f"({margin:+.1f} dB; zoomed-in frames {zoomed:+.1f} dB); worst frame "
                         f"no worse: {'met' if worst >= 0 else 'NOT met'} ({worst:+.1f} dB)")
    over = sum(r["frames_over_budget"] for r in rows)
    notes.append(f"frames over budget across every flight: {over} (goal 0)")
    # Efficiency per segment, our policy at 50% and unlimited.
    rows += _efficiency_rows(free, profile, "tiered unlimited")
    mid = PREFETCH_FRACTION if PREFETCH_FRACTION in main else min(main)
    rows += _efficiency_rows(main[mid], profile, f"tiered {mid:.0%}")
    notes.append("efficiency = resident texture bytes / (output pixels x 1 byte per BC7 "
                 "texel); 'above tails' leaves out the always-resident tails of every texture")
    # Prefetch off, same budget: pan and zoom segments.
    pool = tails + int(mid * (peak - tails))
    nopf = wall_flight(device, profile, use_wall_streamer("tiered", pool, prefetch=False),
                       reference=ref_images, **DETERMINISTIC)
    rows.append(_flight_row(nopf, "tiered", mid, pool, prefetch=False))
    for label, segs in (("pan", ("pan",)), ("zoom", ("dive", "zoom-out"))):
        on = 1 - (_segment_means(main[mid].rows, "at_wanted_fraction", segs) or 1)
        off = 1 - (_segment_means(nopf.rows, "at_wanted_fraction", segs) or 1)
        # The same on what is resident: the sampled figure includes the 0.3 s/level fade-in,
        # which starts when a level arrives, prefetched or not.
        on_r = 1 - (_segment_means(main[mid].rows, "resident_at_wanted_fraction", segs) or 1)
        off_r = 1 - (_segment_means(nopf.rows, "resident_at_wanted_fraction", segs) or 1)
        rows.append({"part": "prefetch", "segment": label, "budget_pct": round(mid * 100),
                     "coarser_with": on, "coarser_without": off,
                     "ratio": (on / off) if off else None,
                     "not_resident_with": on_r, "not_resident_without": off_r,
                     "resident_ratio": (on_r / off_r) if off_r else None})
    other = [r["psnr"] for r in main[mid].rows
             if r["segment"] not in ("pan", "dive", "zoom-out") and "psnr" in r]
    other_off = [r["psnr"] for r in nopf.rows
                 if r["segment"] not in ("pan", "dive", "zoom-out") and "psnr" in r]
    if other and other_off:
        notes.append(f"prefetch elsewhere: median PSNR {statistics.median(other):.1f} dB with, "
                     f"{statistics.median(other_off):.1f} dB without")
    # Cuts: many of them, from the page cache (RAM) and from disk (dropped first).
    pool = peak + (peak >> 2)
    warm = _warm_read_seconds(assets.paths)
    for source in profile.cut_sources:
        if source == "disk":
            cold = drop_files_from_page_cache(assets.paths)
            if cold is None:
                notes.append("page cache could not be dropped: no 'disk' cut figures")
                continue
            notes.append(f"page cache dropped with posix_fadvise(POSIX_FADV_DONTNEED) per file: "
                         f"reading all {len(assets.paths)} files took {cold:.2f} s after the "
                         f"drop vs {warm:.2f} s warm")
        else:
            _warm_read_seconds(assets.paths)
        probe = wall_flight(device, profile, use_wall_streamer("tiered", pool),
                            cuts=profile.cut_flight_cuts)
        times = probe.tracker.finished()
        rows.append({"part": "cut", "source": source, "cuts": len(probe.tracker.times),
                     "reached_95": len(times), "p50_ms": (_pct(times, 50) or 0) * 1e3,
                     "p95_ms": (_pct(times, 95) or 0) * 1e3, "pool_mib": mib(pool)})
    notes.append("cut: wall-clock time from the frame a cut lands on until 95% of the visible "
                 "screen weight has its wanted level resident (metrics.level_deficit on the "
                 "resident level; the 0.3 s-per-level fade-in comes on top), pool 125% of "
                 "peak wanted; 'ram' reads come from the OS page cache")
    return rows, notes


def _wall_scale_rows(device: Device, profile: WallProfile) -> tuple[list[dict], list[str]]:
    import tracemalloc

    from ..streaming.handles import HeaderTable
    from .scaling import measure, scaling_textures

    paths = scaling_textures(profile.scale_count)
    HeaderTable.from_files(paths[:10])  # imports and first-call costs out of the timing
    start = time.perf_counter()
    table = HeaderTable.from_files(paths)
    seconds = time.perf_counter() - start
    del table
    tracemalloc.start()
    table = HeaderTable.from_files(paths)
    heap = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    start = time.perf_counter()
    for p in paths:
        textures.open(p)
    reader = time.perf_counter() - start
    frames, warmup = (10, 3) if profile.scale_count < 1000 else (60, 10)
    row = measure(device, profile.scale_count, frames, warmup)
    rows = [{"part": "scale", "textures": len(table), "headers_s": seconds,
             "reader_s": reader, "header_table_bytes_per_texture": heap / len(table),
             "streamer_register_s": row["register_s"],
             "streamer_rss_bytes_per_texture": (row["rss_mib"] or 0) * (1 << 20) / len(table),
             "streamer_frame_ms_p50": row["begin_frame_ms"],
             "streamer_frame_ms_p95": row["begin_frame_p95_ms"]}]
    notes = [("scale: headers_s = bulk header registration (streaming.handles.HeaderTable, "
             "numpy columns) of every file, reader_s = engine.textures.open per file; "
             "streamer_register_s = TextureStreamer.register (header + GL tail) per file; "
             "streamer frame = begin_frame on the scaling bench's grid camera")]
    return rows, notes


def run(device: Device, quick: bool = False) -> SuiteResult:
    """The wall parts (issue 12) replace the gallery quality flights, whose budgets (fractions
    of the all-resident footprint) never bound; upload and latency stay on the gallery."""
    result = SuiteResult("streaming")
    profile = gallery_profile(device, quick)
    wall = wall_profile(device, quick)
    paths = gallery_paths(profile)
    result.notes.append(profile.describe())
    for part in (lambda: _wall_rows(device, wall),
                 lambda: _wall_scale_rows(device, wall),
                 lambda: _upload_rows(device, paths[:profile.sample_textures], profile.repeats),
                 lambda: _latency_rows(device, paths[:profile.sample_textures])):
        rows, notes = part()
        result.rows += rows
        result.notes += notes
    return result
