"""Chunked image sources: what a scientific image viewer reads, one tile at a time.

A source is a pyramid of 2D levels (level 0 the finest) of one or more channels of one
dtype, cut into a grid of square tiles of `tile` texels (edge tiles smaller). Nothing ever
reads a whole level: `read_tile` returns one tile of one channel, so memory does not grow
with the image. `ArraySource` serves any stack of array-likes that slice lazily (zarr arrays,
tifffile's zarr stores of tiled pages); levels the file lacks, down to one tile, are made on
the fly from the next finer level, 2x2 tiles reduced to one (engine.science.pyramid).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from ..errors import ImageSourceError, UnsupportedFormatError
from .pyramid import ReducedLevels

log = logging.getLogger(__name__)

#: dtypes kept as they are on the GPU (engine.science.gpu maps each to a texture format)
SUPPORTED_DTYPES = ("uint8", "uint16", "uint32", "int8", "int16", "int32", "float16",
                    "float32")
#: tile edge when the file's own chunks are not square powers of two in [128, 1024]
DEFAULT_TILE = 256


class TileKey(NamedTuple):
    level: int
    channel: int
    ty: int
    tx: int


@dataclass(frozen=True)
class LevelInfo:
    """One pyramid level: its (height, width) and whether the file holds it (False: made
    from the finer level when read)."""

    shape: tuple[int, int]
    stored: bool = True

    def grid(self, tile: int) -> tuple[int, int]:
        """(rows, columns) of tiles."""
        return -(-self.shape[0] // tile), -(-self.shape[1] // tile)


@runtime_checkable
class ChunkedSource(Protocol):
    """What the viewer needs of a source: its shape per level, dtype, channels and tiles."""

    name: str
    levels: tuple[LevelInfo, ...]
    dtype: np.dtype
    channels: int
    channel_names: tuple[str, ...]
    tile: int

    def read_tile(self, level: int, channel: int, ty: int, tx: int) -> np.ndarray: ...

    def close(self) -> None: ...


def check_dtype(name: str, dtype: Any) -> np.dtype:
    """The source's dtype if the GPU can keep it exactly, else UnsupportedFormatError."""
    dt = np.dtype(dtype)
    if dt.byteorder == ">":
        dt = dt.newbyteorder("=")
    if dt.name not in SUPPORTED_DTYPES:
        raise UnsupportedFormatError(name, f"dtype {dt.name}",
                                     f"accepted: {', '.join(SUPPORTED_DTYPES)}")
    return dt


def pick_tile(chunks: Sequence[int] | None) -> int:
    """The file's own chunk edge when square and a power of two in [128, 1024] (a tile is
    then one chunk read), else DEFAULT_TILE."""
    if chunks and len(chunks) == 2 and chunks[0] == chunks[1]:
        c = int(chunks[0])
        if 128 <= c <= 1024 and c & (c - 1) == 0:
            return c
    return DEFAULT_TILE


@dataclass(frozen=True)
class Axes:
    """Where y, x and the channel axis are in an array's axes; other axes (t, z) are read
    at index 0."""

    y: int
    x: int
    channel: int | None
    ndim: int

    @classmethod
    def parse(cls, name: str, axes: Sequence[str], ndim: int) -> Axes:
        names = [a.lower() for a in axes]
        if len(names) != ndim:
            raise ImageSourceError(name, f"axes {list(axes)} do not match {ndim} dimensions")
        if "y" not in names or "x" not in names:
            raise ImageSourceError(name, f"axes {list(axes)} lack y or x")
        channel = next((i for i, a in enumerate(names) if a in ("c", "s")), None)
        return cls(names.index("y"), names.index("x"), channel, ndim)

    def index(self, channel: int, ys: slice, xs: slice) -> tuple:
        idx: list[Any] = [0] * self.ndim
        idx[self.y], idx[self.x] = ys, xs
        if self.channel is not None:
            idx[self.channel] = channel
        return tuple(idx)

    def shape(self, shape: Sequence[int]) -> tuple[int, int]:
        return int(shape[self.y]), int(shape[self.x])

    def channels(self, shape: Sequence[int]) -> int:
        return 1 if self.channel is None else int(shape[self.channel])


class ArraySource:
    """A source over stored levels (array-likes sliced lazily, finest first) plus the
    coarser levels made from them down to one tile."""

    def __init__(self, name: str, arrays: Sequence[Any], axes: Axes, *,
                 channel_names: Sequence[str] = (), tile: int | None = None,
                 on_close: Callable[[], None] | None = None) -> None:
        if not arrays:
            raise ImageSourceError(name, "no pyramid levels")
        self.name = name
        self.dtype = check_dtype(name, arrays[0].dtype)
        self.channels = axes.channels(arrays[0].shape)
        self._arrays = list(arrays)
        self._axes = axes
        self._on_close = on_close
        shapes = [axes.shape(a.shape) for a in arrays]
        for i, (a, s) in enumerate(zip(arrays, shapes)):
            if np.dtype(a.dtype) != np.dtype(arrays[0].dtype):
                raise ImageSourceError(name, f"level {i} is {a.dtype}, level 0 {arrays[0].dtype}")
            if axes.channels(a.shape) != self.channels:
                raise ImageSourceError(name, f"level {i} has {axes.channels(a.shape)} "
                                             f"channels, level 0 {self.channels}")
            if min(s) < 1:
                raise ImageSourceError(name, f"level {i} is empty: {s}")
            if i and (s[0] > shapes[i - 1][0] or s[1] > shapes[i - 1][1]):
                raise ImageSourceError(name, f"level {i} {s} is larger than level {i - 1} "
                                             f"{shapes[i - 1]}: levels go finest first")
        chunks = getattr(arrays[0], "chunks", None)
        self.tile = int(tile) if tile else pick_tile(
            None if chunks is None else (chunks[axes.y], chunks[axes.x]))
        stored = [LevelInfo(s) for s in shapes]
        self._reduced = ReducedLevels(self._read_stored, len(stored), self.tile, self.dtype)
        self.levels = tuple(stored) + tuple(LevelInfo(s, stored=False)
                                            for s in self._reduced.extend(shapes[-1]))
        names = list(channel_names)[:self.channels]
        self.channel_names = tuple(names + [f"channel {c}" for c in range(len(names),
                                                                            self.channels)])

    def read_tile(self, level: int, channel: int, ty: int, tx: int) -> np.ndarray:
        """Tile (ty, tx) of one channel of one level, as a 2D array of the source's dtype
        (edge tiles are smaller)."""
        if not 0 <= level < len(self.levels) or not 0 <= channel < self.channels:
            raise IndexError(f"{self.name}: no level {level} channel {channel}")
        rows, cols = self.levels[level].grid(self.tile)
        if not (0 <= ty < rows and 0 <= tx < cols):
            raise IndexError(f"{self.name}: level {level} has no tile ({ty}, {tx})")
        if self.levels[level].stored:
            return self._read_stored(level, channel, ty, tx)
        return self._reduced.read(level, channel, ty, tx, self.levels)

    def _read_stored(self, level: int, channel: int, ty: int, tx: int) -> np.ndarray:
        t = self.tile
        h, w = self.levels[level].shape
        ys, xs = slice(ty * t, min(h, (ty + 1) * t)), slice(tx * t, min(w, (tx + 1) * t))
        try:
            out = np.asarray(self._arrays[level][self._axes.index(channel, ys, xs)])
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise ImageSourceError(self.name, f"level {level} tile ({ty}, {tx}) of channel "
                                              f"{channel}: {exc}") from exc
        return out.astype(self.dtype, copy=False)

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()
            self._on_close = None
