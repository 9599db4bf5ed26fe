"""Startup: time to first frame and to full quality, engine against the naive moderngl path.

The naive path is what most moderngl apps do: every texture ships as a PNG, Pillow decodes
it, the RGBA8 pixels go up whole, the driver builds the mip chain, and the first frame is
drawn once everything is resident. The engine registers each texture with only its mip tail
resident (a few KiB), draws at once, and streams the levels the camera needs.

Both paths render the same gallery with the same camera. The PNGs are the gallery's own
level 0 (decoded with the engine's decoder), so the naive path draws the same picture: the
peers suite compares images against it.
"""
from __future__ import annotations

import logging
import os
import statistics
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.gl.device import Device
from engine.gl.textures import GpuTexture
from engine.memory.sizes import mip_count
from engine.textures.cachedir import cache_root
from engine.hosts.run import FrameLoop, finish_run
from engine.app.settings import ProviderFactory, RunSettings
from engine.streaming.levels.streamer import Clock
from engine.memory.ledger import Category
from engine.streaming.provider import StreamingProvider
from engine.streaming.static import StaticTextureProvider
from .common import SuiteResult
from .streaming import (
    GalleryProfile,
    gallery_factory,
    gallery_paths,
    gallery_profile,
    mib,
)

log = logging.getLogger(__name__)

FIRST_FRAME_GOAL = 20.0  # the engine's first frame at least this many times sooner


# ---------------------------------------------------------------------------- PNG copies
def png_path(ktx2: Path) -> Path:
    """Where the PNG copy of a gallery texture lives (cached across runs, like the gallery)."""
    ktx2 = Path(ktx2)
    return cache_root() / "bench-png" / ktx2.parent.name / (ktx2.stem + ".png")


def _write_png(src: str, dst: str) -> str:
    """Worker: level 0 of a KTX2 file as a PNG, written atomically. Pillow's default
    compression, as apps ship PNGs: decoding speed hardly depends on the level."""
    from PIL import Image

    from engine import textures

    rgba = textures.decode_rgba(textures.open(Path(src)), 0)
    tmp = Path(dst).with_suffix(".tmp.png")
    Image.fromarray(rgba, "RGBA").save(tmp, "PNG")
    os.replace(tmp, dst)
    return dst


def naive_pngs(paths: Sequence[Path], workers: int | None = None) -> list[Path]:
    """PNG copies of `paths`, writing the missing ones in a process pool (BCn decode and PNG
    encode are CPU bound, and 200 4096^2 images take minutes on one core)."""
    pngs = [png_path(p) for p in paths]
    missing = [(str(src), str(dst)) for src, dst in zip(paths, pngs) if not dst.is_file()]
    if missing:
        pngs[0].parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        workers = max(1, min(len(missing), workers or os.cpu_count() or 1))
        with ProcessPoolExecutor(workers) as pool:
            list(pool.map(_write_png, *zip(*missing)))
        log.info("wrote %d PNG copies in %.1f s", len(missing), time.perf_counter() - start)
    return pngs


# ---------------------------------------------------------------------------- naive provider
class NaiveProvider(StaticTextureProvider):
    """The naive moderngl texture path as a TextureProvider: Pillow decode, RGBA8 upload,
    driver-built mips, everything resident from registration on.

    It differs from `ctx.texture(...); build_mipmaps()` in one point only: the storage is
    sRGB (RGBA8_SRGB), as the gallery's colours are. A plain RGBA8 texture costs the same
    bytes and time but renders a different (washed-out) picture, and the peers suite needs
    the naive picture to be the reference the engine is scored against. The storage is
    made through the device so the ledger counts it exactly (mips included)."""

    def __init__(self, device: Device) -> None:
        super().__init__(device, category=Category.STATIC)

    def _upload(self, key: str, path: Path) -> tuple[GpuTexture, int]:
        from PIL import Image  # the naive path's decoder

        with Image.open(png_path(path)) as im:
            rgba = np.array(im.convert("RGBA"))
        h, w = rgba.shape[:2]
        levels = mip_count(w, h)
        tex = self.device.storage_texture("RGBA8_SRGB", w, h, levels=levels,
                                          category=self.category, label=f"naive {key}")
        try:
            self.device.commands.upload(tex, 0, rgba)
            self.device.commands.generate_mipmaps(tex)  # moderngl's build_mipmaps()
        except BaseException:
            self.device.release(tex)
            raise
        return tex, levels


def naive(device: Device, settings: RunSettings, clock: Clock) -> NaiveProvider:
    """The naive path as a run's provider (`RunSettings.provider` takes the factory)."""
    return NaiveProvider(device)


NAIVE: ProviderFactory = naive


# ---------------------------------------------------------------------------- measurement
@dataclass(frozen=True)
class Startup:
    """One start of the gallery: seconds to the first presented frame and to full quality
    (None if not reached before the timeout), the frames that took, and the texture bytes
    resident at the first frame."""

    first_frame_s: float
    full_quality_s: float | None
    frames: int
    first_frame_texture_bytes: int


def _full_quality(provider) -> bool:
    """Every visible texture at its desired level and nothing in flight: whole-level
    textures hold what they want, no tile shown now is missing from a page cache. (The
    streaming provider's wanted bytes include the page cache's target size, which its held
    size need not equal, so the whole levels are asked on their own.)"""
    whole = provider.levels if isinstance(provider, StreamingProvider) else provider
    w = whole.stats()
    stats = provider.stats()
    return (int(w.wanted_bytes) == int(w.resident_bytes) and stats.pending_uploads == 0
            and stats.missing_tiles == 0)


def measure_startup(device: Device, profile: GalleryProfile,
                    provider: str | ProviderFactory, *, count: int | None = None,
                    timeout_s: float = 60.0) -> Startup:
    """Build the gallery and draw frames with the camera held at its start pose until full
    quality. Timing starts before the scene factory (registration is part of startup)."""
    mark = device.tracker.mark()
    device.ledger.reset_frame_peak()
    start = time.perf_counter()
    loop = FrameLoop.embedded(device, gallery_factory(), size=profile.size, provider=provider,
                              options=profile.options(count), react=provider is not NAIVE)
    try:
        loop.step(0)
        first = time.perf_counter() - start
        first_bytes = int(loop.provider.stats().resident_bytes)
        full: float | None = first if _full_quality(loop.provider) else None
        frame = 1
        while full is None and time.perf_counter() - start < timeout_s:
            loop.step(frame, camera_override=lambda scene: scene.update(0.0))
            frame += 1
            if _full_quality(loop.provider):
                full = time.perf_counter() - start
    finally:
        loop.release()
        finish_run(device, mark)
    return Startup(first, full, frame, first_bytes)


def _median(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if len(got) == len(values) and got else None


def run(device: Device, quick: bool = False) -> SuiteResult:
    result = SuiteResult("startup")
    profile = gallery_profile(device, quick)
    paths = gallery_paths(profile)
    naive_pngs(paths)
    result.notes.append(profile.describe())
    timeout = 20.0 if quick else 120.0
    engine = [measure_startup(device, profile, "streaming", timeout_s=timeout)
              for _ in range(profile.repeats)]
    naive = [measure_startup(device, profile, NAIVE, timeout_s=timeout)
             for _ in range(profile.naive_repeats)]
    rows = {}
    for name, runs in (("engine (streaming)", engine), ("naive (PNG+RGBA8)", naive)):
        rows[name] = {
            "path": name, "textures": profile.count,
            "first_frame_s": statistics.median(r.first_frame_s for r in runs),
            "full_quality_s": _median([r.full_quality_s for r in runs]),
            "frames_to_full": statistics.median(r.frames for r in runs),
            "first_frame_texture_mib": mib(
                statistics.median(r.first_frame_texture_bytes for r in runs)),
            "repeats": len(runs)}
    e, n = rows["engine (streaming)"], rows["naive (PNG+RGBA8)"]
    first_ratio = n["first_frame_s"] / e["first_frame_s"]
    e["first_frame_speedup"] = first_ratio
    if e["full_quality_s"] is not None and n["full_quality_s"] is not None:
        e["full_quality_speedup"] = n["full_quality_s"] / e["full_quality_s"]
    result.rows += [e, n]
    met = first_ratio >= FIRST_FRAME_GOAL
    result.notes.append(f"goal: first frame >= {FIRST_FRAME_GOAL:.0f}x sooner than naive: "
                        f"{'met' if met else 'NOT met'} ({first_ratio:.1f}x)")
    if e["full_quality_s"] is None:
        result.notes.append(f"engine did not reach full quality within {timeout:.0f} s")
    result.notes.append("full quality: camera held at the start pose until every visible "
                        "texture is at its desired level with nothing in flight (whole-level "
                        "textures: wanted == resident; page-cached ones: no shown tile "
                        "missing; nothing pending); naive is full at frame 0")
    return result
