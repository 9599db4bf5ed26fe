"""DDS reader: DDS_HEADER with legacy FourCC / RGB masks, and the DX10 extension header.

Real writers disagree on the optional fields (ImageMagick, NVTT, texconv, Pillow), so sizes
come from the format formulas and never from dwPitchOrLinearSize, and a missing
DDSD_MIPMAPCOUNT flag or a zero count means one level. DDS stores every layer/face as its
own full mip chain (layer-major, then face), unlike KTX2's level-major order.

Legacy 'DXT1' could be BC1 with or without punch-through alpha; we read it as BC1_RGBA,
which samples opaque blocks exactly like BC1_RGB and keeps punch-through texels transparent.
'DXT2'/'DXT4' (premultiplied alpha) are read as BC2/BC3: the blocks are identical.
"""
from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import TextureFormatError, UnsupportedFormatError
from ..formats import BY_DXGI, BY_NAME, PixelFormat
from .container import (
    Level,
    TextureFile,
    check_geometry,
    file_size,
    level_geometry,
    read_prefix,
)

log = logging.getLogger(__name__)

MAGIC = b"DDS "
_HEADER = struct.Struct("<4s7I44s8I5I")  # magic, size..mipcount, reserved, ddpf, caps
_DX10 = struct.Struct("<5I")

DDSD_MIPMAPCOUNT, DDSD_DEPTH = 0x20000, 0x800000
DDPF_ALPHAPIXELS, DDPF_FOURCC, DDPF_RGB = 0x1, 0x4, 0x40
DDSCAPS2_CUBEMAP, DDSCAPS2_ALL_FACES, DDSCAPS2_VOLUME = 0x200, 0xFC00, 0x200000
DDS_RESOURCE_MISC_TEXTURECUBE = 0x4
_DIM_1D, _DIM_2D, _DIM_3D = 2, 3, 4

_FOURCC: dict[bytes, str] = {
    b"DXT1": "BC1_RGBA", b"DXT2": "BC2", b"DXT3": "BC2", b"DXT4": "BC3", b"DXT5": "BC3",
    b"ATI1": "BC4", b"BC4U": "BC4", b"BC4S": "BC4_SNORM",
    b"ATI2": "BC5", b"BC5U": "BC5", b"BC5S": "BC5_SNORM",
}
# D3DFMT numbers some writers put in dwFourCC for float formats.
_D3DFMT: dict[int, str] = {112: "RG16F", 113: "RGBA16F", 114: "R32F", 116: "RGBA32F"}
# DXGI *_TYPELESS formats: same blocks as the UNORM variant.
_TYPELESS: dict[int, str] = {27: "RGBA8", 70: "BC1_RGBA", 73: "BC2", 76: "BC3", 79: "BC4",
                             82: "BC5", 94: "BC6H_UF", 97: "BC7", 90: "BGRA8"}
# (bitcount, R, G, B, A masks) -> format, for DDPF_RGB files.
_MASKS: dict[tuple[int, int, int, int, int], str] = {
    (32, 0xFF, 0xFF00, 0xFF0000, 0xFF000000): "RGBA8",
    (32, 0xFF0000, 0xFF00, 0xFF, 0xFF000000): "BGRA8",
    (16, 0xFF, 0xFF00, 0, 0): "RG8",
    (8, 0xFF, 0, 0, 0): "R8",
}


@dataclass(frozen=True)
class _Layout:
    fmt: PixelFormat
    width: int
    height: int
    depth: int
    layers: int
    faces: int
    level_count: int
    data_offset: int
    is_array: bool
    extra: dict


class DdsFile(TextureFile):
    """A DDS file: image (layer, face, level) sits at chain * (layer*faces + face) + prefix."""

    def _chain_nbytes(self) -> int:
        return sum(lv.image_nbytes for lv in self.levels)

    def _image_offset(self, lv: Level, layer: int, face: int) -> int:
        return lv.offset + (layer * self.faces + face) * self._chain_nbytes()

    def _read_image(self, lv: Level, layer: int, face: int) -> bytes:
        return self._read_span(self._image_offset(lv, layer, face), lv.image_nbytes,
                               f"level {lv.index} layer {layer} face {face}")

    def _read_all(self, lv: Level) -> bytes:
        return b"".join(self._read_image(lv, layer, face)
                        for layer in range(self.layers) for face in range(self.faces))


def _fourcc_text(code: bytes) -> str:
    return code.decode("latin-1") if all(32 <= c < 127 for c in code) else f"0x{code.hex()}"


def _legacy_format(path: Path, pf_flags: int, fourcc: bytes, masks: tuple[int, ...]) -> str:
    if pf_flags & DDPF_FOURCC:
        if fourcc in _FOURCC:
            return _FOURCC[fourcc]
        code = int.from_bytes(fourcc, "little")
        if code in _D3DFMT:
            return _D3DFMT[code]
        raise UnsupportedFormatError(path, f"DDS FourCC {_fourcc_text(fourcc)}")
    if pf_flags & DDPF_RGB:
        bits, r, g, b, a = masks
        if not pf_flags & DDPF_ALPHAPIXELS:
            a = 0
        name = _MASKS.get((bits, r, g, b, a))
        if name is None:
            raise UnsupportedFormatError(path, f"DDS RGB bitcount {bits} masks R={r:#x} G={g:#x} "
                                               f"B={b:#x} A={a:#x}")
        return name
    raise UnsupportedFormatError(path, f"DDS pixel format flags {pf_flags:#x} "
                                       "(luminance/alpha-only/YUV)")


def _dx10(path: Path, prefix: bytes, height: int, depth: int) -> tuple[str, int, int, int, dict]:
    """(format name, height, depth, layers, extra incl. faces) from the DX10 extension header."""
    if len(prefix) < _HEADER.size + _DX10.size:
        raise TextureFormatError(path, "DX10 header: truncated")
    dxgi, dim, misc, array_size, _misc2 = _DX10.unpack_from(prefix, _HEADER.size)
    fmt = BY_DXGI.get(dxgi)
    name = fmt.name if fmt else _TYPELESS.get(dxgi)
    if name is None:
        raise UnsupportedFormatError(path, f"DXGI_FORMAT {dxgi}", "not in engine/formats.py")
    if dim not in (_DIM_1D, _DIM_2D, _DIM_3D):
        raise TextureFormatError(path, f"DX10 resourceDimension {dim}")
    if dim == _DIM_1D:
        height = 1
    if dim != _DIM_3D:
        depth = 1
    faces = 6 if misc & DDS_RESOURCE_MISC_TEXTURECUBE else 1
    if array_size == 0:
        # Pillow (13) writes arraySize 0 for its DX10 files; one image is what it means.
        log.debug("%s: DX10 arraySize 0 read as 1", path)
        array_size = 1
    if dim == _DIM_3D and (faces == 6 or array_size != 1):
        raise TextureFormatError(path, "DX10 3D texture with cube flag or arraySize != 1")
    return name, height, depth, array_size, {"dxgi_format": dxgi, "resource_dimension": dim,
                                             "faces": faces}


def _parse(path: Path, prefix: bytes) -> _Layout:
    if len(prefix) < 4 or prefix[:4] != MAGIC:
        raise TextureFormatError(path, "magic: not a DDS file")
    if len(prefix) < _HEADER.size:
        raise TextureFormatError(path, f"DDS_HEADER: truncated ({len(prefix)} bytes)")
    (_, hsize, flags, height, width, _pitch, depth, mips, _res, _pfsize, pf_flags, fourcc_n,
     bits, rmask, gmask, bmask, amask, _caps, caps2, _c3, _c4, _r2) = _HEADER.unpack_from(prefix)
    if hsize != 124:
        raise TextureFormatError(path, f"DDS_HEADER dwSize {hsize} (must be 124)")
    fourcc = fourcc_n.to_bytes(4, "little")
    level_count = mips if flags & DDSD_MIPMAPCOUNT and mips else 1
    depth = depth if flags & DDSD_DEPTH and caps2 & DDSCAPS2_VOLUME and depth else 1
    extra: dict = {"fourcc": _fourcc_text(fourcc) if pf_flags & DDPF_FOURCC else None}
    if pf_flags & DDPF_FOURCC and fourcc == b"DX10":
        name, height, depth, layers, ext = _dx10(path, prefix, height, depth)
        faces = ext.pop("faces")
        extra.update(ext)
        data_offset, is_array = _HEADER.size + _DX10.size, layers > 1
    else:
        name = _legacy_format(path, pf_flags, fourcc, (bits, rmask, gmask, bmask, amask))
        layers, data_offset, is_array = 1, _HEADER.size, False
        faces = 1
        if caps2 & DDSCAPS2_CUBEMAP:
            if caps2 & DDSCAPS2_ALL_FACES != DDSCAPS2_ALL_FACES:
                raise TextureFormatError(path, f"dwCaps2 {caps2:#x}: partial cube map "
                                               "(all six faces are required)")
            faces = 6
    fmt = BY_NAME[name]
    extra["dxgi_format"] = extra.get("dxgi_format", fmt.dxgi_format)
    return _Layout(fmt, width, height, depth, layers, faces, level_count, data_offset,
                   is_array, extra)


def open_dds(path: str | Path) -> DdsFile:
    """Parse a DDS file's headers and compute where every image lives (reads no pixels)."""
    path = Path(path)
    size = file_size(path)
    lay = _parse(path, read_prefix(path, _HEADER.size + _DX10.size))
    check_geometry(path, lay.fmt, lay.width, lay.height, lay.depth, lay.layers, lay.faces,
                   lay.level_count)
    levels: list[Level] = []
    offset = lay.data_offset
    for i in range(lay.level_count):
        w, h, d, image = level_geometry(lay.fmt, lay.width, lay.height, lay.depth, i)
        total = image * lay.layers * lay.faces
        levels.append(Level(i, w, h, d, offset, total, total, image))
        offset += image
    chain = offset - lay.data_offset
    end = lay.data_offset + chain * lay.layers * lay.faces
    if end > size:
        raise TextureFormatError(path, f"pixel data: needs {end} bytes for {lay.layers} layer(s) "
                                       f"x {lay.faces} face(s) x {lay.level_count} level(s), "
                                       f"file has {size}")
    if end < size:
        log.debug("%s: %d trailing bytes after the pixel data", path, size - end)
    return DdsFile(path=path, container="dds", pixel_format=lay.fmt, width=lay.width,
                   height=lay.height, depth=lay.depth, layers=lay.layers, faces=lay.faces,
                   levels=tuple(levels), is_array=lay.is_array, file_size=size, extra=lay.extra)
