"""The wall's textures: thousands of distinct photographic BC7 textures, made fast and cached.

Why not encode each texture: the wall wants up to 10,000 textures of 1024^2 BC7 with full mip
chains, and etcpak takes ~0.9 s per 1024^2 BC7 level on one core here: ~3 hours of encoding.
BCn blocks are independent 4x4-texel units, so (as for the gallery, see
demos/gallery_assets.py) a texture can be *cut* out of a larger encoded image at block
granularity and is then exactly what encoding that crop would give. So:

1. A few "canvases" are made from the repository's photographs (assets/photos): each is one
   photo cropped at a seeded scale and offset, possibly mirrored, colour shifted (per-channel
   gains, a hue turn), resized to 2N x 2N (Lanczos) and given a fine seeded grain, so that the
   finest level holds real detail and coarser levels really differ from it (PSNR then means
   something). Each canvas's mip levels are encoded once, down to the level where the window
   grid stops being block aligned.
2. A texture of N x N is a window of a canvas at an offset that is a multiple of the window
   step T (64 texels at the default sizes): its level k, for every k with T / 2^k >= 4, is a
   plain slice of the canvas's encoded level k (block-aligned there), no encoding at all.
3. Its remaining small levels (N / T texels and below) come from the canvas's RGBA at the
   last sliced level, cropped, mipmapped and encoded normally (a few KiB).

Which (canvas, window) a texture number gets is a seeded permutation of every pair, so
neighbouring numbers come from different photos, places and colours, and texture number i is
the same file whatever the count asked for. Canvas levels are cached beside the textures
(`canvas_*.npz`), so growing a wall later encodes nothing again.
"""
from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine import assets
from engine.formats import get as get_format
from engine.textures.cachedir import cache_root, numbered_files
from engine.textures.encode import encode_image
from engine.textures.ktx2_write import write_ktx2
from engine.textures.mipgen import generate_mips
from engine.textures.progress import Progress

log = logging.getLogger(__name__)

VERSION = 1
SEED = 20261130
FORMAT = "BC7_SRGB"
VARIANTS = 9  # canvases per photograph
GRAIN = 5.0  # grain standard deviation, in 8-bit sRGB steps
PHOTOS = assets.PHOTOS


@dataclass(frozen=True)
class WallAssets:
    """Where the textures are and what making them cost (0 when they were all cached)."""

    paths: list[Path]
    directory: Path
    generated: int
    seconds: float


@dataclass(frozen=True)
class WallLayout:
    """The geometry of cutting textures of `size` out of canvases (all sizes in texels)."""

    size: int       # texture edge N
    step: int       # window step T: window offsets are multiples of it
    canvas: int     # canvas edge (2N)
    sliced: int     # levels cut from the canvas: those with T / 2^k >= 4

    @classmethod
    def for_size(cls, size: int) -> WallLayout:
        if size < 16 or size & (size - 1):
            raise ValueError(f"wall texture size must be a power of two >= 16, got {size}")
        step = min(64, size // 4)
        sliced = int(np.log2(step)) - 1  # step / 2^k >= 4  <=>  k <= log2(step) - 2
        return cls(size, step, 2 * size, sliced)

    @property
    def windows_per_side(self) -> int:
        return (self.canvas - self.size) // self.step + 1


def photo_paths(directory: Path = PHOTOS) -> list[Path]:
    paths = sorted(directory.glob("*.jpg")) + sorted(directory.glob("*.png"))
    if not paths:
        raise FileNotFoundError(f"no photographs in {directory}")
    return paths


# ---------------------------------------------------------------------------- canvases
def _hue_turn(rgb: np.ndarray, turn: float) -> np.ndarray:
    """Rotate colours about the grey axis by `turn` of a full turn (a cheap hue shift)."""
    angle = 2 * np.pi * turn
    c, s = np.cos(angle), np.sin(angle)
    k = 1.0 / 3.0
    sq = np.sqrt(k)
    m = np.array([[c + (1 - c) * k, k * (1 - c) - sq * s, k * (1 - c) + sq * s],
                  [k * (1 - c) + sq * s, c + k * (1 - c), k * (1 - c) - sq * s],
                  [k * (1 - c) - sq * s, k * (1 - c) + sq * s, c + k * (1 - c)]], np.float32)
    return rgb @ m.T


def make_canvas(photo: Path, variant: int, edge: int) -> np.ndarray:
    """One canvas (edge x edge RGBA8): a seeded crop, flip, colour shift and grain of `photo`."""
    from PIL import Image

    rng = np.random.default_rng([SEED, variant, sum(photo.name.encode())])
    with Image.open(photo) as im:
        im = im.convert("RGB")
        w, h = im.size
        side = min(w, h) * rng.uniform(0.55, 1.0) if variant else min(w, h)
        x0 = rng.uniform(0, w - side)
        y0 = rng.uniform(0, h - side)
        im = im.resize((edge, edge), Image.Resampling.LANCZOS, box=(x0, y0, x0 + side, y0 + side))
        if variant % 2:
            im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        rgb = np.asarray(im, np.float32)
    if variant:
        rgb = _hue_turn(rgb, rng.uniform(-0.25, 0.25)) * rng.uniform(0.75, 1.2, 3)
    rgb += rng.normal(0.0, GRAIN, rgb.shape[:2])[..., None]  # luminance grain
    out = np.empty((edge, edge, 4), np.uint8)
    out[..., :3] = np.clip(rgb + 0.5, 0, 255)
    out[..., 3] = 255
    return out


def _canvas_file(directory: Path, index: int) -> Path:
    return directory / f"canvas_{index:03d}.npz"


def encode_canvas(photo: Path, variant: int, layout: WallLayout, out: Path) -> Path:
    """Encode a canvas's first `layout.sliced` levels as block grids, plus the RGBA of the last
    of them (the source of every texture's small levels); written atomically to `out`."""
    rgba = make_canvas(photo, variant, layout.canvas)
    bb = get_format(FORMAT).block_bytes
    mips = generate_mips(rgba, colorspace="srgb", max_levels=layout.sliced)
    arrays = {}
    for k, level in enumerate(mips):
        h, w = level.shape[:2]
        arrays[f"level{k}"] = np.frombuffer(encode_image(level, FORMAT), np.uint8).reshape(
            h // 4, w // 4, bb)
    arrays["tail_rgba"] = mips[-1]
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, out)
    return out


def _encode_job(args: tuple[str, int, int, str]) -> str:
    photo, variant, size, out = args
    return str(encode_canvas(Path(photo), variant, WallLayout.for_size(size), Path(out)))


# ---------------------------------------------------------------------------- textures
def assignment(number: int, canvases: int, layout: WallLayout) -> tuple[int, int, int]:
    """(canvas, window x, window y) of texture `number`: a seeded permutation of all pairs,
    independent of how many textures are asked for."""
    per_side = layout.windows_per_side
    total = canvases * per_side * per_side
    perm = np.random.default_rng([SEED, layout.size, canvases]).permutation(total)
    pick = int(perm[number % total])
    canvas, rest = divmod(pick, per_side * per_side)
    wy, wx = divmod(rest, per_side)
    return canvas, wx, wy


def texture_levels(canvas: dict[str, np.ndarray], wx: int, wy: int,
                   layout: WallLayout) -> list[bytes]:
    """Every mip level of the window (wx, wy) of a loaded canvas, level 0 first."""
    levels = []
    for k in range(layout.sliced):
        blocks = canvas[f"level{k}"]
        scale = 4 << k  # texels of level 0 per block of level k
        bx, by, n = wx * layout.step // scale, wy * layout.step // scale, layout.size // scale
        levels.append(np.ascontiguousarray(blocks[by:by + n, bx:bx + n]).tobytes())
    tail = canvas["tail_rgba"]
    shrink = 1 << (layout.sliced - 1)  # level-0 texels per texel of the tail RGBA
    x, y, n = wx * layout.step // shrink, wy * layout.step // shrink, layout.size // shrink
    crop = np.ascontiguousarray(tail[y:y + n, x:x + n])
    for level in generate_mips(crop, colorspace="srgb")[1:]:
        levels.append(encode_image(level, FORMAT))
    return levels


def _cut_job(args: tuple[str, int, int, list[tuple[int, int, int, str]]]) -> int:
    """Write every texture of one canvas: (texture number, window x, window y, path)."""
    canvas_path, c, size, items = args
    layout = WallLayout.for_size(size)
    with np.load(canvas_path) as z:
        canvas = {k: z[k] for k in z.files}
    for i, wx, wy, path in items:
        write_ktx2(path, FORMAT, size, size, texture_levels(canvas, wx, wy, layout),
                   kv={"engineWall": f"v{VERSION} #{i} canvas {c} window {wx},{wy}"})
    return len(items)


def wall_directory(size: int, cache_dir: Path | None = None) -> Path:
    return (cache_dir or cache_root() / "wall") / f"{size}-bc7-v{VERSION}"


def wall_textures(count: int, size: int = 1024, *, cache_dir: Path | None = None,
                  workers: int | None = None, progress: bool | None = None) -> WallAssets:
    """Paths of `count` wall textures of `size`^2 BC7, generating the missing ones."""
    layout = WallLayout.for_size(size)
    directory = wall_directory(size, cache_dir)
    paths, missing = numbered_files(directory, "wall_{:05d}.ktx2", count)
    if not missing:
        return WallAssets(paths, directory, 0, 0.0)
    start = time.perf_counter()
    photos = photo_paths()
    sources = [(p, v) for v in range(VARIANTS) for p in photos]
    jobs = {assignment(i, len(sources), layout)[0] for i in missing}
    todo = [c for c in sorted(jobs) if not _canvas_file(directory, c).is_file()]
    workers = max(1, workers or min(len(todo) or 1, os.cpu_count() or 1))
    if todo:
        log.info("encoding %d wall canvases (%d^2 BC7) with %d worker(s)", len(todo),
                 layout.canvas, workers)
        args = [(str(sources[c][0]), sources[c][1], size, str(_canvas_file(directory, c)))
                for c in todo]
        with Progress(len(todo), f"wall canvases {layout.canvas}px", enabled=progress) as bar:
            if workers <= 1:
                for a in args:
                    bar.advance(1, Path(_encode_job(a)).name)
            else:
                with ProcessPoolExecutor(workers) as pool:
                    for name in pool.map(_encode_job, args):
                        bar.advance(1, Path(name).name)
    # Cutting is a slice and a small encode per texture, then a file write: grouped by
    # canvas (each loaded once), the groups over the worker processes when there are many.
    groups: dict[int, list[tuple[int, int, int, str]]] = {}
    for i in missing:
        c, wx, wy = assignment(i, len(sources), layout)
        groups.setdefault(c, []).append((i, wx, wy, str(paths[i])))
    jobs = [(str(_canvas_file(directory, c)), c, size, items) for c, items in groups.items()]
    with Progress(len(missing), f"wall {size}px bc7", enabled=progress) as bar:
        if workers <= 1 or len(missing) < 64:
            for job in jobs:
                bar.advance(_cut_job(job))
        else:
            with ProcessPoolExecutor(workers) as pool:
                for done in pool.map(_cut_job, jobs):
                    bar.advance(done)
    seconds = time.perf_counter() - start
    log.info("%d wall textures ready in %.1f s", len(missing), seconds)
    return WallAssets(paths, directory, len(missing), seconds)
