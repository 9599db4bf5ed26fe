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

import numpy as np

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


@dataclass
class Pieces:
    """Parts of the picture: resident tile `keys[i]` drawn over level-0 rectangle
    `rects[i]` (x0, y0, x1, y1), a part of the asked tile number `owners[i]`."""

    keys: list[TileKey]
    rects: np.ndarray
    owners: np.ndarray


def cover(levels: Sequence[LevelInfo], tile: int, keys: Sequence[TileKey],
          resident: Callable[[TileKey], bool]) -> Pieces:
    """How to draw missing tiles `keys`: each from the tiles of the finest coarser level
    that are all resident over its rectangle, clipped to it (none for a tile no level
    covers); pieces in the order of `keys`.

    Why in numpy, a level at a time: after a jump every tile under the screen is missing
    and the walk up the levels for each (a thousand at 20 channels) was most of a frame's
    CPU. A level's residency is looked up once over the box the tiles meet, and a summed
    table answers "all resident?" for every tile's range at once."""
    found = []  # arrays of (index into keys, level, channel, ty, tx, x0, y0, x1, y1)
    by_level: dict[int, list[int]] = {}
    for i, k in enumerate(keys):
        by_level.setdefault(k.level, []).append(i)
    for level, index in by_level.items():
        asked = np.array(index, np.int64)
        _, ch, ty, tx = np.array([keys[i] for i in index], np.int64).reshape(-1, 4).T
        rects = _rects(levels, tile, level, ty, tx)
        rows = np.arange(len(index))  # the tiles not covered yet, into asked, ch and rects
        for coarse in range(level + 1, len(levels)):
            if not rows.size:
                break
            ranges = _ranges(levels, tile, coarse, rects[rows])
            full = _all_resident(coarse, ch[rows], ranges, resident)
            for dy, dx in _offsets(ranges[full]):
                hit = rows[full]
                cy, cx = ranges[full, 0] + dy, ranges[full, 2] + dx
                inside = (cy <= ranges[full, 1]) & (cx <= ranges[full, 3])
                hit, cy, cx = hit[inside], cy[inside], cx[inside]
                r, t = rects[hit], _rects(levels, tile, coarse, cy, cx)
                clip = np.concatenate([np.maximum(r[:, :2], t[:, :2]),
                                       np.minimum(r[:, 2:], t[:, 2:])], axis=1)
                keep = (clip[:, 0] < clip[:, 2]) & (clip[:, 1] < clip[:, 3])
                n = int(keep.sum())
                found.append(np.column_stack([
                    asked[hit[keep]], np.full(n, coarse), ch[hit[keep]], cy[keep], cx[keep],
                    clip[keep]]))
            rows = rows[~full]
    if not found:
        return Pieces([], np.zeros((0, 4)), np.zeros(0, np.int64))
    table = np.concatenate(found)
    table = table[np.argsort(table[:, 0], kind="stable")]
    return Pieces(list(map(TileKey._make, table[:, 1:5].astype(np.int64).tolist())),
                  table[:, 5:], table[:, 0].astype(np.int64))


class CoverCache:
    """`cover` answers kept from frame to frame, per asked tile.

    Why: while a view loads or pans, the same missing tiles are covered frame after frame
    from the same coarse tiles; asking again costs numpy calls that let the reader threads
    take the GIL. An answer stands while the tiles it draws from stay resident and no tile
    coarser than the asked one has come in since (one might cover it better); `cover` is
    asked only for the others."""

    def __init__(self) -> None:
        self._known: dict[TileKey, tuple[list[TileKey], list[tuple[float, ...]]]] = {}
        self._stamps: dict[int, int] = {}  # level -> coarser placements the answers saw

    def cover(self, levels: Sequence[LevelInfo], tile: int, keys: Sequence[TileKey],
              slots: SlotCache) -> tuple[list[TileKey], list[tuple[float, ...]]]:
        """The pieces of missing tiles `keys` (of layers whose pyramid is `levels` and
        `tile`), in their order: (tile keys, rectangles)."""
        known = self._known
        for level in {k.level for k in keys}:
            stamp = slots.placed_above(level)
            if self._stamps.get(level) != stamp:
                self._stamps[level] = stamp
                for k in [k for k in known if k.level == level]:
                    del known[k]
        ask = [k for k in keys if k not in known or
               not all(p in slots for p in known[k][0])]
        if ask:
            got = cover(levels, tile, ask, slots.__contains__)
            answers: dict[TileKey, tuple[list, list]] = {k: ([], []) for k in ask}
            for i, key, rect in zip(got.owners.tolist(), got.keys, got.rects.tolist()):
                ks, rs = answers[ask[i]]
                ks.append(key)
                rs.append(tuple(rect))
            known.update(answers)
        out_keys: list[TileKey] = []
        out_rects: list[tuple[float, ...]] = []
        for k in keys:
            ks, rs = known[k]
            out_keys += ks
            out_rects += rs
        return out_keys, out_rects

    def clear(self) -> None:
        self._known.clear()
        self._stamps.clear()


def _rects(levels: Sequence[LevelInfo], tile: int, level: int, ty: np.ndarray,
           tx: np.ndarray) -> np.ndarray:
    """Level-0 rectangles (x0, y0, x1, y1) of tiles of `level`, as `tile_rect`."""
    dy, dx = downsample(levels, level)
    h, w = levels[level].shape
    return np.stack([tx * tile * dx, ty * tile * dy, np.minimum(w, (tx + 1) * tile) * dx,
                     np.minimum(h, (ty + 1) * tile) * dy], axis=1).astype(np.float64)


def _offsets(ranges: np.ndarray) -> list[tuple[int, int]]:
    """(row, column) steps from a range's first tile that reach every tile of the largest
    range, row by row (one step where each range is one tile, as in a 2x pyramid)."""
    if not len(ranges):
        return []
    rows = int((ranges[:, 1] - ranges[:, 0]).max()) + 1
    cols = int((ranges[:, 3] - ranges[:, 2]).max()) + 1
    return [(r, c) for r in range(rows) for c in range(cols)]


def _ranges(levels: Sequence[LevelInfo], tile: int, level: int,
            rects: np.ndarray) -> np.ndarray:
    """Rows of (ty0, ty1, tx0, tx1): the tiles of `level` meeting each level-0 rectangle
    (as `tiles_in`; ty1 < ty0 where none)."""
    dy, dx = downsample(levels, level)
    rows, cols = levels[level].grid(tile)
    x0, y0, x1, y1 = rects.T
    return np.stack([np.maximum(0, np.floor(y0 / dy / tile)),
                     np.minimum(rows - 1, np.ceil(y1 / dy / tile) - 1),
                     np.maximum(0, np.floor(x0 / dx / tile)),
                     np.minimum(cols - 1, np.ceil(x1 / dx / tile) - 1)], axis=1).astype(np.int64)


def _all_resident(level: int, channels: np.ndarray, ranges: np.ndarray,
                  resident: Callable[[TileKey], bool]) -> np.ndarray:
    """For each row, whether every tile of `level` in its range of its channel is resident
    (False for an empty range): residency read once over the box all ranges meet."""
    y0, x0 = ranges[:, 0].min(), ranges[:, 2].min()
    y1, x1 = ranges[:, 1].max(), ranges[:, 3].max()
    if y1 < y0 or x1 < x0:
        return np.zeros(len(ranges), bool)
    chans, which = np.unique(channels, return_inverse=True)
    have = np.array([[[resident(TileKey(level, c, r, x)) for x in range(x0, x1 + 1)]
                      for r in range(y0, y1 + 1)] for c in chans.tolist()], np.int64)
    table = np.zeros((len(chans), have.shape[1] + 1, have.shape[2] + 1), np.int64)
    table[:, 1:, 1:] = have.cumsum(1).cumsum(2)  # table[c, r, x]: resident above and left
    a, b = ranges[:, 0] - y0, ranges[:, 1] - y0 + 1
    c, d = ranges[:, 2] - x0, ranges[:, 3] - x0 + 1
    ok = (b > a) & (d > c)
    a, b, c, d = (np.where(ok, v, 0) for v in (a, b, c, d))
    count = table[which, b, d] - table[which, a, d] - table[which, b, c] + table[which, a, c]
    return ok & (count == (b - a) * (d - c))


class SlotCache:
    """Which tile is in which slot of the GPU cache; the least recently used goes first,
    never one used this frame."""

    def __init__(self, slots: int) -> None:
        self.slots = int(slots)
        self._where: OrderedDict[TileKey, int] = OrderedDict()
        self._free = list(range(self.slots - 1, -1, -1))
        self._frame_used: set[TileKey] = set()
        self.evictions = 0
        self._placed: dict[int, int] = {}  # level -> tiles placed there

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
        self._placed[key.level] = self._placed.get(key.level, 0) + 1
        return slot

    def placed_above(self, level: int) -> int:
        """Tiles placed so far at levels coarser than `level`."""
        return sum(n for lv, n in self._placed.items() if lv > level)

    def resized(self, slots: int) -> tuple[SlotCache, list[tuple[int, int]]]:
        """A cache of `slots` slots holding the most recently used tiles that fit, in the
        same order, and the (old slot, new slot) moves that carry their values over."""
        new = SlotCache(slots)
        new._placed = dict(self._placed)
        kept = list(self._where.items())[max(0, len(self._where) - new.slots):]
        moves = []
        for key, old in kept:
            slot = new._free.pop()
            new._where[key] = slot
            moves.append((old, slot))
        return new, moves
