"""A checksum per record of the engine's own cache files, verified when they are read.

Why: a file written whole (engine.textures.durable) can still be damaged afterwards, by a
disk, a copy or a hand: bytes overwritten in the middle of a level parse perfectly and
draw as a band of noise. A CRC32 per level (KTX2: a key/value entry) or per tile (tiled
copies: a table after the records) turns that into a miss the caller makes again.

The KTX2 entry `engineCRC32` holds, in hexadecimal, the CRC32 of the file's description
(format, size, layers, faces, level count) followed by one per level (its bytes as read,
level 0 first), so the header fields the parser cannot check are covered too.
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

from ..errors import TextureFormatError
from .container import TextureFile

KEY = "engineCRC32"
_KV_INDEX = struct.Struct("<II")  # kvdByteOffset, kvdByteLength
_KV_INDEX_AT = 56


def crc(data: bytes | bytearray | memoryview) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def _describe(fmt: str, width: int, height: int, layers: int, faces: int,
              levels: int) -> bytes:
    return f"{fmt}|{width}|{height}|{layers}|{faces}|{levels}".encode()


def level_table(fmt: str, width: int, height: int, layers: int, faces: int,
                levels: Sequence[bytes]) -> dict[str, str]:
    """The key/value entry `write_ktx2(..., checksums=True)` adds for these `levels`."""
    sums = [crc(_describe(fmt, width, height, layers, faces, len(levels)))]
    sums += [crc(level) for level in levels]
    return {KEY: " ".join(f"{s:08x}" for s in sums)}


def key_values(path: Path) -> dict[str, str]:
    """A KTX2 file's key/value entries (undecodable ones left out)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(_KV_INDEX_AT)
            offset, length = _KV_INDEX.unpack(fh.read(_KV_INDEX.size))
            fh.seek(offset)
            data = fh.read(length)
    except (OSError, struct.error) as exc:
        raise TextureFormatError(path, f"key/value data unreadable: {exc}") from exc
    out: dict[str, str] = {}
    at = 0
    while at + 4 <= len(data):
        (n,) = struct.unpack_from("<I", data, at)
        entry = data[at + 4:at + 4 + n]
        key, sep, value = entry.partition(b"\0")
        if sep:
            try:
                out[key.decode()] = value.rstrip(b"\0").decode()
            except UnicodeDecodeError:
                pass
        at += 4 + n + (-(4 + n) % 4)
    return out


def verify(tf: TextureFile) -> None:
    """Check every level of the opened KTX2 file `tf` against its `engineCRC32` entry;
    a TextureFormatError naming what differs (or that the entry is missing)."""
    value = key_values(tf.path).get(KEY)
    if value is None:
        raise TextureFormatError(tf.path, f"no {KEY} entry")
    try:
        sums = [int(s, 16) for s in value.split()]
    except ValueError:
        raise TextureFormatError(tf.path, f"{KEY} entry unreadable") from None
    head = crc(_describe(tf.format, tf.width, tf.height, tf.layers if tf.is_array else 0,
                         tf.faces, len(tf.levels)))
    if len(sums) != len(tf.levels) + 1 or sums[0] != head:
        raise TextureFormatError(tf.path, "checksum of the header differs")
    for i, want in enumerate(sums[1:]):
        if crc(tf.read_level_all(i)) != want:
            raise TextureFormatError(tf.path, f"checksum of level {i} differs")
