"""Tile geometry of virtual textures: which texels a tile holds, its border, its slot bytes.

Why a border: a cache slot is sampled with the hardware's bilinear filter, which at a tile's
edge reads one texel of the neighbouring tile. Copying one whole *block* (4 texels of BCn) of
the neighbours around each tile's payload makes that read exact, without re-encoding any
block: the slot is just the source level's blocks, re-gathered. At the texture's edges the
border follows the wrap mode: `repeat` gathers the wrapped blocks (so filtering across the
seam is exact), `clamp` replicates the edge blocks (the shader also clamps the virtual UV to
texel centres, so with clamp the border is never read at all).

Everything here is pure numpy on block arrays `(block_rows, block_cols, block_bytes)`: the
I/O workers use it to cut tiles out of whole decompressed levels, the tests hold the strided
file reads to it, and the page table is laid out from `VirtualLayout`.

Any size: levels are GL's (each side halved and floored), so a non-power-of-two level
does not halve exactly; a tile's ancestor k levels up is (x >> k, y >> k) clamped to that
level's grid (`ancestor_index`), which covers the tile's footprint to within a texel: the
border holds the rest. A repeat-wrapped level whose size is not a whole number of blocks
has block padding where its wrapped neighbour should be (a border is whole source blocks,
never re-encoded): filtering across that level's seam blends with the padding over half a
texel. Limits (written down because they are choices): at most
`MAX_TILES_PER_AXIS` tiles along a side (keys.py); the virtual chain stops at the last level that is at least
one block in both directions (4x4 texels for BCn): finer texture-space detail than that is
all a trilinear lookup needs, except for a texture smaller than 4 pixels on screen.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ...formats import PixelFormat
from ...memory.sizes import mip_dims
from ...textures.tiled import (  # the geometry a tiled file shares with the page cache
    BORDER_TEXELS,
    SLOT_TEXELS,
    TILE_TEXELS,
    Wrap,
    cut_slot,
    level_blocks,
    payload_blocks,
    slot_bytes,
    slot_shape,
    source_indices,
    tile_grid,
    tile_levels,
)
from .keys import MAX_LEVELS, MAX_TILES_PER_AXIS

#: Entry slot bit marking a packed small level ("tail"): the slot field then names a cell
#: of the cache's first slots, its size class in bits TAIL_CLASS_SHIFT.. and its index below.
TAIL_FLAG = 1 << 23
TAIL_CLASS_SHIFT = 20
#: Size classes of packed small levels: class k holds levels of at most (block << k) texels.
TAIL_CLASSES = 4


def ancestor_index(i, k, grid_k):
    """Tile index (x or y, int or array) of the ancestor `k` levels coarser, in a level of
    `grid_k` tiles along that axis: the shift, clamped (for sizes that do not halve exactly,
    the last tile of a level may have no parent of its own). Clamping level by level equals
    clamping once, because each grid is at least half the finer one, rounded up."""
    return np.minimum(np.asarray(i) >> k, np.asarray(grid_k) - 1)


def virtual_levels(fmt: PixelFormat, width: int, height: int, file_levels: int) -> int:
    """How many chain levels the virtual texture uses: down to the last level that is at
    least one block in both directions, and no more than the file holds or a key names."""
    return tile_levels(fmt, width, height, min(file_levels, MAX_LEVELS))


@dataclass(frozen=True)
class VirtualLayout:
    """Tile grids of one virtual texture (where its entries sit is the page table's)."""

    fmt: PixelFormat
    width: int
    height: int
    levels: int
    wrap: Wrap

    def __post_init__(self) -> None:
        if self.width < 1 or self.height < 1:
            raise ValueError(f"virtual texture of {self.width}x{self.height} texels")
        if not 1 <= self.levels <= MAX_LEVELS:
            raise ValueError(f"level count {self.levels} outside 1..{MAX_LEVELS}")
        if SLOT_TEXELS % self.fmt.block_w or BORDER_TEXELS % self.fmt.block_w:
            raise ValueError(f"{self.fmt.name}: block size does not divide the tile border")
        # Derived geometry, computed once per shape (a wall registers many of one shape)
        # and looked up every frame.
        sizes, grids, rel, entries, packed = _geometry(self.fmt, self.width, self.height,
                                                       self.levels)
        object.__setattr__(self, "_sizes", sizes)
        object.__setattr__(self, "_grids", grids)
        object.__setattr__(self, "_starts", rel)
        object.__setattr__(self, "_entries", entries)
        object.__setattr__(self, "_packed", packed)
        gx, gy = grids[0]
        if max(gx, gy) > MAX_TILES_PER_AXIS:
            raise ValueError(f"{self.width}x{self.height}: more than {MAX_TILES_PER_AXIS} "
                             f"tiles per axis")

    def level_size(self, level: int) -> tuple[int, int]:
        if 0 <= level < self.levels:
            return self._sizes[level]
        return mip_dims(self.width, self.height, level)

    def grid(self, level: int) -> tuple[int, int]:
        """Tiles (x, y) of a level; levels of TILE_TEXELS or less are a single tile."""
        return self._grids[level]

    def level_starts(self) -> tuple[int, ...]:
        """Index of each level's first tile among all the texture's tiles, level 0 first,
        each level row-major: the record order of a tiled copy."""
        return self._starts

    @property
    def entry_count(self) -> int:
        return self._entries

    def packed_levels(self) -> list[tuple[int, int]]:
        """(level, size class) of the levels small enough to share slots (tail_class): a
        suffix of the chain, coarsest last; each is one tile, pinned in a cell."""
        return list(self._packed)

    def tiles(self, level: int) -> int:
        gx, gy = self.grid(level)
        return gx * gy

    def payload_blocks(self, level: int, x: int, y: int) -> tuple[int, int, int, int]:
        """(first block column, first block row, columns, rows) of a tile's payload."""
        return payload_blocks(self.fmt, *self.level_size(level), x, y)

    def source_indices(self, level: int, x: int, y: int) -> tuple[np.ndarray, np.ndarray]:
        """Block columns and rows of the source level that fill the slot's used region
        (payload plus one border block each side), after the wrap rule."""
        return source_indices(self.fmt, *self.level_size(level), x, y, self.wrap)


@functools.lru_cache(maxsize=256)
def _geometry(fmt: PixelFormat, width: int, height: int, levels: int):
    """(level sizes, tile grids, each level's first tile index, tile count, packed levels)
    of a texture shape."""
    sizes = tuple(mip_dims(width, height, lvl) for lvl in range(levels))
    grids = tuple(tile_grid(w, h) for w, h in sizes)
    rel, at = [], 0
    for gx, gy in grids:
        rel.append(at)
        at += gx * gy
    packed = []
    for level in range(levels):
        k = tail_class(fmt, *sizes[level])
        if k is not None and grids[level] == (1, 1):
            packed.append((level, k))
    return sizes, grids, tuple(rel), at, tuple(packed)


def tail_class(fmt: PixelFormat, width: int, height: int) -> int | None:
    """Size class k of a level small enough to share a slot (at most `block << k` texels a
    side, k < TAIL_CLASSES), or None for a level that takes whole slots."""
    side = max(-(-width // fmt.block_w), -(-height // fmt.block_h))  # in blocks
    for k in range(TAIL_CLASSES):
        if side <= 1 << k:
            return k
    return None


def tail_texels(fmt: PixelFormat, k: int = 0) -> int:
    """Texels of one cell of class k: the level's payload and a one-block border."""
    return (fmt.block_w << k) + 2 * BORDER_TEXELS


def tails_per_row(fmt: PixelFormat, k: int = 0) -> int:
    return SLOT_TEXELS // tail_texels(fmt, k)


def tails_per_slot(fmt: PixelFormat, k: int = 0) -> int:
    """How many small levels of class k share one slot: for BCn 121 one-block levels (11 x 11
    cells of 12 texels), 64 of 8 texels, 25 of 16, 9 of 32. Each in a whole 136^2 slot, the
    small levels of thousands of textures would take most of a cache."""
    return tails_per_row(fmt, k) ** 2


def tail_blocks(fmt: PixelFormat, slot_data: bytes, k: int = 0) -> bytes:
    """The cell of a small level: the top-left blocks (payload of class k + borders) of its
    slot bytes."""
    n = tail_texels(fmt, k) // fmt.block_w
    return np.frombuffer(slot_data, np.uint8).reshape(slot_shape(fmt))[:n, :n].tobytes()


def cut_tile(layout: VirtualLayout, level: int, x: int, y: int, level_data: bytes) -> bytes:
    """The slot bytes of one tile, gathered from the whole level's bytes: payload and
    border blocks at the slot's top-left, the unused rest of a small level's slot zero."""
    w, h = layout.level_size(level)
    return cut_slot(layout.fmt, w, h, x, y, layout.wrap, level_blocks(layout.fmt, w, h,
                                                                      level_data))


def column_runs(cols: np.ndarray) -> list[tuple[int, int, int]]:
    """Contiguous runs of a column index list as (position in list, first column, count):
    a wrapped or clamped border splits a tile's row into at most three runs."""
    runs: list[tuple[int, int, int]] = []
    start = 0
    for i in range(1, cols.size + 1):
        if i == cols.size or cols[i] != cols[i - 1] + 1:
            runs.append((start, int(cols[start]), i - start))
            start = i
    return runs


# ------------------------------------------------------------------ packed forms
def pack_entry(slot: int, level: int) -> int:
    """A page-table entry: the slot (bits 0..23) and the level its tile belongs to."""
    return (int(level) << 24) | int(slot)


def unpack_entry(entry: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    e = np.asarray(entry, np.uint32)
    return e & 0xFFFFFF, e >> 24


class TextureGrids:
    """Per registered texture its level-0 size, level count and first packed level, in
    arrays that grow as textures register (13 bytes a texture); the tile grid of any
    (texture, level) is computed for the keys a frame asks about. Why not a table of grids
    per texture and level: at a million textures that is 256 MB, and rebuilding it when a
    texture registers costs the frame time of every texture, where this costs the keys'."""

    def __init__(self) -> None:
        self.count = 0
        self._w = np.zeros(16, np.int32)
        self._h = np.zeros(16, np.int32)
        self._levels = np.zeros(16, np.int8)
        self._first_packed = np.zeros(16, np.int8)
        self._first_cell = np.zeros(16, np.int8)

    def append(self, layout: VirtualLayout) -> None:
        if self.count == self._w.size:  # doubling: n registrations cost O(n) copies
            for name in ("_w", "_h", "_levels", "_first_packed", "_first_cell"):
                old = getattr(self, name)
                grown = np.zeros(2 * old.size, old.dtype)
                grown[:old.size] = old
                setattr(self, name, grown)
        i = self.count
        self._w[i], self._h[i], self._levels[i] = layout.width, layout.height, layout.levels
        packed = [lv for lv, _ in layout.packed_levels()]
        # Only the coarsest level is pinned; the other packed levels stream as cells.
        self._first_packed[i] = layout.levels - 1 if packed else layout.levels
        self._first_cell[i] = min(packed, default=layout.levels)
        self.count += 1

    @property
    def levels(self) -> np.ndarray:
        """Level count per texture (a view)."""
        return self._levels[:self.count]

    @property
    def first_packed(self) -> np.ndarray:
        """The pinned packed level per texture, its coarsest (its level count if that
        level takes a whole slot; a view)."""
        return self._first_packed[:self.count]

    def cell_class(self, vt: np.ndarray, level: np.ndarray, fmt: PixelFormat) -> np.ndarray:
        """Size class of each (texture, level) that streams as a packed cell (a packed
        level finer than the pinned coarsest one), -1 for the others (whole slots, or
        pinned), element-wise."""
        vt = np.asarray(vt, np.int64)
        level = np.asarray(level, np.int64)
        cell = (level >= self._first_cell[vt]) & (level < self._first_packed[vt])
        w = np.maximum(self._w[vt].astype(np.int64) >> level, 1)
        h = np.maximum(self._h[vt].astype(np.int64) >> level, 1)
        side = np.maximum(-(-w // fmt.block_w), -(-h // fmt.block_h))
        k = np.ceil(np.log2(np.maximum(side, 1))).astype(np.int64)
        return np.where(cell, k, -1)

    def grid(self, vt: np.ndarray, level: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Tiles (x, y) of level `level` of texture `vt`, element-wise (int64)."""
        vt = np.asarray(vt, np.int64)
        level = np.asarray(level, np.int64)
        w = np.maximum(self._w[vt].astype(np.int64) >> level, 1)
        h = np.maximum(self._h[vt].astype(np.int64) >> level, 1)
        return -(-w // TILE_TEXELS), -(-h // TILE_TEXELS)
