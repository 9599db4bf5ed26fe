"""Bounded inflation of supercompressed KTX2 levels.

A level declares its uncompressed size; a zstd or zlib stream that would produce more
(a bomb) or less (truncated, lying) is a file-format error. The decoders are driven with an
output cap of declared + 1 bytes, so no allocation ever exceeds the declared level: the
extra byte is only there to notice "too much".
"""
from __future__ import annotations

import io
import zlib
from pathlib import Path

import zstandard

from ..errors import TextureFormatError

_CHUNK = 1 << 20


def _check_size(path: Path, what: str, got: int, want: int) -> None:
    if got != want:
        more = "more" if got > want else "less"
        raise TextureFormatError(path, f"{what}: inflates to {more} than the declared "
                                       f"uncompressedByteLength {want}")


def inflate_zstd(path: Path, data: bytes, size: int, what: str) -> bytes:
    """Inflate a zstd stream (one or more frames) that must yield exactly `size` bytes."""
    out = bytearray()
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(
            io.BytesIO(data), read_across_frames=True)
        with reader:
            while len(out) <= size:
                chunk = reader.read(min(_CHUNK, size + 1 - len(out)))
                if not chunk:
                    break
                out += chunk
    except zstandard.ZstdError as exc:
        raise TextureFormatError(path, f"{what}: corrupt zstd stream ({exc})") from exc
    _check_size(path, what, len(out), size)
    return bytes(out)


def inflate_zlib(path: Path, data: bytes, size: int, what: str) -> bytes:
    """Inflate a zlib (RFC 1950) stream that must yield exactly `size` bytes and then end."""
    dec = zlib.decompressobj()
    try:
        out = dec.decompress(data, size + 1)
        # max_length caps each call; flush() would not, so keep feeding the tail instead.
        while dec.unconsumed_tail and len(out) <= size:
            out += dec.decompress(dec.unconsumed_tail, size + 1 - len(out))
    except zlib.error as exc:
        raise TextureFormatError(path, f"{what}: corrupt zlib stream ({exc})") from exc
    _check_size(path, what, len(out), size)
    if not dec.eof:
        raise TextureFormatError(path, f"{what}: zlib stream does not end")
    return out
