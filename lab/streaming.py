"""Texture streamer benchmarks on the gallery's textures, each figure against a baseline in
the same run (the flights where the budget binds are the `wall` suite, lab/wall.py):

(a) upload: bytes the streamer makes resident per second of its own frame time, over a raw
    synchronous `device.commands.upload` loop of the same level bytes (gallery textures);
(b) latency: request-to-resident time of a texture's whole chain, first from the file (OS
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
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pyglm import glm

from engine import textures
from engine.app.settings import ProviderFactory, RunSettings
from engine.hosts.run import FrameContext, SceneFactory, run_scene
from engine.demos.gallery_assets import gallery_textures
from engine.gl.device import Device
from engine.memory.budget import DEFAULT_BUDGET
from engine.memory.sizes import texture_bytes
from engine.render.camera import mat_to_numpy
from engine.streaming.contract import TEXTURE_SLOTS, FrameView
from engine.streaming.levels.streamer import Clock, LevelStreamer
from engine.textures import TextureFile
from engine.textures.quality import psnr
from engine.textures.transcode import ServedFile, serve_file
from .common import SuiteResult, drop_page_cache

log = logging.getLogger(__name__)

QUALITY_DB = 40.0
IDENTICAL_DB = 100.0  # the score of identical images (inf is not valid JSON)
UPLOAD_GOAL = 0.70  # streamer bytes/s over the raw upload loop (on a GPU)
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


QUICK = GalleryProfile("quick", 12, 512, (96, 54), 60, 6, 30, 10.0, 1, 1, 6, 12,
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


def use_bench_streamer(footprint: int) -> ProviderFactory:
    """A provider factory: the shipped streamer with its staging ring capped at
    1 % of the footprint per segment. At the gallery sizes the benchmarks care about that
    is the default 4 MiB; only the tiny CI gallery, whose whole footprint is smaller than the
    default ring, gets a smaller one, so that its budgets still leave room to stream."""
    staging = min(DEFAULT_STAGING, max(1 << 16, footprint // 100))

    def bench_streaming(device: Device, settings: RunSettings, clock: Clock) -> LevelStreamer:
        return LevelStreamer(device, settings.streamer, staging_bytes=staging)
    return bench_streaming


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


def fly(device: Device, profile: GalleryProfile, provider: str | ProviderFactory, *,
        budget: int | None = None, reference: dict[int, np.ndarray] | None = None,
        count: int | None = None) -> Flight:
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
                    budget=DEFAULT_BUDGET if budget is None else budget, provider=provider,
                    options=profile.options(count),
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

    def __init__(self, device: Device, streamer: LevelStreamer) -> None:
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


def bench_streamer(device: Device, paths: Sequence[Path]) -> LevelStreamer:
    """A streamer over `paths` whose pool and RAM cache hold everything (these measurements
    are about speed, not budgets) and which drops a texture's detail the frame after it
    leaves the view (so a measurement can start again from the tail)."""
    full = chain_bytes(paths)
    streamer = LevelStreamer(device, ram_cache_bytes=2 * full + (64 << 20))
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


def _at(streamer: LevelStreamer, ids: Sequence[int], bases: Sequence[int]) -> Callable[[], bool]:
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
    """Seconds of a synchronous `device.commands.upload` loop over `levels` into full-chain
    storage (allocated before the clock starts), the GPU finished at the end."""
    made = {}
    served: dict[Path, TextureFile] = {}
    try:
        for path, _, _ in levels:
            if path not in made:
                tf = served[path] = serve_file(textures.open(path), device.caps.can_sample)
                made[path] = device.storage_texture(tf.pixel_format, tf.width, tf.height,
                                                    levels=len(tf.levels), label="raw-upload")
        # what the driver holds (transcoded where it samples another format), before timing
        payloads = [(made[path], lvl, served[path].transcode_level(lvl, data)
                     if isinstance(served[path], ServedFile) else data)
                    for path, lvl, data in levels]
        device.finish()
        start = time.perf_counter()
        for tex, lvl, data in payloads:
            device.commands.upload(tex, lvl, data)
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
def run(device: Device, quick: bool = False) -> SuiteResult:
    """Upload throughput and request-to-resident latency on the gallery's textures; the
    flights where the budget binds are the `wall` suite (lab/wall.py)."""
    result = SuiteResult("streaming")
    profile = gallery_profile(device, quick)
    paths = gallery_paths(profile)
    result.notes.append(profile.describe())
    for part in (lambda: _upload_rows(device, paths[:profile.sample_textures], profile.repeats),
                 lambda: _latency_rows(device, paths[:profile.sample_textures])):
        rows, notes = part()
        result.rows += rows
        result.notes += notes
    return result
