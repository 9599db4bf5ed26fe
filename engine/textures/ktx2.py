"""KTX 2.0 reader (Khronos KTX 2.0 specification): header, level index, DFD, KVD.

Only the header region is read at open time; level bytes are read on demand. Every field
a hostile file controls is range-checked before it is used, so a bad file can only ever
produce `TextureFormatError` (or its subclass `UnsupportedFormatError` for a well-formed
payload we cannot use: ASTC, ETC, formats missing from engine/formats.py). Basis Universal
payloads (UASTC, BasisLZ/ETC1S) are handed to engine.textures.basis, which transcodes them
per level when its optional transcoder is installed (else they are unsupported too).
"""
from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from ..errors import TextureFormatError, UnsupportedFormatError
from ..formats import BY_VK, PixelFormat
from .container import (
    Level,
    check_geometry,
    file_size,
    level_geometry,
    read_prefix,
)
from .ktx2_file import Ktx2File

log = logging.getLogger(__name__)

IDENTIFIER = b"\xabKTX 20\xbb\r\n\x1a\n"
_HEADER = struct.Struct("<12s9I4I2Q")  # identifier, 9 header u32, index (4 u32, 2 u64)
_LEVEL = struct.Struct("<3Q")
_SCHEMES = {0: "none", 2: "zstd", 3: "zlib"}
#: Header + index + a level index of the most levels a 65536 texture can have.
_MAX_PREFIX = _HEADER.size + 17 * _LEVEL.size
MAX_PREFIX = _MAX_PREFIX

# DFD colour models (Khronos Data Format spec) of payloads that need a transcoder.
_DF_MODELS = {160: "ETC1", 161: "ETC2", 162: "ASTC", 163: "BasisLZ/ETC1S", 164: "PVRTC",
              165: "PVRTC2", 166: "UASTC", 167: "UASTC HDR 4x4", 168: "UASTC HDR 6x6"}

_VK_NAMES: dict[int, str] = {
    0: "UNDEFINED", 1: "R4G4_UNORM_PACK8", 2: "R4G4B4A4_UNORM_PACK16", 4: "R5G6B5_UNORM_PACK16",
    9: "R8_UNORM", 15: "R8_SRGB", 16: "R8G8_UNORM", 22: "R8G8_SRGB", 23: "R8G8B8_UNORM",
    29: "R8G8B8_SRGB", 30: "B8G8R8_UNORM", 36: "B8G8R8_SRGB", 37: "R8G8B8A8_UNORM",
    43: "R8G8B8A8_SRGB", 44: "B8G8R8A8_UNORM", 50: "B8G8R8A8_SRGB",
    58: "A2R10G10B10_UNORM_PACK32", 62: "A2R10G10B10_UINT_PACK32",
    64: "A2B10G10R10_UNORM_PACK32", 70: "R16_UNORM", 76: "R16_SFLOAT", 83: "R16G16_SFLOAT",
    91: "R16G16B16A16_UNORM", 95: "R16G16B16A16_UINT", 97: "R16G16B16A16_SFLOAT",
    100: "R32_SFLOAT", 109: "R32G32B32A32_SFLOAT", 122: "B10G11R11_UFLOAT_PACK32",
    123: "E5B9G9R9_UFLOAT_PACK32", 124: "D16_UNORM", 125: "X8_D24_UNORM_PACK32",
    126: "D32_SFLOAT", 127: "S8_UINT", 129: "D24_UNORM_S8_UINT", 130: "D32_SFLOAT_S8_UINT",
    147: "ETC2_R8G8B8_UNORM_BLOCK", 148: "ETC2_R8G8B8_SRGB_BLOCK",
    149: "ETC2_R8G8B8A1_UNORM_BLOCK", 150: "ETC2_R8G8B8A1_SRGB_BLOCK",
    151: "ETC2_R8G8B8A8_UNORM_BLOCK", 152: "ETC2_R8G8B8A8_SRGB_BLOCK",
    153: "EAC_R11_UNORM_BLOCK", 154: "EAC_R11_SNORM_BLOCK", 155: "EAC_R11G11_UNORM_BLOCK",
    156: "EAC_R11G11_SNORM_BLOCK",
}
_ASTC = ("4x4", "5x4", "5x5", "6x5", "6x6", "8x5", "8x6", "8x8", "10x5", "10x6", "10x8", "10x10",
         "12x10", "12x12")
for _i, _blk in enumerate(_ASTC):
    _VK_NAMES[157 + 2 * _i] = f"ASTC_{_blk}_UNORM_BLOCK"
    _VK_NAMES[158 + 2 * _i] = f"ASTC_{_blk}_SRGB_BLOCK"


def vk_format_name(vk: int) -> str:
    """'VK_FORMAT_ASTC_4x4_UNORM_BLOCK (157)' for the formats people meet, else the number."""
    name = _VK_NAMES.get(vk)
    return f"VK_FORMAT_{name} ({vk})" if name else f"VkFormat {vk}"


@dataclass(frozen=True)
class _Header:
    vk_format: int
    type_size: int
    width: int
    height: int
    depth: int
    layers: int
    faces: int
    level_count: int
    scheme: int
    dfd: tuple[int, int]
    kvd: tuple[int, int]
    sgd: tuple[int, int]


def _parse_header(path: Path, prefix: bytes) -> _Header:
    if len(prefix) < 12 or prefix[:12] != IDENTIFIER:
        raise TextureFormatError(path, "identifier: not a KTX2 file")
    if len(prefix) < _HEADER.size:
        raise TextureFormatError(path, f"header: truncated ({len(prefix)} of {_HEADER.size} bytes)")
    f = _HEADER.unpack_from(prefix)
    return _Header(vk_format=f[1], type_size=f[2], width=f[3], height=f[4], depth=f[5],
                   layers=f[6], faces=f[7], level_count=f[8], scheme=f[9], dfd=(f[10], f[11]),
                   kvd=(f[12], f[13]), sgd=(f[14], f[15]))


def _check_region(path: Path, name: str, region: tuple[int, int], size: int) -> None:
    offset, length = region
    if length and (offset < _HEADER.size or offset + length > size):
        raise TextureFormatError(path, f"{name}: bytes {offset}..{offset + length} outside the "
                                       f"file ({size} bytes)")


def _dfd_model(path: Path, h: _Header) -> int | None:
    """Colour model of the DFD's basic block, or None when there is none to read."""
    offset, length = h.dfd
    if length < 4 + 12:
        return None
    block = read_prefix(path, offset + 16)[offset:]
    return block[12] if len(block) == 16 else None


def _basis_codec(path: Path, h: _Header) -> str | None:
    """"UASTC" / "ETC1S" when the payload is Basis Universal, else None."""
    from .basis import basis_codec
    return basis_codec(h.scheme, h.vk_format, _dfd_model(path, h) if h.vk_format == 0 else None)


def _resolve_format(path: Path, h: _Header) -> PixelFormat:
    if h.scheme == 1:
        raise UnsupportedFormatError(path, "BasisLZ/ETC1S", "needs a Basis Universal transcoder")
    if h.scheme not in _SCHEMES:
        raise TextureFormatError(path, f"supercompressionScheme {h.scheme} is not defined")
    if h.vk_format == 0:
        model = _dfd_model(path, h)
        name = _DF_MODELS.get(model or 0, f"VK_FORMAT_UNDEFINED (0), DFD colour model {model}")
        raise UnsupportedFormatError(path, name, "needs a transcoder")
    fmt = BY_VK.get(h.vk_format)
    if fmt is None:
        raise UnsupportedFormatError(path, vk_format_name(h.vk_format),
                                     "not in engine/formats.py")
    return fmt


def _parse_levels(path: Path, prefix: bytes, h: _Header, fmt: PixelFormat, layers: int,
                  size: int) -> tuple[Level, ...]:
    count = max(1, h.level_count)
    end = _HEADER.size + count * _LEVEL.size
    if len(prefix) < end:
        raise TextureFormatError(path, f"level index: truncated (needs {end} bytes)")
    levels: list[Level] = []
    spans: list[tuple[int, int, str]] = [(0, end, "header and level index")]
    for name, region in (("DFD", h.dfd), ("KVD", h.kvd), ("SGD", h.sgd)):
        if region[1]:
            spans.append((region[0], region[0] + region[1], name))
    height, depth = max(1, h.height), max(1, h.depth)
    for i in range(count):
        offset, stored, uncompressed = _LEVEL.unpack_from(prefix, _HEADER.size + i * _LEVEL.size)
        w, hh, d, image = level_geometry(fmt, h.width, height, depth, i)
        expected = image * layers * h.faces
        where = f"level index [{i}]"
        if uncompressed != expected:
            raise TextureFormatError(path, f"{where}: uncompressedByteLength {uncompressed} != "
                                           f"{expected} from the {fmt.name} formula")
        if h.scheme == 0 and stored != expected:
            raise TextureFormatError(path, f"{where}: byteLength {stored} != "
                                           f"uncompressedByteLength {expected}")
        if stored == 0 or offset + stored > size:
            raise TextureFormatError(path, f"{where}: bytes {offset}..{offset + stored} "
                                           f"outside the file ({size} bytes)")
        spans.append((offset, offset + stored, f"level {i}"))
        levels.append(Level(i, w, hh, d, offset, stored, expected, image))
    spans.sort()
    for (_, a_end, a), (b_start, _, b) in pairwise(spans):
        if b_start < a_end:
            raise TextureFormatError(path, f"level index: {b} overlaps {a}")
    return tuple(levels)


def open_ktx2(path: str | Path) -> Ktx2File:
    """Parse a KTX2 file's header, index and level index (no level bytes are read)."""
    path = Path(path)
    size = file_size(path)
    return parse_ktx2(path, read_prefix(path, _MAX_PREFIX), size)


def parse_ktx2(path: Path, prefix: bytes | memoryview, size: int) -> Ktx2File:
    """`open_ktx2` on bytes already read: `prefix` is the file's first bytes (at least
    `MAX_PREFIX` of them, or the whole file when it is shorter) and `size` its length.
    Bulk registration reads each file's header together with its small levels in one read
    and parses it here, through the same checks. Only a Basis payload's DFD is read from
    the file (vkFormat 0); anything else depends on (prefix, size) alone."""
    prefix = bytes(prefix[:_MAX_PREFIX])
    h = _parse_header(path, prefix)
    for name, region in (("DFD", h.dfd), ("KVD", h.kvd), ("SGD", h.sgd)):
        _check_region(path, f"index {name}", region, size)
    codec = _basis_codec(path, h)
    if codec is not None:  # UASTC / BasisLZ: transcoded per level (engine.textures.basis)
        from .basis import open_basis_ktx2
        return open_basis_ktx2(path, prefix, (IDENTIFIER, h.vk_format, h.type_size, h.width,
                                              h.height, h.depth, h.layers, h.faces,
                                              h.level_count, h.scheme, *h.dfd, *h.kvd, *h.sgd),
                               size, codec)
    fmt = _resolve_format(path, h)
    if fmt.compressed and h.height == 0:
        raise TextureFormatError(path, f"pixelHeight 0 (1D) with block format {fmt.name}")
    if h.faces == 6 and h.depth:
        raise TextureFormatError(path, "cube map with pixelDepth != 0")
    layers = max(1, h.layers)
    check_geometry(path, fmt, h.width, max(1, h.height), max(1, h.depth), layers, h.faces,
                   max(1, h.level_count))
    levels = _parse_levels(path, prefix, h, fmt, layers, size)
    log.debug("opened %s: %s %dx%d, %d levels", path, fmt.name, h.width, h.height, len(levels))
    return Ktx2File(path=path, container="ktx2", pixel_format=fmt, width=h.width,
                    height=max(1, h.height), depth=max(1, h.depth), layers=layers, faces=h.faces,
                    levels=levels, supercompression=_SCHEMES[h.scheme], is_array=h.layers > 0,
                    file_size=size, extra={"vk_format": h.vk_format,
                                           "vk_format_name": vk_format_name(h.vk_format),
                                           "type_size": h.type_size,
                                           "level_count_field": h.level_count})
