"""A JPEG's size, EXIF orientation and embedded thumbnail from its markers, without Pillow.

Why: a cold wall of thousands of photographs needs each one's upright size before its
first frame, and nothing else of the file. Pillow's open parses every marker into Python
objects and its EXIF into a dict (0.1-0.4 ms a file); walking the marker segments to the
frame header reads a few KB (the EXIF segment, where the orientation and the thumbnail's
place are, comes before it) and takes a few tens of microseconds. Anything this reader does
not expect (not a JPEG, a segment cut short, a frame header with no height) answers None,
and the caller asks Pillow, which names the problem.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import BinaryIO

#: Start-of-frame markers (baseline, extended, progressive, lossless; Huffman or arithmetic):
#: every SOFn but DHT (C4), JPG (C8) and DAC (CC), which share the range.
_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE,
                  0xCF})
#: Markers that stand alone, with no length: TEM, RST0-7.
_BARE = frozenset({0x01, *range(0xD0, 0xD8)})
_ORIENTATION, _THUMB_OFFSET, _THUMB_LENGTH = 0x0112, 0x0201, 0x0202
#: EXIF orientations that turn the image a quarter: its upright width is its stored height.
SWAPS_AXES = (5, 6, 7, 8)
#: Segments read before giving up on finding the frame header (a file of only APPn).
_MAX_SEGMENTS = 64


@dataclass(frozen=True)
class JpegHeader:
    """Upright size, EXIF orientation (1 when absent) and the embedded EXIF thumbnail's
    JPEG bytes (None when there is none); `bytes_read`: how much of the file was read."""

    width: int
    height: int
    orientation: int
    thumbnail: bytes | None
    bytes_read: int


def read_jpeg_header(path: str | os.PathLike[str]) -> JpegHeader | None:
    """The header of the JPEG at `path` (module docstring); None when it is not a JPEG this
    reader follows to its frame header, or cannot be read."""
    try:
        with open(path, "rb", buffering=4096) as f:
            return _parse(f)
    except (OSError, ValueError, struct.error):
        return None


def _parse(f: BinaryIO) -> JpegHeader | None:
    if f.read(2) != b"\xff\xd8":
        return None
    orientation, thumbnail, exif_seen = 1, None, False
    for _ in range(_MAX_SEGMENTS):
        head = f.read(2)
        if len(head) < 2 or head[0] != 0xFF:
            return None
        marker = head[1]
        while marker == 0xFF:  # fill bytes before a marker
            marker = f.read(1)[0]
        if marker in _BARE:
            continue
        (length,) = struct.unpack(">H", f.read(2))
        if length < 2:
            return None
        if marker in _SOF:
            body = f.read(5)
            if len(body) < 5:
                return None
            height, width = struct.unpack(">HH", body[1:5])
            if not width or not height:  # DNL: the height comes after the scan
                return None
            if orientation in SWAPS_AXES:
                width, height = height, width
            return JpegHeader(width, height, orientation, thumbnail, f.tell())
        if marker == 0xE1 and not exif_seen:  # APP1: EXIF (or XMP, passed over)
            body = f.read(length - 2)
            if body.startswith(b"Exif\x00\x00"):
                orientation, thumbnail = _exif(body[6:])
                exif_seen = True
            continue
        if marker in (0xD9, 0xDA):  # end of image or a scan before any frame header
            return None
        f.seek(length - 2, os.SEEK_CUR)
    return None


def _exif(tiff: bytes) -> tuple[int, bytes | None]:
    """(orientation, thumbnail bytes) of an EXIF block (a TIFF structure: IFD0, then IFD1
    with the thumbnail's offset and length); what does not parse is left out."""
    order = {b"II": "<", b"MM": ">"}.get(tiff[:2])
    if order is None:
        return 1, None
    try:
        (ifd0,) = struct.unpack(order + "I", tiff[4:8])
        tags0, ifd1 = _ifd(tiff, order, ifd0)
        value = tags0.get(_ORIENTATION, 1)
        orientation = value if value in range(1, 9) else 1
        if not ifd1:
            return orientation, None
        tags1, _ = _ifd(tiff, order, ifd1)
        start, length = tags1.get(_THUMB_OFFSET), tags1.get(_THUMB_LENGTH)
        if not start or not length or start + length > len(tiff):
            return orientation, None
        return orientation, tiff[start:start + length]
    except struct.error:
        return 1, None


def _ifd(tiff: bytes, order: str, at: int) -> tuple[dict[int, int], int]:
    """The short and long scalar tags of the IFD at `at`, and the next IFD's offset."""
    (count,) = struct.unpack_from(order + "H", tiff, at)
    tags: dict[int, int] = {}
    for n in range(count):
        tag, kind, _, raw = struct.unpack_from(order + "HHI4s", tiff, at + 2 + 12 * n)
        if kind == 3:  # SHORT, left-justified in the value field
            tags[tag] = struct.unpack(order + "H", raw[:2])[0]
        elif kind == 4:  # LONG
            tags[tag] = struct.unpack(order + "I", raw)[0]
    (following,) = struct.unpack_from(order + "I", tiff, at + 2 + 12 * count)
    return tags, following
