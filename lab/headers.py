"""Bulk header registration for the wall bench's scale figures: `HeaderTable`.

The per-texture facts a streamer needs (size, level count, format, where each level lies in
its file) for many KTX2 files, as numpy columns rather than one object per texture, parsed
in one vectorised pass over the files' first bytes. The per-file cost is then one open +
read + fstat + close; checks are the reader's (identifier, geometry, level sizes from the
format formula, levels inside the file). Files it does not handle in bulk (supercompressed,
arrays, cube maps, 3D, DDS, anything odd) go through `engine.textures.open`, which raises
the usual typed error for bad ones. The bench measures it against the streamer's own
registration (`HeadReader`).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine import textures
from engine.errors import TextureFormatError
from engine.formats import BY_VK
from engine.memory.sizes import level_bytes
from engine.streaming.handles import (
    HEADER_BYTES,
    KTX2_IDENTIFIER,
    LEVEL_ENTRY_BYTES,
    MAX_LEVELS,
    HandleCache,
)

PREFIX_BYTES = HEADER_BYTES + MAX_LEVELS * LEVEL_ENTRY_BYTES

_HEADER_DTYPE = np.dtype([("ident", "S12"), ("vk", "<u4"), ("type_size", "<u4"),
                          ("width", "<u4"), ("height", "<u4"), ("depth", "<u4"),
                          ("layers", "<u4"), ("faces", "<u4"), ("levels", "<u4"),
                          ("scheme", "<u4"), ("index", "<u4", 4), ("sgd", "<u8", 2),
                          ("level", "<u8", (MAX_LEVELS, 3))])


@dataclass(frozen=True)
class HeaderTable:
    """Per-texture columns for T files. `offset[t, l]`/`length[t, l]` locate level l in its
    file (0 past the last level); `fmt` names index `formats`. `special` lists the indices
    that went through `engine.textures.open` (their columns are filled from it too)."""

    paths: tuple[str, ...]
    width: np.ndarray    # (T,) int32
    height: np.ndarray   # (T,) int32
    levels: np.ndarray   # (T,) int16
    fmt: np.ndarray      # (T,) int16, index into formats
    formats: tuple[str, ...]
    offset: np.ndarray   # (T, L) int64
    length: np.ndarray   # (T, L) int64
    special: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def nbytes(self) -> int:
        """Bytes of the numpy columns (the paths' strings are separate)."""
        return sum(a.nbytes for a in (self.width, self.height, self.levels, self.fmt,
                                      self.offset, self.length))

    def read_level(self, t: int, level: int, handles: HandleCache) -> bytes:
        if not 0 <= level < int(self.levels[t]):
            raise ValueError(f"{self.paths[t]}: level {level} out of range")
        if t in self.special:
            return textures.open(self.paths[t]).read_level_all(level)
        return handles.pread(self.paths[t], int(self.offset[t, level]),
                             int(self.length[t, level]))

    @classmethod
    def from_files(cls, paths: Sequence[str | Path]) -> HeaderTable:
        """Parse every file's header and level index (see the module docstring)."""
        keys = [os.fspath(p) for p in paths]
        count = len(keys)
        raw = bytearray(count * PREFIX_BYTES)
        sizes = np.zeros(count, np.int64)
        view = memoryview(raw)
        for i, key in enumerate(keys):
            try:
                fd = os.open(key, os.O_RDONLY)
            except OSError as exc:
                raise TextureFormatError(Path(key), f"cannot open: {exc}") from exc
            try:
                got = os.readv(fd, [view[i * PREFIX_BYTES:(i + 1) * PREFIX_BYTES]])
                sizes[i] = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if got < HEADER_BYTES:
                raw[i * PREFIX_BYTES:i * PREFIX_BYTES + 12] = b"\0" * 12  # -> slow path
        h = np.frombuffer(bytes(raw), _HEADER_DTYPE, count)
        levels = np.maximum(h["levels"].astype(np.int64), 1)
        fmt_of = {vk: f for vk, f in BY_VK.items()}
        plain = ((h["ident"] == KTX2_IDENTIFIER) & (h["scheme"] == 0) & (h["layers"] == 0)
                 & (h["faces"] == 1) & (h["depth"] == 0) & (h["height"] > 0)
                 & (h["levels"] >= 1) & (h["levels"] <= MAX_LEVELS)
                 & np.isin(h["vk"], list(fmt_of)))
        width = h["width"].astype(np.int64)
        height = h["height"].astype(np.int64)
        plain &= (width <= 65536) & (height <= 65536)
        plain &= levels <= np.floor(np.log2(np.maximum(np.maximum(width, height), 1))) + 1
        lvl = np.arange(MAX_LEVELS)
        inside = lvl[None, :] < levels[:, None]
        offset = np.where(inside, h["level"][:, :, 0].astype(np.int64), 0)
        length = np.where(inside, h["level"][:, :, 1].astype(np.int64), 0)
        plain &= ((offset + length <= sizes[:, None]) | ~inside).all(axis=1)
        plain &= ((offset >= HEADER_BYTES) | ~inside).all(axis=1)
        # Level sizes from the format formula, per distinct (format, width, height).
        expected = np.zeros_like(length)
        fmts = h["vk"]
        for key in set(zip(fmts[plain].tolist(), width[plain].tolist(), height[plain].tolist())):
            vk, w, hh = key
            rows = plain & (fmts == vk) & (width == w) & (height == hh)
            pf = fmt_of[vk]
            sizes_l = [level_bytes(pf, max(1, w >> k), max(1, hh >> k)) for k in range(MAX_LEVELS)]
            expected[rows] = np.where(inside[rows], np.array(sizes_l, np.int64)[None, :], 0)
        plain &= ((length == expected) & (h["level"][:, :, 2].astype(np.int64) == expected)
                  | ~inside).all(axis=1)
        names = sorted({fmt_of[int(v)].name for v in fmts[plain]})
        index = {n: i for i, n in enumerate(names)}
        fmt = np.array([index[fmt_of[int(v)].name] if p else -1 for v, p in zip(fmts, plain)],
                       np.int16) if count else np.zeros(0, np.int16)
        special = np.flatnonzero(~plain).tolist()
        names_l = list(names)
        for i in special:  # the reader's checks, and its typed error for a bad file
            tf = textures.open(keys[i])
            if tf.pixel_format.name not in index:
                index[tf.pixel_format.name] = len(names_l)
                names_l.append(tf.pixel_format.name)
            fmt[i] = index[tf.pixel_format.name]
            width[i], height[i], levels[i] = tf.width, tf.height, len(tf.levels)
            offset[i] = 0
            length[i] = 0
            for lv in tf.levels[:MAX_LEVELS]:
                offset[i, lv.index], length[i, lv.index] = lv.offset, lv.stored_nbytes
        used = int(levels.max(initial=1))
        return cls(paths=tuple(keys), width=width.astype(np.int32),
                   height=height.astype(np.int32), levels=levels.astype(np.int16), fmt=fmt,
                   formats=tuple(names_l), offset=np.ascontiguousarray(offset[:, :used]),
                   length=np.ascontiguousarray(length[:, :used]), special=tuple(special))
