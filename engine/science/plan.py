"""What a frame of a chunked image needs (pure: numbers in, numbers out, no GL, no I/O).

The view maps screen pixels to level-0 pixels (`Viewport`), shows the level whose pixel is
no larger than a screen pixel (as napari's 2D multiscale does), asks for the tiles of that
level under the screen, centre first, and draws a missing tile from the coarsest-needed
resident tiles above it (`cover`). `SlotCache` assigns the GPU cache's slots, least
recently drawn out first.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .source import LevelInfo, TileKey


@dataclass(frozen=True)
class Viewport:
    """The screen (`width` x `height` pixels) over level 0: the level-0 point at its
    centre and level-0 pixels per screen pixel."""

    width: int
    height: int
    cx: float
    cy: float
    scale: float

    def world(self, sx: float, sy: float) -> tuple[float, float]:
        """Level-0 position of screen point (sx, sy) (pixels from the top-left corner)."""
        return (self.cx + (sx - self.width / 2) * self.scale,
                self.cy + (sy - self.height / 2) * self.scale)

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        x0, y0 = self.world(0, 0)
        x1, y1 = self.world(self.width, self.height)
        return x0, y0, x1, y1


def fit(width: int, height: int, shape: tuple[int, int]) -> Viewport:
    """The whole of a level-0 `shape` (h, w) centred on the screen."""
    h, w = shape
    return Viewport(width, height, w / 2, h / 2, max(w / width, h / height))


def downsample(levels: Sequence[LevelInfo], level: int) -> tuple[float, float]:
    """Level-0 pixels per pixel of `level`, (y, x)."""
    h0, w0 = levels[0].shape
    h, w = levels[level].shape
    return h0 / h, w0 / w


def level_for(levels: Sequence[LevelInfo], scale: float) -> int:
    """The coarsest level whose pixels are no larger than a screen pixel (level 0 when
    zoomed in past one texel per pixel)."""
    best = 0
    for i in range(len(levels)):
        if max(downsample(levels, i)) <= scale * (1 + 1e-9):
            best = i
    return best


def tile_rect(levels: Sequence[LevelInfo], tile: int, level: int, ty: int,
              tx: int) -> tuple[float, float, float, float]:
    """Level-0 rectangle (x0, y0, x1, y1) of a tile."""
    dy, dx = downsample(levels, level)
    h, w = levels[level].shape
    return (tx * tile * dx, ty * tile * dy, min(w, (tx + 1) * tile) * dx,
            min(h, (ty + 1) * tile) * dy)


def tiles_in(levels: Sequence[LevelInfo], tile: int, level: int,
             rect: tuple[float, float, float, float]) -> list[tuple[int, int]]:
    """Tiles of `level` meeting a level-0 rectangle, row by row."""
    dy, dx = downsample(levels, level)
    rows, cols = levels[level].grid(tile)
    x0, y0, x1, y1 = rect
    tx0, tx1 = max(0, math.floor(x0 / dx / tile)), min(cols - 1, math.ceil(x1 / dx / tile) - 1)
    ty0, ty1 = max(0, math.floor(y0 / dy / tile)), min(rows - 1, math.ceil(y1 / dy / tile) - 1)
    return [(ty, tx) for ty in range(ty0, ty1 + 1) for tx in range(tx0, tx1 + 1)]


def visible_tiles(levels: Sequence[LevelInfo], tile: int, level: int,
                  vp: Viewport) -> list[tuple[int, int]]:
    """Tiles of `level` on screen, nearest the centre first."""
    found = tiles_in(levels, tile, level, vp.bounds)
    dy, dx = downsample(levels, level)
    cx, cy = vp.cx / dx / tile, vp.cy / dy / tile
    return sorted(found, key=lambda t: (t[1] + 0.5 - cx) ** 2 + (t[0] + 0.5 - cy) ** 2)


def max_tiles(levels: Sequence[LevelInfo], tile: int, level: int, vp: Viewport) -> int:
    """The most tiles of `level` a screen of this size and zoom can meet, wherever it is
    (one more column and row than it spans, when the edges fall inside tiles)."""
    dy, dx = downsample(levels, level)
    rows, cols = levels[level].grid(tile)
    across = math.ceil(vp.width * vp.scale / dx / tile) + 1
    down = math.ceil(vp.height * vp.scale / dy / tile) + 1
    return min(rows, down) * min(cols, across)


@dataclass(frozen=True)
class Piece:
    """Part of the picture: resident tile `key` drawn over level-0 rectangle `rect`."""

    key: TileKey
    rect: tuple[float, float, float, float]


def _clip(a, b):
    r = (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))
    return r if r[0] < r[2] and r[1] < r[3] else None


def cover(levels: Sequence[LevelInfo], tile: int, key: TileKey,
          resident: Callable[[TileKey], bool]) -> list[Piece]:
    """How to draw tile `key`: itself when resident, else the tiles of the finest coarser
    level that are all resident over its rectangle, clipped to it; [] when none is."""
    rect = tile_rect(levels, tile, key.level, key.ty, key.tx)
    if resident(key):  # the common case, answered without walking the levels
        return [Piece(key, rect)]
    for level in range(key.level + 1, len(levels)):
        keys = [TileKey(level, key.channel, ty, tx)
                for ty, tx in tiles_in(levels, tile, level, rect)]
        if keys and all(resident(k) for k in keys):
            pieces = []
            for k in keys:
                clipped = _clip(rect, tile_rect(levels, tile, level, k.ty, k.tx))
                if clipped is not None:
                    pieces.append(Piece(k, clipped))
            return pieces
    return []


class SlotCache:
    """Which tile is in which slot of the GPU cache; the least recently used goes first,
    never one used this frame."""

    def __init__(self, slots: int) -> None:
        self.slots = int(slots)
        self._where: OrderedDict[TileKey, int] = OrderedDict()
        self._free = list(range(self.slots - 1, -1, -1))
        self._frame_used: set[TileKey] = set()
        self.evictions = 0

    def __contains__(self, key: TileKey) -> bool:
        return key in self._where

    def __len__(self) -> int:
        return len(self._where)

    def slot(self, key: TileKey) -> int:
        return self._where[key]

    def new_frame(self) -> None:
        self._frame_used.clear()

    def use(self, key: TileKey) -> None:
        """Mark a resident tile drawn this frame (most recently used)."""
        self._where.move_to_end(key)
        self._frame_used.add(key)

    def place(self, key: TileKey) -> int | None:
        """A slot for `key` (free, or the least recently used one's not used this frame);
        None when every slot is in use this frame."""
        if key in self._where:
            return self._where[key]
        if self._free:
            slot = self._free.pop()
        else:
            victim = next((k for k in self._where if k not in self._frame_used), None)
            if victim is None:
                return None
            slot = self._where.pop(victim)
            self.evictions += 1
        self._where[key] = slot
        self._frame_used.add(key)
        return slot
