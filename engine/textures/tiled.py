"""Tile-contiguous texture files: fixed-size records, one per tile, each one read.

Why: a virtual texture's tile (with its border) is scattered over 34+ block rows of a KTX2
level, and a supercompressed level cannot be read in part at all. Stored as one record
after another, a tile is one positioned read (`os.pread`, which releases the GIL while the
disk works) of `record_bytes` at `data_offset + index * record_bytes`.

What a record holds is the caller's business (engine/streaming/virtual lays out slots:
payload and border blocks, level by level, row-major); this module owns the container:

    magic b"ENGTILE2", uint32 header length, a JSON header (what the records are and the
    source file they were made from: its size, modification and change times and inode,
    engine.textures.identity, so a stale copy is never used, even one of a file replaced
    by `cp -p`), zero padding to `ALIGN`, the records, then a CRC32 per record (uint32,
    little-endian, in record order).

A file is written to a temporary name and renamed into place, so a reader never sees half
of one; a record whose bytes differ from its CRC32 (a disk, a copy or a hand damaged the
file since) is a TextureFormatError, never noise on screen.

The tile geometry lives here too (tile and border size, which source blocks fill a slot,
the records of a whole file), below engine/streaming: `engine bake` writes the tiled copy
of a texture that will stream virtually (`write_sidecar`, next to the baked file) with the
same code the virtual texture system uses to make one on first use.
"""
from __future__ import annotations

import json
import os
import zlib
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

import numpy as np

from ..errors import TextureFormatError
from ..formats import PixelFormat
from ..memory.sizes import mip_dims
from .container import TextureFile
from .durable import commit
from .identity import source_identity

MAGIC = b"ENGTILE2"
ALIGN = 4096
#: Payload texels of a tile along each axis (a power of two).
TILE_TEXELS = 128
#: Border texels on each side of the payload (one BCn block).
BORDER_TEXELS = 4
#: Texels of one cache slot (one record) along each axis.
SLOT_TEXELS = TILE_TEXELS + 2 * BORDER_TEXELS
#: Textures at least this wide or high get a tiled copy from `engine bake`: the streamer's
#: default `virtual_min_size`, the size from which textures stream virtually.
BAKE_MIN_SIZE = 1024
#: Suffix of the tiled copy `engine bake` writes beside a texture ("rock.ktx2.vttiles").
SIDECAR_SUFFIX = ".vttiles"


class Wrap(IntEnum):
    CLAMP = 0
    REPEAT = 1


def slot_shape(fmt: PixelFormat) -> tuple[int, int, int]:
    """(block rows, block columns, block bytes) of a slot."""
    return SLOT_TEXELS // fmt.block_h, SLOT_TEXELS // fmt.block_w, fmt.block_bytes


def slot_bytes(fmt: PixelFormat) -> int:
    """Bytes of one slot (the payload plus its border), in `fmt`."""
    rows, cols, bb = slot_shape(fmt)
    return rows * cols * bb


def tile_levels(fmt: PixelFormat, width: int, height: int, file_levels: int) -> int:
    """Levels a tiled texture has: down to the last one at least one block in both
    directions (a smaller level has no whole block to cut), no more than the file holds."""
    n = 0
    while n < file_levels:
        w, h = mip_dims(width, height, n)
        if w < fmt.block_w or h < fmt.block_h:
            break
        n += 1
    return n


def tile_grid(width: int, height: int) -> tuple[int, int]:
    """Tiles (x, y) of a level of `width` x `height` texels."""
    return -(-width // TILE_TEXELS), -(-height // TILE_TEXELS)


def payload_blocks(fmt: PixelFormat, width: int, height: int, x: int,
                   y: int) -> tuple[int, int, int, int]:
    """(first block column, first block row, columns, rows) of tile (x, y)'s payload in a
    level of `width` x `height` texels."""
    nbx, nby = -(-width // fmt.block_w), -(-height // fmt.block_h)
    tb_x, tb_y = TILE_TEXELS // fmt.block_w, TILE_TEXELS // fmt.block_h
    bx, by = x * tb_x, y * tb_y
    if not (0 <= bx < nbx and 0 <= by < nby):
        raise ValueError(f"tile ({x}, {y}) outside a {width}x{height} level's grid "
                         f"{tile_grid(width, height)}")
    return bx, by, min(tb_x, nbx - bx), min(tb_y, nby - by)


def source_indices(fmt: PixelFormat, width: int, height: int, x: int, y: int,
                   wrap: Wrap) -> tuple[np.ndarray, np.ndarray]:
    """Block columns and rows of the source level that fill the slot's used region
    (payload plus one border block each side), after the wrap rule: `repeat` gathers the
    wrapped blocks, `clamp` replicates the edge ones."""
    nbx, nby = -(-width // fmt.block_w), -(-height // fmt.block_h)
    bx, by, cw, ch = payload_blocks(fmt, width, height, x, y)
    border_x, border_y = BORDER_TEXELS // fmt.block_w, BORDER_TEXELS // fmt.block_h
    cols = np.arange(bx - border_x, bx + cw + border_x)
    rows = np.arange(by - border_y, by + ch + border_y)
    if wrap == Wrap.REPEAT:
        return cols % nbx, rows % nby
    return np.clip(cols, 0, nbx - 1), np.clip(rows, 0, nby - 1)


def level_blocks(fmt: PixelFormat, width: int, height: int, data: bytes) -> np.ndarray:
    """A level's bytes as a (block rows, block columns, block bytes) view."""
    nbx, nby = -(-width // fmt.block_w), -(-height // fmt.block_h)
    arr = np.frombuffer(data, np.uint8)
    if arr.size != nbx * nby * fmt.block_bytes:
        raise ValueError(f"level of {width}x{height} {fmt.name} needs "
                         f"{nbx * nby * fmt.block_bytes} bytes, got {arr.size}")
    return arr.reshape(nby, nbx, fmt.block_bytes)


def cut_slot(fmt: PixelFormat, width: int, height: int, x: int, y: int, wrap: Wrap,
             blocks: np.ndarray) -> bytes:
    """The slot bytes of tile (x, y) from a level's blocks (`level_blocks`): payload and
    border at the slot's top-left, the unused rest of a small level's slot zero."""
    cols, rows = source_indices(fmt, width, height, x, y, wrap)
    return _slot(fmt, blocks[np.ix_(rows, cols)])


def tile_records(tf: TextureFile, levels: int, wrap: Wrap,
                 stop: Callable[[], bool] | None = None) -> Iterator[bytes]:
    """Every tile's slot bytes, level by level, row-major (the page table's entry order).
    A level stored as it is is read one tile row at a time (its block rows and the border
    rows each side), so the memory held does not grow with the image; a supercompressed
    level can only be read whole (inflated) and is then cut. Between tiles the GIL is
    handed over, so a copy made beside a render thread never holds it for a whole row."""
    fmt = tf.pixel_format
    for level in range(levels):
        w, h = mip_dims(tf.width, tf.height, level)
        gx, gy = tile_grid(w, h)
        whole = None if _banded(tf) else level_blocks(fmt, w, h, tf.read_level(level))
        for y in range(gy):
            rows = source_indices(fmt, w, h, 0, y, wrap)[1]
            band = whole[rows] if whole is not None else _block_rows(tf, level, w, h, rows)
            for slot in _row_slots(fmt, band, [source_indices(fmt, w, h, x, y, wrap)[0]
                                               for x in range(gx)]):
                if stop is not None and stop():
                    return
                yield slot
                time.sleep(0)


def _banded(tf: TextureFile) -> bool:
    """Whether `tf`'s levels can be read by block rows: one plain image per level."""
    return tf.supercompression == "none" and tf.layers == tf.faces == tf.depth == 1


def _block_rows(tf: TextureFile, level: int, width: int, height: int,
                rows: np.ndarray) -> np.ndarray:
    """Block rows `rows` (in that order) of a level stored as it is: each run of consecutive
    rows one read."""
    fmt = tf.pixel_format
    nbx = -(-width // fmt.block_w)
    out = np.empty((rows.size, nbx, fmt.block_bytes), np.uint8)
    start = 0
    while start < rows.size:
        end = start + 1
        while end < rows.size and rows[end] == rows[end - 1] + 1:
            end += 1
        data = tf.read_block_rows(level, int(rows[start]), end - start)
        out[start:end] = np.frombuffer(data, np.uint8).reshape(end - start, nbx, -1)
        start = end
    return out


def _slot(fmt: PixelFormat, region: np.ndarray) -> bytes:
    """A slot's bytes: the region's blocks at its top-left, the rest zero."""
    slot = np.zeros(slot_shape(fmt), np.uint8)
    slot[:region.shape[0], :region.shape[1]] = region
    return slot.tobytes()


def _row_slots(fmt: PixelFormat, band: np.ndarray, cols: list[np.ndarray]) -> list[bytes]:
    """The slots of one tile row from its band of block rows, given each tile's source
    columns: the tiles of equal width gathered in one indexing, the rest one by one."""
    size = cols[0].size
    if any(c.size != size for c in cols):
        return [_slot(fmt, band[:, c]) for c in cols]
    slots = np.zeros((len(cols), *slot_shape(fmt)), np.uint8)
    slots[:, :band.shape[0], :size] = band[:, np.stack(cols)].transpose(1, 0, 2, 3)
    return [s.tobytes() for s in slots]


def tile_header(tf: TextureFile, levels: int, wrap: Wrap) -> TiledHeader:
    """The header of `tf`'s tiled copy with `levels` levels and `wrap` borders."""
    fmt = tf.pixel_format
    st = os.stat(tf.path)
    count = sum(tile_grid(*mip_dims(tf.width, tf.height, lvl))[0]
                * tile_grid(*mip_dims(tf.width, tf.height, lvl))[1] for lvl in range(levels))
    return TiledHeader(slot_bytes(fmt), count, source_identity(st),
                       {"format": fmt.name, "width": tf.width, "height": tf.height,
                        "levels": levels, "wrap": int(wrap)})


def sidecar_path(path: Path) -> Path:
    """Where `engine bake` puts the tiled copy of `path`: beside it."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def write_sidecar(path: Path, wrap: Wrap = Wrap.REPEAT) -> int:
    """Write the tiled copy of the texture file at `path` beside it, with `wrap` borders
    (`repeat`, the virtual texture system's default); its bytes, 0 for a texture that
    cannot stream as tiles (arrays, cube maps, 3D, block sizes that do not divide the
    border)."""
    from .reader import open_texture
    tf = open_texture(path)
    fmt = tf.pixel_format
    if tf.layers != 1 or tf.faces != 1 or tf.depth != 1 or BORDER_TEXELS % fmt.block_w \
            or BORDER_TEXELS % fmt.block_h:
        return 0
    levels = tile_levels(fmt, tf.width, tf.height, len(tf.levels))
    if levels == 0:
        return 0
    out = write_tiled(sidecar_path(path), tile_header(tf, levels, wrap),
                      tile_records(tf, levels, wrap))
    return out.stat().st_size


@dataclass(frozen=True)
class TiledHeader:
    """What a tiled file holds: `records` records of `record_bytes`, described by `meta`
    (the writer's own fields), made from the version of a source `source` names
    (`source_identity`)."""

    record_bytes: int
    records: int
    source: str
    meta: dict

    def to_bytes(self) -> bytes:
        body = json.dumps({"record_bytes": self.record_bytes, "records": self.records,
                           "source": self.source, "meta": self.meta},
                          sort_keys=True).encode()
        head = MAGIC + struct.pack("<I", len(body)) + body
        return head + b"\0" * (-len(head) % ALIGN)

    @property
    def data_offset(self) -> int:
        return len(self.to_bytes())


def write_tiled(path: Path, header: TiledHeader, records: Iterable[bytes]) -> Path:
    """Write `records` (exactly `header.records` of `header.record_bytes`) after the header;
    then their CRC32s; the file appears at `path` only once complete (fewer records, as
    from a generator stopped early, is a ValueError and leaves nothing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    sums = np.zeros(header.records, "<u4")
    count = 0
    try:
        with open(tmp, "wb") as fh:
            fh.write(header.to_bytes())
            for rec in records:
                if len(rec) != header.record_bytes:
                    raise ValueError(f"record {count}: {len(rec)} bytes, the header says "
                                     f"{header.record_bytes}")
                if count == header.records:
                    raise ValueError(f"more records than the header's {header.records}")
                fh.write(rec)
                sums[count] = zlib.crc32(rec)
                count += 1
            if count != header.records:
                raise ValueError(f"{count} records written, the header says "
                                 f"{header.records}")
            fh.write(sums.tobytes())
        commit(tmp, path)  # flushed before the rename (engine.textures.durable)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


class TiledFile:
    """An open tiled file: `read(i)` from any thread."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError as exc:
            raise TextureFormatError(self.path, f"cannot open: {exc}") from exc
        try:
            head = os.pread(fd, 12, 0)
            if len(head) < 12 or head[:8] != MAGIC:
                raise TextureFormatError(self.path, "not a tiled texture file")
            (length,) = struct.unpack("<I", head[8:12])
            body = os.pread(fd, length, 12)
            try:
                d = json.loads(body)
                self.header = TiledHeader(int(d["record_bytes"]), int(d["records"]),
                                          str(d["source"]), dict(d["meta"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise TextureFormatError(self.path, f"bad tiled header: {exc}") from exc
            end = self.header.data_offset + self.header.records * self.header.record_bytes
            size = os.fstat(fd).st_size
            if size != end + 4 * self.header.records:
                raise TextureFormatError(self.path, f"tiled file of {size} bytes, its header "
                                                    f"says {end + 4 * self.header.records}")
            #: each record's CRC32, checked on every read
            self.sums = np.frombuffer(os.pread(fd, 4 * self.header.records, end), "<u4")
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        self._base = self.header.data_offset
        self.reads = 0  # pread calls
        self._lock = threading.Lock()
        self._users = 0  # reads using the descriptor now
        self._idle = False  # idle() asked while reads were under way
        self._closed = False

    def matches(self, source: Path) -> bool:
        """Whether this copy was made from `source` as it is now (`source_identity`)."""
        return source_identity(os.stat(source)) == self.header.source

    def _check(self, index: int, data: bytes | memoryview) -> None:
        if zlib.crc32(data) != self.sums[index]:
            raise TextureFormatError(self.path, f"record {index}: checksum differs")

    def _acquire(self) -> int:
        with self._lock:
            if self._closed:
                raise TextureFormatError(self.path, "tiled file closed")
            if self._fd is None:  # given up by idle(): the copy is opened again
                try:
                    self._fd = os.open(self.path, os.O_RDONLY)
                except OSError as exc:
                    raise TextureFormatError(self.path, f"cannot open: {exc}") from exc
            self._users += 1
            return self._fd

    def _release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and (self._idle or self._closed):
                self._drop_locked()

    def _drop_locked(self) -> None:
        self._idle = False
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def idle(self) -> None:
        """Give the descriptor up once no read uses it; the next read opens the copy again
        (a bound on open descriptors across thousands of virtual textures)."""
        with self._lock:
            if self._users == 0:
                self._drop_locked()
            else:
                self._idle = True

    def read(self, index: int) -> bytes:
        rb = self.header.record_bytes
        if not 0 <= index < self.header.records:
            raise ValueError(f"{self.path}: record {index} outside 0..{self.header.records - 1}")
        fd = self._acquire()
        try:
            data = os.pread(fd, rb, self._base + index * rb)
        finally:
            self._release()
        self.reads += 1
        if len(data) != rb:
            raise TextureFormatError(self.path, f"record {index}: file truncated")
        self._check(index, data)
        return data

    def read_run(self, first: int, count: int) -> list[bytes]:
        """Records `first` .. `first + count - 1` in one positioned read."""
        rb, n = self.header.record_bytes, self.header.records
        if not (0 <= first and count >= 1 and first + count <= n):
            raise ValueError(f"{self.path}: records {first}..{first + count - 1} outside "
                             f"0..{n - 1}")
        fd = self._acquire()
        try:
            data = os.pread(fd, rb * count, self._base + first * rb)
        finally:
            self._release()
        self.reads += 1
        if len(data) != rb * count:
            raise TextureFormatError(self.path, f"records {first}+{count}: file truncated")
        view = memoryview(data)
        out = []
        for i in range(count):
            rec = view[i * rb:(i + 1) * rb]
            self._check(first + i, rec)
            out.append(bytes(rec))
        return out

    def close(self) -> None:
        """Close the copy; reads under way finish on the descriptor first."""
        with self._lock:
            self._closed = True
            if self._users == 0:
                self._drop_locked()
