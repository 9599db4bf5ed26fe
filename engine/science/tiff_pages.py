"""A tiled TIFF level's tiles read straight from the file, one TIFF tile a view tile.

Why: through tifffile's zarr store every tile read seeks and reads the one file handle the
TiffFile holds, so reads have to take turns and the reader threads never overlap. A TIFF
says where each tile's bytes are (its TileOffsets and TileByteCounts), so once the pages
are parsed (at open, in one thread) a tile is a positional read (`os.pread`, or an HTTP
range request) and tifffile's own decoder for the page: several threads at once. Reads that
are not one whole tile (or levels laid out otherwise) go through the zarr store, one at a
time.
"""
from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .chunks import whole_chunk

log = logging.getLogger(__name__)

#: reads bytes [offset, offset + length) of the file
RangeRead = Callable[[int, int], bytes]


def file_ranges(path: str) -> tuple[RangeRead, Callable[[], None]]:
    """Positional reads of a local file (no shared file position) and how to close it."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))

    def read(offset: int, length: int) -> bytes:
        data = os.pread(fd, length, offset)
        if len(data) != length:
            raise OSError(f"tile at {offset} cut short: {len(data)} of {length} bytes")
        return data
    return read, lambda: os.close(fd)


def url_ranges(url: str) -> RangeRead | None:
    """HTTP range requests through fsspec, or None when the server sends whole files for
    them (each tile would then download the whole image)."""
    import fsspec

    fs = fsspec.filesystem("http")

    def read(offset: int, length: int) -> bytes:
        data = fs.cat_file(url, start=offset, end=offset + length)
        if len(data) != length:
            raise OSError(f"tile at {offset} cut short: {len(data)} of {length} bytes")
        return data
    try:
        read(0, 8)  # the TIFF header
    except Exception as exc:  # noqa: BLE001 - whatever the probe meets, the store path reads
        log.info("%s: no byte ranges (%s); tiles read through the zarr store", url, exc)
        return None
    return read


@dataclass(frozen=True)
class TileTable:
    """Where a level's tiles are: planes (pages) by the axes before y and x, each cut in
    tiles of tile_h x tile_w, `across` to a row; per plane and tile its bytes' offset and
    count in the file, and the page's decoder (bytes, tile number -> decoded tile of shape
    (1, tile_h, tile_w, samples))."""

    lead: int
    samples: bool
    tile_h: int
    tile_w: int
    across: int
    offsets: np.ndarray
    counts: np.ndarray
    decode: Callable[[bytes, int], np.ndarray]
    #: the most bytes a tile's compressed data may claim (a damaged or hostile table could
    #: otherwise make a read allocate gigabytes): twice its decoded size, plus 64 KiB
    most: int


class TiffLevel:
    """One series level of a TIFF, looking like its zarr array to ArraySource (shape,
    dtype, chunks, indexing). Whole-tile reads of a tiled level whose pages each hold one
    (y, x[, samples]) plane are read directly; anything else goes to `array` under `lock`
    (the TiffFile's handle is shared by every level)."""

    def __init__(self, level: Any, array: Any, lock: threading.Lock,
                 read: RangeRead | None) -> None:
        self.array = array
        self.shape = tuple(array.shape)
        self.dtype = np.dtype(array.dtype)
        self.chunks = tuple(array.chunks)
        self._lock = lock
        self._read = read
        self.direct = 0
        self._tiles = self._table(level) if read is not None else None

    def _table(self, level: Any) -> TileTable | None:
        """The level's tile table when whole tiles can be read directly, else None."""
        try:
            key = level.keyframe
            axes = level.axes.upper()
            lead = axes.index("YX") if "YX" in axes else -1
            rest = axes[lead + 2:]
            planes = math.prod(self.shape[:lead]) if lead >= 0 else 0
            pages = list(level.pages)
            ok = (lead >= 0 and rest in ("", "S") and key.is_tiled and key.tiledepth == 1
                  and key.imagedepth == 1 and (rest == "" or int(key.planarconfig) == 1)
                  and len(pages) == planes and all(p is not None for p in pages)
                  and all(p.shape == key.shape for p in pages))
            if not ok:
                return None
            offsets = np.array([p.dataoffsets for p in pages], np.int64)
            counts = np.array([p.databytecounts for p in pages], np.int64)
            tile_h, tile_w = int(key.tilelength), int(key.tilewidth)
            across = -(-int(key.imagewidth) // tile_w)
            down = -(-int(key.imagelength) // tile_h)
            if offsets.shape != (planes, across * down):
                return None
            decode = key.decode
            jpegtables = getattr(key, "jpegtables", None)
            samples = int(key.samplesperpixel) if rest else 1
            return TileTable(lead, rest == "S", tile_h, tile_w, across, offsets, counts,
                             lambda data, i: decode(data, i, jpegtables=jpegtables)[0],
                             2 * tile_h * tile_w * samples * self.dtype.itemsize + (64 << 10))
        except (AttributeError, ValueError, TypeError, NotImplementedError) as exc:
            log.debug("TIFF tiles read through zarr: %s", exc)
            return None

    def _tile_of(self, tiles: TileTable, index: tuple) -> tuple[int, int, tuple] | None:
        """(plane, tile number, index within the decoded tile) when `index` is one whole
        tile of one plane, else None."""
        lead = tiles.lead
        if not isinstance(index, tuple) or len(index) != len(self.shape):
            return None
        heads = index[:lead]
        if not all(isinstance(i, (int, np.integer)) for i in heads):
            return None
        ys, xs = index[lead], index[lead + 1]
        if not isinstance(ys, slice) or not isinstance(xs, slice):
            return None
        rows = whole_chunk(ys, tiles.tile_h, self.shape[lead])
        cols = whole_chunk(xs, tiles.tile_w, self.shape[lead + 1])
        if rows is None or cols is None:
            return None
        plane = int(np.ravel_multi_index(tuple(int(i) for i in heads), self.shape[:lead])) \
            if lead else 0
        sample = index[lead + 2] if tiles.samples else 0
        return plane, rows[0] * tiles.across + cols[0], (0, slice(0, rows[1]),
                                                         slice(0, cols[1]), sample)

    def __getitem__(self, index: tuple) -> np.ndarray:
        tiles = self._tiles
        found = self._tile_of(tiles, index) if tiles is not None else None
        if found is None:
            with self._lock:
                return self.array[index]
        plane, i, inner = found
        count = int(tiles.counts[plane, i])  # type: ignore[union-attr]
        if count == 0:  # a tile the writer left out: the fill value
            return np.zeros((inner[1].stop, inner[2].stop), self.dtype)
        if count > tiles.most:  # type: ignore[union-attr]
            raise ValueError(f"tile {i} claims {count} bytes, more than a tile can take")
        data = self._read(int(tiles.offsets[plane, i]), count)  # type: ignore[misc, union-attr]
        self.direct += 1
        return tiles.decode(data, i)[inner]  # type: ignore[union-attr]
