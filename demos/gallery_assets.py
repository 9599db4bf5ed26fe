"""The gallery's textures: many distinct, large, procedurally made BCn textures, cached.

Why tiles: the gallery wants ~200 distinct 4096x4096 BC7 textures. etcpak needs ~3.4 s per
4096^2 BC7 level, so encoding them all would take ~11 minutes on 2 cores. BCn blocks are
independent 4x4-texel units, so an encoded image can be *composed* from encoded pieces at
block granularity and the result is exactly what encoding the composed image would give (up
to each piece's encoder choices). So:

1. A pool of `POOL` tiles (T x T, T = 256 at the default size) is generated (noise, stripes,
   checkers, glyph grids, rings in seeded palettes) and encoded once, with its own mip chain
   down to 4x4 texels.
2. Each texture is a grid of tiles: its own seeded subset of the pool, in its own layout
   (random, macro blocks, diagonals, rings), plus two tiles unique to it (its number in big
   digits on its own colour) encoded per texture. Level k of the texture is the same grid of
   the tiles' level k: with power-of-two tiles the box-filtered mip of a grid of tiles *is*
   the grid of the tiles' mips, so this is exact, not an approximation.
3. Levels whose tiles would be smaller than one block are made from the composed RGBA of the
   last composed level (tiny), mipmapped and encoded normally.

Every texture is different (subset, layout, label), the work is ~POOL + 2*count tiles instead
of count full images, and the big part of writing a file is a numpy gather plus disk I/O.
Files are written atomically, one per texture, so a later run only checks they exist.
"""
from __future__ import annotations

import colorsys
import logging
import os
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.formats import get as get_format
from engine.textures.cachedir import cache_root, numbered_files
from engine.textures.encode import encode_image
from engine.textures.ktx2_write import write_ktx2
from engine.textures.mipgen import generate_mips
from engine.textures.progress import Progress

log = logging.getLogger(__name__)

VERSION = 1
POOL = 96
SEED = 20240611
FORMATS = {"bc7": "BC7_SRGB", "bc1": "BC1_RGB_SRGB"}
_DIGITS = ["111101101101111", "010110010010111", "111001111100111", "111001111001111",
           "101101111001001", "111100111001111", "111100111101111", "111001001001001",
           "111101111101111", "111101111001111"]  # 3x5 bitmaps, row-major


@dataclass(frozen=True)
class GalleryAssets:
    """Where the textures are and what making them cost (0 when they were cached)."""

    paths: list[Path]
    directory: Path
    generated: int
    seconds: float



def tile_size(size: int) -> int:
    """Tiles are at most 256 and at least 4 per side of a texture, and a power of two."""
    if size < 16 or size & (size - 1):
        raise ValueError(f"gallery texture size must be a power of two >= 16, got {size}")
    return min(256, size // 4)


# ---------------------------------------------------------------------------- patterns
def _value_noise(rng: np.random.Generator, n: int, octaves: int) -> np.ndarray:
    out = np.zeros((n, n), np.float32)
    amp, total = 1.0, 0.0
    for o in range(octaves):
        cells = 2 << o
        grid = rng.random((cells + 1, cells + 1), dtype=np.float32)
        x = np.linspace(0, cells, n, endpoint=False, dtype=np.float32)
        i = x.astype(np.int32)
        f = x - i
        f = f * f * (3 - 2 * f)
        rows = grid[i] * (1 - f)[:, None] + grid[i + 1] * f[:, None]
        out += amp * (rows[:, i] * (1 - f) + rows[:, i + 1] * f)
        total += amp
        amp *= 0.55
    return out / total


def _glyphs(rng: np.random.Generator, n: int) -> np.ndarray:
    cells = int(rng.integers(4, 12))
    cell = max(n // cells, 4)
    per_side = n // cell + 1
    bits = rng.random((per_side, per_side, 5, 3)) < 0.45
    yy, xx = np.mgrid[0:n, 0:n]
    cy, cx = yy // cell, xx // cell
    gy = ((yy % cell) * 7 // cell) - 1
    gx = ((xx % cell) * 5 // cell) - 1
    inside = (gy >= 0) & (gy < 5) & (gx >= 0) & (gx < 3)
    return (inside & bits[cy, cx, np.clip(gy, 0, 4), np.clip(gx, 0, 2)]).astype(np.float32)


def _pattern(rng: np.random.Generator, n: int) -> np.ndarray:
    """A scalar field in 0..1 of one of several kinds, modulated by noise."""
    yy, xx = (np.mgrid[0:n, 0:n].astype(np.float32) + 0.5) / n
    kind = int(rng.integers(0, 5))
    if kind == 0:
        base = _value_noise(rng, n, int(rng.integers(3, 7)))
    elif kind == 1:
        angle = rng.uniform(0, np.pi)
        freq = rng.integers(2, 16)
        base = 0.5 + 0.5 * np.sin(2 * np.pi * freq * (xx * np.cos(angle) + yy * np.sin(angle)))
    elif kind == 2:
        c = int(rng.integers(2, 12))
        base = ((np.floor(xx * c) + np.floor(yy * c)) % 2).astype(np.float32)
    elif kind == 3:
        base = _glyphs(rng, n)
    else:
        cx, cy = rng.random(2)
        base = 0.5 + 0.5 * np.cos(np.hypot(xx - cx, yy - cy) * rng.uniform(10, 60))
    noise = _value_noise(rng, n, 5)
    return np.clip(base * 0.8 + noise * 0.35 - 0.1, 0, 1)


def _palette(rng: np.random.Generator, k: int = 4) -> np.ndarray:
    h0 = rng.random()
    return np.array([colorsys.hsv_to_rgb((h0 + rng.uniform(-0.15, 0.15)) % 1.0,
                                         rng.uniform(0.3, 0.9), rng.uniform(0.2, 1.0))
                     for _ in range(k)], np.float32)


def _colorize(field: np.ndarray, palette: np.ndarray) -> np.ndarray:
    k = len(palette) - 1
    x = field * k
    i = np.clip(x.astype(np.int32), 0, k - 1)
    f = (x - i)[..., None]
    rgb = palette[i] * (1 - f) + palette[i + 1] * f
    out = np.empty(field.shape + (4,), np.uint8)
    out[..., :3] = np.clip(rgb * 255 + 0.5, 0, 255)
    out[..., 3] = 255
    return out


def make_tile(index: int, n: int) -> np.ndarray:
    rng = np.random.default_rng([SEED, index])
    return _colorize(_pattern(rng, n), _palette(rng))


def make_label(number: int, n: int) -> np.ndarray:
    """A 2n x n (w x h) plate with `number` in big digits on a colour of its own."""
    hue = (number * 0.6180339887) % 1.0
    bg = np.array(colorsys.hsv_to_rgb(hue, 0.65, 0.55), np.float32)
    fg = np.array(colorsys.hsv_to_rgb((hue + 0.5) % 1.0, 0.25, 1.0), np.float32)
    digits = f"{number:03d}"
    img = np.zeros((n, 2 * n), np.float32)
    scale = max(1, min(n // 7, (2 * n) // (4 * len(digits) + 1)))
    y0 = (n - 5 * scale) // 2
    x0 = (2 * n - (4 * len(digits) - 1) * scale) // 2
    for d, ch in enumerate(digits):
        bits = np.array([int(b) for b in _DIGITS[int(ch)]], np.float32).reshape(5, 3)
        block = np.kron(bits, np.ones((scale, scale), np.float32))
        x = x0 + d * 4 * scale
        img[y0:y0 + 5 * scale, x:x + 3 * scale] = block
    rgb = bg * (1 - img[..., None]) + fg * img[..., None]
    out = np.empty((n, 2 * n, 4), np.uint8)
    out[..., :3] = np.clip(rgb * 255 + 0.5, 0, 255)
    out[..., 3] = 255
    return out


# ---------------------------------------------------------------------------- encoding
def _encode_chain(rgba: np.ndarray, fmt: str, levels: int) -> list[np.ndarray]:
    """Encode `levels` mip levels of an image as block grids (rows, cols, block_bytes)."""
    bb = get_format(fmt).block_bytes
    out = []
    for level in generate_mips(rgba, colorspace="srgb", max_levels=levels):
        h, w = level.shape[:2]
        out.append(np.frombuffer(encode_image(level, fmt), np.uint8).reshape(h // 4, w // 4, bb))
    return out


def _layout(rng: np.random.Generator, grid: int, pool: int) -> np.ndarray:
    """Tile indices (grid x grid) into the pool: a seeded subset in a seeded arrangement."""
    subset = rng.choice(pool, size=int(rng.integers(4, 13)), replace=False)
    yy, xx = np.mgrid[0:grid, 0:grid]
    kind = int(rng.integers(0, 4))
    if kind == 0:
        pick = rng.integers(0, len(subset), (grid, grid))
    elif kind == 1:
        macro = int(rng.choice([2, 4])) if grid >= 4 else 1
        pick = rng.integers(0, len(subset), (grid // macro + 1, grid // macro + 1))[
            yy // macro, xx // macro]
    elif kind == 2:
        pick = (xx + yy * int(rng.integers(1, 4))) % len(subset)
    else:
        r = np.hypot(xx - grid / 2 + 0.5, yy - grid / 2 + 0.5)
        pick = (r * rng.uniform(0.5, 1.5)).astype(np.int64) % len(subset)
    return subset[pick]


@dataclass(frozen=True)
class TilePool:
    """The encoded tile pool: `levels[k]` holds every tile's level k as block grids
    (POOL, b, b, block_bytes), `tail` every tile's RGBA at the last of those levels
    (POOL, 4, 4, 4), from which the texture's coarsest levels are made."""

    levels: list[np.ndarray]
    tail: np.ndarray


def _tile_levels(size: int) -> int:
    """Tile mip levels kept as encoded blocks: down to 4x4 texels."""
    return int(np.log2(tile_size(size))) - 1


def _pool_part(size: int, fmt: str, numbers: list[int]) -> tuple[list[np.ndarray], np.ndarray]:
    """Tiles `numbers` of the pool, encoded: (per level, their block grids stacked), their
    RGBA tails. A process pool makes the parts of one pool side by side."""
    tile, levels = tile_size(size), _tile_levels(size)
    chains, tails = [], []
    for i in numbers:
        rgba = make_tile(i, tile)
        chains.append(_encode_chain(rgba, fmt, levels))
        tails.append(generate_mips(rgba, colorspace="srgb", max_levels=levels)[-1])
    return [np.stack([c[k] for c in chains]) for k in range(levels)], np.stack(tails)


def make_pool(size: int, fmt: str, executor: Executor | None = None, parts: int = 1) -> TilePool:
    """The whole tile pool, encoded in `parts` pieces on `executor` (serially without one).

    Why not once per worker: the pool is most of the work of a small gallery (96 tiles of
    256^2 at 1024^2 and above, ~9 s of BC7 on one core), and every worker building its own
    copy made adding workers useless for it."""
    chunks = [list(c) for c in np.array_split(np.arange(POOL), max(1, min(parts, POOL)))]
    sizes, fmts = [size] * len(chunks), [fmt] * len(chunks)
    done = list(executor.map(_pool_part, sizes, fmts, chunks) if executor is not None
                else map(_pool_part, sizes, fmts, chunks))
    levels = [np.concatenate([d[0][k] for d in done]) for k in range(_tile_levels(size))]
    return TilePool(levels, np.concatenate([d[1] for d in done]))


class _Builder:
    """Holds the encoded tile pool; builds one texture file at a time."""

    def __init__(self, size: int, fmt: str, pool: TilePool | None = None) -> None:
        self.size, self.fmt = size, fmt
        self.tile = tile_size(size)
        self.grid = size // self.tile
        self.tile_levels = _tile_levels(size)
        tiles = pool if pool is not None else make_pool(size, fmt)
        self.pool, self.pool_tail = tiles.levels, tiles.tail

    def build(self, number: int, path: Path) -> None:
        rng = np.random.default_rng([SEED, 1_000_003, number])
        layout = _layout(rng, self.grid, POOL)
        ly = int(rng.integers(0, self.grid))
        lx = int(rng.integers(0, self.grid - 1))
        label = make_label(number, self.tile)
        label_chain = _encode_chain(label, self.fmt, self.tile_levels)
        levels: list[bytes] = []
        for k in range(self.tile_levels):
            tiles = self.pool[k][layout]  # (G, G, b, b, bb)
            g, _, b, _, bb = tiles.shape
            img = tiles.transpose(0, 2, 1, 3, 4).reshape(g * b, g * b, bb)
            img[ly * b:(ly + 1) * b, lx * b:(lx + 2) * b] = label_chain[k]
            levels.append(img.tobytes())
        # Tail: the composed RGBA of the last tile level, mipmapped and encoded normally.
        tail = self.pool_tail[layout]  # (G, G, 4, 4, 4)
        g = tail.shape[0]
        t = tail.shape[2]
        tail_img = tail.transpose(0, 2, 1, 3, 4).reshape(g * t, g * t, 4).copy()
        label_tail = generate_mips(label, colorspace="srgb", max_levels=self.tile_levels)[-1]
        tail_img[ly * t:(ly + 1) * t, lx * t:(lx + 2) * t] = label_tail
        for level in generate_mips(tail_img, colorspace="srgb")[1:]:
            levels.append(encode_image(level, self.fmt))
        write_ktx2(path, self.fmt, self.size, self.size, levels,
                   kv={"engineGallery": f"v{VERSION} #{number}"})


_WORKER: _Builder | None = None


def _worker_init(size: int, fmt: str, pool: TilePool) -> None:
    global _WORKER
    _WORKER = _Builder(size, fmt, pool)


def _worker_build(number: int, path: str) -> int:
    assert _WORKER is not None
    _WORKER.build(number, Path(path))
    return number


def gallery_texture_paths(count: int, size: int = 4096, fmt: str = "bc7", *,
                          cache_dir: Path | None = None) -> list[Path]:
    """Where `gallery_textures` keeps these textures, made or not."""
    directory = (cache_dir or cache_root() / "gallery") / f"{size}-{fmt}-v{VERSION}"
    return [directory / f"gallery_{i:04d}.ktx2" for i in range(count)]


def gallery_textures(count: int, size: int = 4096, fmt: str = "bc7", *,
                     cache_dir: Path | None = None, workers: int | None = None,
                     progress: bool | None = None) -> GalleryAssets:
    """Paths of `count` gallery textures, generating the missing ones (deterministic: the
    same number always gives the same texture, whatever the count asked for)."""
    if fmt not in FORMATS:
        raise ValueError(f"gallery format must be one of {sorted(FORMATS)}, got {fmt!r}")
    directory = (cache_dir or cache_root() / "gallery") / f"{size}-{fmt}-v{VERSION}"
    paths, missing = numbered_files(directory, "gallery_{:04d}.ktx2", count)
    if not missing:
        return GalleryAssets(paths, directory, 0, 0.0)
    start = time.perf_counter()
    # The tile pool is shared work: it gets every core even for a few missing textures.
    workers = workers or os.cpu_count() or 1
    log.info("generating %d gallery textures (%dx%d %s) in %s with %d worker(s)", len(missing),
             size, size, fmt, directory, workers)
    with Progress(len(missing), f"gallery {size}px {fmt}", enabled=progress) as bar:
        if workers <= 1:
            builder = _Builder(size, FORMATS[fmt])
            for i in missing:
                builder.build(i, paths[i])
                bar.advance(1, paths[i].name)
        else:
            with ProcessPoolExecutor(workers) as pool:
                tiles = make_pool(size, FORMATS[fmt], pool, parts=4 * workers)
            with ProcessPoolExecutor(min(workers, len(missing)), initializer=_worker_init,
                                     initargs=(size, FORMATS[fmt], tiles)) as pool:
                for i in pool.map(_worker_build, missing, [str(paths[i]) for i in missing]):
                    bar.advance(1, paths[i].name)
    seconds = time.perf_counter() - start
    log.info("gallery textures ready in %.1f s", seconds)
    return GalleryAssets(paths, directory, len(missing), seconds)
