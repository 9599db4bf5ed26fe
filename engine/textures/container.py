"""The data model every texture reader produces, whatever the container.

A `TextureFile` is only the header and level index of a file: opening one reads no pixel
data, so the streamer can open thousands of textures and pull single mip levels later
(from worker threads). Every read opens the file anew, which keeps a `TextureFile`
free of OS handles and safe to share between threads.

Limits (documented because hostile files are expected): each dimension is at most
`MAX_DIMENSION` (1 << 16) texels, depth and array layers at most `MAX_DEPTH` / `MAX_LAYERS`
(2048, the common GL_MAX_3D_TEXTURE_SIZE / GL_MAX_ARRAY_TEXTURE_LAYERS) and the level count
at most log2(max dimension) + 1. Larger values are a `TextureFormatError`.
"""
from __future__ import annotations

import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TextureFormatError
from ..formats import PixelFormat
from ..memory.sizes import level_bytes, mip_count

log = logging.getLogger(__name__)

MAX_DIMENSION = 1 << 16
MAX_DEPTH = 2048
MAX_LAYERS = 2048


@dataclass(frozen=True)
class Level:
    """One mip level as the file declares it.

    `nbytes` is the uncompressed size of the whole level (all layers, faces and depth
    slices: KTX2's uncompressedByteLength); `image_nbytes` is one layer/face of it.
    `offset`/`stored_nbytes` locate the level on disk. For KTX2 that is the one
    contiguous (possibly supercompressed) block of the level; DDS stores each layer/face
    chain separately, so there `offset` is the layer-0/face-0 image and `stored_nbytes`
    equals `nbytes`.
    """

    index: int
    width: int
    height: int
    depth: int
    offset: int
    stored_nbytes: int
    nbytes: int
    image_nbytes: int


@dataclass
class TextureFile(ABC):
    """Header-level view of a texture file; subclasses know where the bytes live."""

    path: Path
    container: str
    pixel_format: PixelFormat
    width: int
    height: int
    depth: int
    layers: int
    faces: int
    levels: tuple[Level, ...]
    supercompression: str = "none"
    is_array: bool = False
    file_size: int = 0
    #: Container-specific identifiers (vk_format, dxgi_format, fourcc, ...) for `inspect`.
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def format(self) -> str:
        """Our name of the pixel format (see engine/formats.py)."""
        return self.pixel_format.name

    @property
    def is_cube(self) -> bool:
        return self.faces == 6

    def level(self, level: int) -> Level:
        """The `Level` record, with an IndexError-free bounds check."""
        if not 0 <= level < len(self.levels):
            raise ValueError(f"{self.path}: level {level} out of range 0..{len(self.levels) - 1}")
        return self.levels[level]

    def read_level(self, level: int, layer: int = 0, face: int = 0) -> bytes:
        """Bytes of one image (one layer/face, all depth slices) of `level`."""
        lv = self.level(level)
        if not 0 <= layer < self.layers or not 0 <= face < self.faces:
            raise ValueError(f"{self.path}: layer {layer}/face {face} out of range "
                             f"(layers={self.layers}, faces={self.faces})")
        return self._read_image(lv, layer, face)

    def read_level_all(self, level: int) -> bytes:
        """The whole level, every layer and face, in KTX2/GL order (layer-major, then face)."""
        return self._read_all(self.level(level))

    def read_levels_all(self, levels: Sequence[int]) -> dict[int, bytes]:
        """Several whole levels by index (a streamer's resident tail at registration).
        Formats whose levels are plain spans of the file read neighbours in one go."""
        return {i: self.read_level_all(i) for i in levels}

    def read_block_rows(self, level: int, row0: int, count: int) -> bytes:
        """Block rows `row0` .. `row0 + count` of a level stored as one plain image (no
        supercompression, one layer, face and slice): a band of a huge level without reading
        the whole level."""
        lv = self.level(level)
        if self.supercompression != "none" or self.layers != 1 or self.faces != 1 \
                or lv.depth != 1:
            raise ValueError(f"{self.path}: level {level} is not one plain image")
        fmt = self.pixel_format
        row_bytes = -(-lv.width // fmt.block_w) * fmt.block_bytes
        rows = -(-lv.height // fmt.block_h)
        if not 0 <= row0 <= row0 + count <= rows:
            raise ValueError(f"{self.path}: block rows {row0}..{row0 + count} outside "
                             f"level {level}'s {rows}")
        return self._read_span(lv.offset + row0 * row_bytes, count * row_bytes,
                               f"level {level} block rows")

    @abstractmethod
    def _read_image(self, lv: Level, layer: int, face: int) -> bytes: ...

    @abstractmethod
    def _read_all(self, lv: Level) -> bytes: ...

    def _read_span(self, offset: int, length: int, what: str) -> bytes:
        """Seek + read exactly `length` bytes; a file that shrank since `open` is an error."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(offset)
                data = fh.read(length)
        except OSError as exc:
            raise TextureFormatError(self.path, f"cannot read {what}: {exc}") from exc
        if len(data) != length:
            raise TextureFormatError(self.path, f"{what}: file truncated (wanted {length} bytes "
                                                f"at offset {offset}, got {len(data)})")
        return data


def file_size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError as exc:
        raise TextureFormatError(path, f"cannot stat file: {exc}") from exc


def read_prefix(path: Path, length: int) -> bytes:
    """The first `length` bytes (or fewer, if the file is shorter): the headers to parse."""
    try:
        with open(path, "rb") as fh:
            return fh.read(length)
    except OSError as exc:
        raise TextureFormatError(path, f"cannot read file: {exc}") from exc


def check_geometry(path: Path, fmt: PixelFormat, width: int, height: int, depth: int,
                   layers: int, faces: int, level_count: int) -> None:
    """Reject dimensions no GPU would take before any size arithmetic trusts them."""
    for name, value, limit in (("width", width, MAX_DIMENSION), ("height", height, MAX_DIMENSION),
                               ("depth", depth, MAX_DEPTH), ("layers", layers, MAX_LAYERS)):
        if not 1 <= value <= limit:
            raise TextureFormatError(path, f"{name} {value} outside 1..{limit}")
    if faces not in (1, 6):
        raise TextureFormatError(path, f"face count {faces} (must be 1 or 6)")
    if faces == 6 and (width != height or depth != 1):
        raise TextureFormatError(path, f"cube map faces must be square 2D, got "
                                       f"{width}x{height}x{depth}")
    if depth > 1 and layers > 1:
        raise TextureFormatError(path, "3D textures cannot be arrays (depth > 1 and layers > 1)")
    most = mip_count(width, height, depth)
    if not 1 <= level_count <= most:
        raise TextureFormatError(path, f"level count {level_count} outside 1..{most} "
                                       f"for {width}x{height}x{depth}")


def level_geometry(fmt: PixelFormat, width: int, height: int, depth: int,
                   index: int) -> tuple[int, int, int, int]:
    """(w, h, d, bytes of one layer/face image) of level `index`, from the format formula."""
    w, h, d = max(1, width >> index), max(1, height >> index), max(1, depth >> index)
    return w, h, d, level_bytes(fmt, w, h, d)
