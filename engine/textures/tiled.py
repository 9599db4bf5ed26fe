"""Tile-contiguous texture files: fixed-size records, one per tile, each one read.

Why: a virtual texture's tile (with its border) is scattered over 34+ block rows of a KTX2
level, and a supercompressed level cannot be read in part at all. Stored as one record
after another, a tile is one positioned read (`os.pread`, which releases the GIL while the
disk works) of `record_bytes` at `data_offset + index * record_bytes`.

What a record holds is the caller's business (engine/streaming/virtual lays out slots:
payload and border blocks, level by level, row-major); this module owns the container:

    magic b"ENGTILE1", uint32 header length, a JSON header (what the records are and the
    source file they were made from: its size and mtime, so a stale copy is never used),
    zero padding to `ALIGN`, then the records.

A file is written to a temporary name and renamed into place, so a reader never sees half
of one.
"""
from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import TextureFormatError

MAGIC = b"ENGTILE1"
ALIGN = 4096


@dataclass(frozen=True)
class TiledHeader:
    """What a tiled file holds: `records` records of `record_bytes`, described by `meta`
    (the writer's own fields), made from a source of `source_size` bytes and mtime."""

    record_bytes: int
    records: int
    source_size: int
    source_mtime_ns: int
    meta: dict

    def to_bytes(self) -> bytes:
        body = json.dumps({"record_bytes": self.record_bytes, "records": self.records,
                           "source_size": self.source_size,
                           "source_mtime_ns": self.source_mtime_ns, "meta": self.meta},
                          sort_keys=True).encode()
        head = MAGIC + struct.pack("<I", len(body)) + body
        return head + b"\0" * (-len(head) % ALIGN)

    @property
    def data_offset(self) -> int:
        return len(self.to_bytes())


def write_tiled(path: Path, header: TiledHeader, records: Iterable[bytes]) -> Path:
    """Write `records` (exactly `header.records` of `header.record_bytes`) after the header;
    the file appears at `path` only once complete."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    count = 0
    try:
        with open(tmp, "wb") as fh:
            fh.write(header.to_bytes())
            for rec in records:
                if len(rec) != header.record_bytes:
                    raise ValueError(f"record {count}: {len(rec)} bytes, the header says "
                                     f"{header.record_bytes}")
                fh.write(rec)
                count += 1
        if count != header.records:
            raise ValueError(f"{count} records written, the header says {header.records}")
        os.replace(tmp, path)
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
                                          int(d["source_size"]), int(d["source_mtime_ns"]),
                                          dict(d["meta"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise TextureFormatError(self.path, f"bad tiled header: {exc}") from exc
            size = os.fstat(fd).st_size
            if size < self.header.data_offset + self.header.records * self.header.record_bytes:
                raise TextureFormatError(self.path, "tiled file truncated")
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._base = self.header.data_offset
        self.reads = 0  # pread calls

    def matches(self, source: Path) -> bool:
        """Whether this copy was made from `source` as it is now (size and mtime)."""
        st = os.stat(source)
        return (st.st_size, st.st_mtime_ns) == (self.header.source_size,
                                               self.header.source_mtime_ns)

    def read(self, index: int) -> bytes:
        rb = self.header.record_bytes
        if not 0 <= index < self.header.records:
            raise ValueError(f"{self.path}: record {index} outside 0..{self.header.records - 1}")
        data = os.pread(self._fd, rb, self._base + index * rb)
        self.reads += 1
        if len(data) != rb:
            raise TextureFormatError(self.path, f"record {index}: file truncated")
        return data

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
