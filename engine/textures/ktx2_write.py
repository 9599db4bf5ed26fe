"""Write KTX 2.0 files: the container the baker produces and the streamer reads a level at a time.

Layout (KTX 2.0 spec, sections 3-4): identifier, header, index, level index (level 0 first),
Data Format Descriptor, key/value data, then the level images stored smallest level first, so
that a streamer reading the file front to back gets the always-resident mip tail before the big
levels. Without supercompression every level starts at a multiple of lcm(texel block bytes, 4),
so a reader can map a level and hand it to glCompressedTexSubImage2D without copying; with zstd
supercompression (scheme 2) levels are compressed one by one and packed with no padding.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import struct
from collections.abc import Mapping, Sequence

from .. import __version__
from ..formats import PixelFormat, get
from ..memory.sizes import level_bytes, mip_dims
from .checksum import level_table
from .durable import commit

log = logging.getLogger(__name__)

KTX2_IDENTIFIER = b"\xabKTX 20\xbb\r\n\x1a\n"
SUPERCOMPRESSION_NONE = 0
SUPERCOMPRESSION_ZSTD = 2
HEADER_BYTES = 80  # identifier 12 + header 36 + index 32
LEVEL_INDEX_ENTRY_BYTES = 24

# Khronos Data Format Specification 1.3 constants (khr_df.h).
KHR_DF_VERSIONNUMBER_1_3 = 2
KHR_DF_MODEL_RGBSDA = 1
KHR_DF_MODEL_BC1A, KHR_DF_MODEL_BC2, KHR_DF_MODEL_BC3 = 128, 129, 130
KHR_DF_MODEL_BC4, KHR_DF_MODEL_BC5, KHR_DF_MODEL_BC6H, KHR_DF_MODEL_BC7 = 131, 132, 133, 134
KHR_DF_PRIMARIES_BT709 = 1
KHR_DF_TRANSFER_LINEAR, KHR_DF_TRANSFER_SRGB = 1, 2
KHR_DF_CHANNEL_ALPHA = 15  # RGBSDA alpha, also BC2_ALPHA / BC3_ALPHA
KHR_DF_CHANNEL_BC1A_ALPHAPRESENT = 1
KHR_DF_CHANNEL_BC5_GREEN = 1
KHR_DF_SAMPLE_DATATYPE_LINEAR = 0x10
KHR_DF_SAMPLE_DATATYPE_SIGNED = 0x40
KHR_DF_SAMPLE_DATATYPE_FLOAT = 0x80

_FLOAT_ONE, _FLOAT_MINUS_ONE, _FLOAT_ZERO = 0x3F800000, 0xBF800000, 0


def _sample(bit_offset: int, bit_length: int, channel: int, lower: int, upper: int) -> bytes:
    """One 16-byte sample: bitOffset, bitLength-1, channelType (id | qualifiers), position 0,
    sampleLower, sampleUpper."""
    word0 = bit_offset | ((bit_length - 1) << 16) | (channel << 24)
    return struct.pack("<IIII", word0, 0, lower & 0xFFFFFFFF, upper & 0xFFFFFFFF)


def _block_samples(fmt: PixelFormat) -> list[tuple[int, int, int]]:
    """(bitOffset, bitLength, channel id) per sample of a BCn block, as khr_df.h defines them."""
    fam = fmt.family
    if fam == "BC1":
        # BC1_RGB and BC1_RGBA share bits; the channel id says whether 1-bit alpha is meaningful.
        return [(0, 64, KHR_DF_CHANNEL_BC1A_ALPHAPRESENT if fmt.components == 4 else 0)]
    if fam in ("BC2", "BC3"):
        return [(0, 64, KHR_DF_CHANNEL_ALPHA), (64, 64, 0)]
    if fam == "BC4":
        return [(0, 64, 0)]
    if fam == "BC5":
        return [(0, 64, 0), (64, 64, KHR_DF_CHANNEL_BC5_GREEN)]
    if fam in ("BC6H", "BC7"):
        return [(0, 128, 0)]
    raise ValueError(f"no KTX2 data format descriptor for {fmt.name}")


_MODELS = {"BC1": KHR_DF_MODEL_BC1A, "BC2": KHR_DF_MODEL_BC2, "BC3": KHR_DF_MODEL_BC3,
           "BC4": KHR_DF_MODEL_BC4, "BC5": KHR_DF_MODEL_BC5, "BC6H": KHR_DF_MODEL_BC6H,
           "BC7": KHR_DF_MODEL_BC7}


def _qualified(channel: int, fmt: PixelFormat) -> int:
    """Add the sample qualifiers of the format's numeric type to a channel id."""
    if fmt.family == "BC6H":
        return channel | KHR_DF_SAMPLE_DATATYPE_FLOAT | (KHR_DF_SAMPLE_DATATYPE_SIGNED if fmt.signed else 0)
    if fmt.signed:
        return channel | KHR_DF_SAMPLE_DATATYPE_SIGNED
    if fmt.srgb and channel == KHR_DF_CHANNEL_ALPHA:
        # Alpha is never sRGB-encoded, even in an sRGB format.
        return channel | KHR_DF_SAMPLE_DATATYPE_LINEAR
    return channel


def data_format_descriptor(fmt: PixelFormat | str) -> bytes:
    """The whole DFD (dfdTotalSize + one Basic Data Format Descriptor block) for `fmt`.

    Supported: the BCn families and RGBA8(_SRGB). Follows what libktx's createDFD* writes, so
    tools like `ktx info` and `ktx validate` describe our files the same way as their own.
    """
    f = get(fmt) if isinstance(fmt, str) else fmt
    if f.family == "RGBA8":
        model, block_dims, bytes_plane0 = KHR_DF_MODEL_RGBSDA, 0, 4
        samples = [(8 * i, 8, KHR_DF_CHANNEL_ALPHA if i == 3 else i) for i in range(4)]
        lower, upper = 0, 255
    elif f.family in _MODELS:
        model, bytes_plane0 = _MODELS[f.family], f.block_bytes
        block_dims = (f.block_w - 1) | ((f.block_h - 1) << 8)
        samples = _block_samples(f)
        if f.family == "BC6H":
            lower, upper = (_FLOAT_MINUS_ONE if f.signed else _FLOAT_ZERO), _FLOAT_ONE
        elif f.signed:
            lower, upper = ~0x7FFFFFFF, 0x7FFFFFFF
        else:
            lower, upper = 0, 0xFFFFFFFF
    else:
        raise ValueError(f"no KTX2 data format descriptor for {f.name}")

    block_size = 24 + 16 * len(samples)
    transfer = KHR_DF_TRANSFER_SRGB if f.srgb else KHR_DF_TRANSFER_LINEAR
    body = struct.pack(
        "<IIIIII",
        0,  # vendorId KHRONOS (17 bits) | descriptorType BASICFORMAT (15 bits) << 17
        KHR_DF_VERSIONNUMBER_1_3 | (block_size << 16),
        model | (KHR_DF_PRIMARIES_BT709 << 8) | (transfer << 16),  # flags: ALPHA_STRAIGHT = 0
        block_dims,
        bytes_plane0,
        0,
    )
    body += b"".join(_sample(off, bits, _qualified(ch, f), lower, upper) for off, bits, ch in samples)
    return struct.pack("<I", 4 + len(body)) + body


def key_value_data(kv: Mapping[str, str]) -> bytes:
    """Key/value data: entries sorted by key (byte order, as the spec requires), each
    keyAndValueByteLength + key NUL + value NUL, padded to 4 bytes."""
    out = bytearray()
    for key in sorted(kv, key=lambda k: k.encode("utf-8")):
        entry = key.encode("utf-8") + b"\0" + str(kv[key]).encode("utf-8") + b"\0"
        out += struct.pack("<I", len(entry)) + entry
        out += b"\0" * (-len(out) % 4)
    return bytes(out)


def default_kv() -> dict[str, str]:
    """What every file we write says about itself: row-major top-down, and who wrote it."""
    return {"KTXorientation": "rd", "KTXwriter": f"engine {__version__}"}


def _align(offset: int, alignment: int) -> int:
    return offset + (-offset % alignment)


def _layout(fmt: PixelFormat, width: int, height: int, layers: int, faces: int, scheme: int,
            alignment: int, stored: Sequence[int], raw: Sequence[int],
            kv: Mapping[str, str] | None) -> tuple[bytes, list[int], int]:
    """(everything before the first level's bytes, each level's file offset, file size) for
    levels of `stored` bytes each (`raw`: uncompressed), level 0 first."""
    dfd = data_format_descriptor(fmt)
    kvd = key_value_data({**default_kv(), **(kv or {})})
    dfd_offset = HEADER_BYTES + LEVEL_INDEX_ENTRY_BYTES * len(stored)
    kvd_offset = dfd_offset + len(dfd)
    end = kvd_offset + len(kvd)
    offsets = [0] * len(stored)
    for i in reversed(range(len(stored))):  # smallest level first in the file
        end = _align(end, alignment)
        offsets[i] = end
        end += stored[i]
    header = KTX2_IDENTIFIER + struct.pack(
        "<9I", fmt.vk_format, 1, width, height, 0, layers, faces, len(stored), scheme)
    index = struct.pack("<IIIIQQ", dfd_offset, len(dfd), kvd_offset, len(kvd), 0, 0)
    level_index = b"".join(struct.pack("<QQQ", offsets[i], stored[i], raw[i])
                           for i in range(len(stored)))
    return header + index + level_index + dfd + kvd, offsets, end


class StreamedKtx2:
    """A KTX2 file without supercompression whose levels are written piece by piece, in any
    order, as they are encoded: uncompressed BCn sizes follow from the dimensions, so the
    level index (which the format puts before the data) is known before any level is.

    The bytes go to a temporary name; `commit` renames it into place, `abort` removes it,
    so a reader never sees half a file and a failed bake leaves none."""

    def __init__(self, path: str | os.PathLike[str], fmt_name: str, width: int, height: int,
                 levels: int) -> None:
        self.fmt = get(fmt_name)
        self.path = os.fspath(path)
        self.width = width
        sizes = [level_bytes(self.fmt, *mip_dims(width, height, i)) for i in range(levels)]
        head, self.offsets, self.size = _layout(
            self.fmt, width, height, 0, 1, SUPERCOMPRESSION_NONE,
            math.lcm(self.fmt.block_bytes, 4), sizes, sizes, None)
        self.tmp = f"{self.path}.tmp{os.getpid()}"
        self._fd: int | None = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(self._fd, self.size)
            os.pwrite(self._fd, head, 0)
        except BaseException:
            self.abort()
            raise

    def write(self, level: int, row0: int, data: bytes) -> None:
        """`data`: whole block rows of `level`, starting at texel row `row0` (a multiple of
        the block height)."""
        assert self._fd is not None
        w = max(1, self.width >> level)
        before = level_bytes(self.fmt, w, row0) if row0 else 0
        os.pwrite(self._fd, data, self.offsets[level] + before)

    def commit(self) -> int:
        """Close and rename into place; returns the file's size."""
        assert self._fd is not None
        try:
            commit(self.tmp, self.path, self._fd)
        except BaseException:
            self.abort()
            raise
        os.close(self._fd)
        self._fd = None
        return self.size

    def abort(self) -> None:
        """Close and remove the temporary file (safe to call twice)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass


def write_ktx2(path: str | os.PathLike[str], fmt_name: str, width: int, height: int,
               levels: Sequence[bytes], *, layers: int = 0, faces: int = 1,
               supercompression: str | None = None, zstd_level: int = 19,
               kv: Mapping[str, str] | None = None, checksums: bool = False) -> int:
    """Write a KTX 2.0 file and return its size in bytes.

    `levels[i]` holds every layer and face of mip level i (layer-major, then face), level 0
    first; each must be exactly the size the format formula gives, so a malformed bake fails
    here rather than in a reader. `kv` entries are added to (and may override) `default_kv()`;
`checksums` adds a CRC32 per level (engine.textures.checksum: the engine's cache files).
    The file is written to a temporary name and renamed, so a reader never sees half a file.
    """
    fmt = get(fmt_name)
    if supercompression not in (None, "zstd"):
        raise ValueError(f"supercompression must be None or 'zstd', got {supercompression!r}")
    if not levels:
        raise ValueError("a KTX2 file needs at least one level")
    if faces not in (1, 6) or layers < 0:
        raise ValueError(f"bad faces={faces} / layers={layers}")
    images = max(1, layers) * faces
    for i, data in enumerate(levels):
        w, h = mip_dims(width, height, i)
        want = level_bytes(fmt, w, h) * images
        if len(data) != want:
            raise ValueError(f"level {i} ({w}x{h} {fmt.name}) has {len(data)} bytes, expected {want}")

    if supercompression == "zstd":
        import zstandard

        compressor = zstandard.ZstdCompressor(level=zstd_level)
        stored = [compressor.compress(bytes(d)) for d in levels]
        scheme, alignment = SUPERCOMPRESSION_ZSTD, 1
    else:
        stored = [bytes(d) for d in levels]
        scheme, alignment = SUPERCOMPRESSION_NONE, math.lcm(fmt.block_bytes, 4)

    if checksums:
        kv = {**(kv or {}), **level_table(fmt.name, width, height, layers, faces, levels)}
    head, offsets, end = _layout(fmt, width, height, layers, faces, scheme, alignment,
                                 [len(d) for d in stored], [len(d) for d in levels], kv)
    buf = bytearray(end)
    buf[:len(head)] = head
    for off, data in zip(offsets, stored):
        buf[off:off + len(data)] = data

    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(buf)
            fh.flush()
            commit(tmp, path, fh.fileno())  # flushed before the rename (engine.textures.durable)
    except BaseException:  # a full disk, a signal: no temporary file left behind
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    log.debug("wrote %s: %s %dx%d, %d levels, %d bytes", path, fmt.name, width, height,
              len(levels), len(buf))
    return len(buf)
