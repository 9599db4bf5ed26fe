"""Pyramid levels a file lacks, made on the fly one tile at a time.

Why: an OME-Zarr written without a pyramid (or with too few levels) would otherwise force a
zoomed-out view to read the whole finest level. A tile of a made level is the 2x2 mean of
the four tiles under it in the next finer level (themselves made the same way when that
level is made too), so a read touches only the tiles under it; the made tiles of the
coarsest levels are kept in a small LRU, since every zoom-out reads them again.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

#: made tiles kept (a 256^2 float32 tile is 256 KiB: 64 of them 16 MiB at most)
KEPT_TILES = 64

ReadStored = Callable[[int, int, int, int], np.ndarray]


def reduce2x2(block: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The 2x2 mean of `block` (odd edges repeat their last row/column), in `dtype`
    (integers rounded to nearest)."""
    h, w = block.shape
    b = block.astype(np.float64)
    if h % 2:
        b = np.concatenate([b, b[-1:]], axis=0)
    if w % 2:
        b = np.concatenate([b, b[:, -1:]], axis=1)
    m = 0.25 * (b[0::2, 0::2] + b[1::2, 0::2] + b[0::2, 1::2] + b[1::2, 1::2])
    if np.issubdtype(dtype, np.integer):
        m = np.rint(m)
    return m.astype(dtype)


class ReducedLevels:
    """The made levels of one source, after its `stored` levels."""

    def __init__(self, read_stored: ReadStored, stored: int, tile: int,
                 dtype: np.dtype) -> None:
        self._read_stored = read_stored
        self._stored = stored
        self._tile = tile
        self._dtype = dtype
        self._kept: OrderedDict[tuple[int, int, int, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def extend(self, shape: tuple[int, int]) -> list[tuple[int, int]]:
        """(height, width) of each made level below `shape` (the coarsest stored one)
        until one tile holds a level."""
        out = []
        h, w = shape
        while h > self._tile or w > self._tile:
            h, w = -(-h // 2), -(-w // 2)
            out.append((h, w))
        return out

    def read(self, level: int, channel: int, ty: int, tx: int, levels) -> np.ndarray:
        key = (level, channel, ty, tx)
        with self._lock:
            hit = self._kept.get(key)
            if hit is not None:
                self._kept.move_to_end(key)
                return hit
        fine = level - 1
        rows, cols = levels[fine].grid(self._tile)
        parts = [[self._read_fine(fine, channel, y, x, levels) for x in (2 * tx, 2 * tx + 1)
                  if x < cols] for y in (2 * ty, 2 * ty + 1) if y < rows]
        out = reduce2x2(np.block(parts), self._dtype)
        with self._lock:
            self._kept[key] = out
            while len(self._kept) > KEPT_TILES:
                self._kept.popitem(last=False)
        return out

    def _read_fine(self, level: int, channel: int, ty: int, tx: int, levels) -> np.ndarray:
        if level < self._stored:
            return self._read_stored(level, channel, ty, tx)
        return self.read(level, channel, ty, tx, levels)
