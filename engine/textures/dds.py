"""DDS reader: DDS_HEADER with legacy FourCC / RGB masks, and the DX10 extension header.

Real writers disagree on the optional fields (ImageMagick, NVTT, texconv, Pillow), so sizes
come from the format formulas and never from dwPitchOrLinearSize, and a missing
DDSD_MIPMAPCOUNT flag or a zero count means one level. DDS stores every layer/face as its
own full mip chain (layer-major, then face), unlike KTX2's level-major order.

Uncompressed legacy layouts (DDPF_RGB, DDPF_LUMINANCE, DDPF_ALPHA with any bit count of
8/16/24/32 and any channel masks) are matched against the engine's formats by what each
texel samples as (engine/textures/layouts.py): a layout GL can take as it is (5:6:5 as
GL_RGB565, BGRX as RGBA8 with an "RGB1" swizzle, L8 as R8 "RRR1", ...) is read untouched;
any other is repacked at read time into the smallest format holding every channel exactly
(24-bit BGR -> RGBA8, A4L4 -> L8A8), and 8-bit palette files are looked up through their
256-entry RGBA palette. Either way the bytes a reader returns are already in the format
uploaded, so `Level` sizes and the ledger stay exact; `stored_nbytes` is the size on disk.

Legacy 'DXT1' could be BC1 with or without punch-through alpha; we read it as BC1_RGBA,
which samples opaque blocks exactly like BC1_RGB and keeps punch-through texels transparent.
'DXT2'/'DXT4' (premultiplied alpha) are read as BC2/BC3: the blocks are identical.
"""
from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import TextureFormatError, UnsupportedFormatError
from ..formats import BY_DXGI, BY_NAME, PixelFormat
from ..formats import get as get_format
from .container import (
    Level,
    TextureFile,
    check_geometry,
    file_size,
    level_geometry,
    read_prefix,
)
from .layouts import (
    WIDENED_FAMILIES,
    Field,
    Sampled,
    direct_format,
    field_of_mask,
    plan_expansion,
    sampled,
)

log = logging.getLogger(__name__)

MAGIC = b"DDS "
_HEADER = struct.Struct("<4s7I44s8I5I")  # magic, size..mipcount, reserved, ddpf, caps
_DX10 = struct.Struct("<5I")

DDSD_MIPMAPCOUNT, DDSD_DEPTH = 0x20000, 0x800000
DDPF_ALPHAPIXELS, DDPF_ALPHA, DDPF_FOURCC, DDPF_RGB = 0x1, 0x2, 0x4, 0x40
DDPF_PALETTEINDEXED4, DDPF_PALETTEINDEXED8, DDPF_YUV = 0x8, 0x20, 0x200
DDPF_LUMINANCE, DDPF_BUMPDUDV = 0x20000, 0x80000
PALETTE_BYTES = 256 * 4  # PALETTEENTRY: red, green, blue, flags (alpha)
DDSCAPS2_CUBEMAP, DDSCAPS2_ALL_FACES, DDSCAPS2_VOLUME = 0x200, 0xFC00, 0x200000
DDS_RESOURCE_MISC_TEXTURECUBE = 0x4
_DIM_UNKNOWN, _DIM_1D, _DIM_2D, _DIM_3D = 0, 2, 3, 4

_FOURCC: dict[bytes, str] = {
    b"DXT1": "BC1_RGBA", b"DXT2": "BC2", b"DXT3": "BC2", b"DXT4": "BC3", b"DXT5": "BC3",
    b"ATI1": "BC4", b"BC4U": "BC4", b"BC4S": "BC4_SNORM",
    b"ATI2": "BC5", b"BC5U": "BC5", b"BC5S": "BC5_SNORM",
}
# D3DFMT numbers some writers put in dwFourCC for 16-bit and float formats.
_D3DFMT: dict[int, str] = {36: "RGBA16", 112: "RG16F", 113: "RGBA16F", 114: "R32F",
                           116: "RGBA32F"}
# DXGI *_TYPELESS formats: same blocks as the UNORM variant.
_TYPELESS: dict[int, str] = {27: "RGBA8", 70: "BC1_RGBA", 73: "BC2", 76: "BC3", 79: "BC4",
                             82: "BC5", 94: "BC6H_UF", 97: "BC7", 90: "BGRA8", 92: "BGRX8",
                             23: "R10G10B10A2", 9: "RGBA16", 33: "RG16", 53: "R16", 60: "R8",
                             48: "RG8"}
# Luminance headers real writers produce that break the mask rules, read as they were meant
# (bit count, R, G, B, A masks as written -> bit count, L mask, A mask):
# Pillow (10-13) writes L with R=G=B=0xFF000000 at 8 bits and LA with alpha 0xFF000000 at
# 16 bits (its own reader goes by the bit count alone); DirectXTex reads 16-bit A8L8 declared
# with a bit count of 8 (its DDSPF_A8L8_ALT).
_LUMINANCE_QUIRKS: dict[tuple[int, int, int, int, int], tuple[int, int, int]] = {
    (8, 0xFF000000, 0xFF000000, 0xFF000000, 0): (8, 0xFF, 0),
    (16, 0xFF, 0xFF, 0xFF, 0xFF000000): (16, 0xFF, 0xFF00),
    (8, 0xFF, 0, 0, 0xFF00): (16, 0xFF, 0xFF00),
}


@dataclass(frozen=True)
class _Pixels:
    """The format a file's texels are uploaded as, and how its bytes get there."""

    fmt: PixelFormat
    src_bytes: int  # bytes per texel in the file (the format's own unless converted)
    convert: Callable[[bytes], bytes] | None = None
    how: str = "direct"  # "direct", "repacked" or "palette" (for inspect)


@dataclass(frozen=True)
class _Layout:
    pixels: _Pixels
    width: int
    height: int
    depth: int
    layers: int
    faces: int
    level_count: int
    data_offset: int
    is_array: bool
    extra: dict


@dataclass
class DdsFile(TextureFile):
    """A DDS file: image (layer, face, level) sits at chain * (layer*faces + face) + prefix.

    `source_nbytes[i]` is one image of level i as stored; it differs from the level's
    `image_nbytes` when `convert` turns file texels into the uploaded format's."""

    source_nbytes: tuple[int, ...] = ()
    convert: Callable[[bytes], bytes] | None = field(default=None, repr=False)

    def _chain_nbytes(self) -> int:
        return sum(self.source_nbytes)

    def _image_offset(self, lv: Level, layer: int, face: int) -> int:
        return lv.offset + (layer * self.faces + face) * self._chain_nbytes()

    def _read_image(self, lv: Level, layer: int, face: int) -> bytes:
        data = self._read_span(self._image_offset(lv, layer, face),
                               self.source_nbytes[lv.index],
                               f"level {lv.index} layer {layer} face {face}")
        return data if self.convert is None else self.convert(data)

    def _read_all(self, lv: Level) -> bytes:
        return b"".join(self._read_image(lv, layer, face)
                        for layer in range(self.layers) for face in range(self.faces))


def _fourcc_text(code: bytes) -> str:
    return code.decode("latin-1") if all(32 <= c < 127 for c in code) else f"0x{code.hex()}"


def _legacy_format(path: Path, pf_flags: int, fourcc: bytes, bits: int,
                   masks: tuple[int, int, int, int], palette: bytes) -> _Pixels:
    if pf_flags & DDPF_FOURCC:
        if fourcc in _FOURCC:
            name = _FOURCC[fourcc]
        else:
            code = int.from_bytes(fourcc, "little")
            if code not in _D3DFMT:
                raise UnsupportedFormatError(path, f"DDS FourCC {_fourcc_text(fourcc)}")
            name = _D3DFMT[code]
        fmt = BY_NAME[name]
        return _Pixels(fmt, fmt.block_bytes)
    if pf_flags & DDPF_PALETTEINDEXED8:
        return _palette(path, pf_flags, bits, palette)
    if pf_flags & (DDPF_YUV | DDPF_BUMPDUDV | DDPF_PALETTEINDEXED4):
        raise UnsupportedFormatError(path, f"DDS pixel format flags {pf_flags:#x}",
                                     "YUV, bump du/dv and 4-bit palettes are not read")
    if not pf_flags & (DDPF_RGB | DDPF_LUMINANCE | DDPF_ALPHA | DDPF_ALPHAPIXELS):
        raise UnsupportedFormatError(path, f"DDS pixel format flags {pf_flags:#x}")
    return _masked(path, pf_flags, bits, masks)


def _masked(path: Path, pf_flags: int, bits: int, masks: tuple[int, int, int, int]) -> _Pixels:
    """An RGB / luminance / alpha layout given by masks: as it is, or repacked exactly."""
    if bits not in (8, 16, 24, 32):
        raise TextureFormatError(path, f"DDS_PIXELFORMAT dwRGBBitCount {bits} "
                                       "(must be 8, 16, 24 or 32)")
    r, g, b, a = masks
    luminance = bool(pf_flags & DDPF_LUMINANCE) and not pf_flags & DDPF_RGB
    quirk = _LUMINANCE_QUIRKS.get((bits, r, g, b, a)) if luminance else None
    if quirk is not None:
        bits, r, a = quirk
        log.debug("%s: a known writer's luminance header read as %d-bit L%s", path, bits,
                  "A" if a else "")
    if pf_flags & DDPF_RGB:
        named = {"R": r, "G": g, "B": b, "A": a if pf_flags & DDPF_ALPHAPIXELS else 0}
    elif luminance:
        named = {"L": r, "A": a if pf_flags & DDPF_ALPHAPIXELS else 0}
    else:  # DDPF_ALPHA, or DDPF_ALPHAPIXELS alone: alpha-only
        if not pf_flags & DDPF_ALPHA and (r or g or b):
            raise TextureFormatError(path, f"DDS_PIXELFORMAT flags {pf_flags:#x}: colour masks "
                                           "without DDPF_RGB or DDPF_LUMINANCE")
        named = {"A": a}
    fields: dict[str, Field] = {}
    used = 0
    for name, mask in named.items():
        if not mask:
            continue
        f = field_of_mask(mask)
        if f is None or mask >> bits or used & mask:
            raise TextureFormatError(path, f"DDS_PIXELFORMAT {name} mask {mask:#x}: not one "
                                           f"run of bits inside {bits} bits, apart from the "
                                           "other masks")
        fields[name] = f
        used |= mask
    if not fields:
        raise TextureFormatError(path, f"DDS_PIXELFORMAT flags {pf_flags:#x}: no channel mask")
    alpha: Field | int = fields.get("A", 1)
    if "L" in fields:
        layout: Sampled = (fields["L"], fields["L"], fields["L"], alpha)
    else:
        layout = (fields.get("R", 0), fields.get("G", 0), fields.get("B", 0), alpha)
    fmt = direct_format(bits, layout)
    if fmt is not None:
        return _Pixels(fmt, fmt.block_bytes)
    plan = plan_expansion(bits, layout)
    if plan is None:
        text = " ".join(f"{k}={m:#x}" for k, m in named.items() if m)
        raise UnsupportedFormatError(path, f"DDS {bits}-bit masks {text}",
                                     "no GL format holds these channel widths exactly")
    log.debug("%s: %d-bit masks repacked to %s on read", path, bits, plan.target.name)
    return _Pixels(plan.target, plan.src_bytes, plan.convert, "repacked")


def _dxgi_pixels(fmt: PixelFormat) -> _Pixels:
    """A DXGI format as it is, or repacked when drivers store its family wider (RGBA4)."""
    layout = sampled(fmt)
    if fmt.family not in WIDENED_FAMILIES or layout is None:
        return _Pixels(fmt, fmt.block_bytes)
    plan = plan_expansion(fmt.block_bytes * 8, layout)
    assert plan is not None  # RGBA8 holds every 4-bit field exactly
    return _Pixels(plan.target, plan.src_bytes, plan.convert, "repacked")


def _palette(path: Path, pf_flags: int, bits: int, palette: bytes) -> _Pixels:
    """8-bit indices into 256 RGBA entries: looked up into the smallest exact format (L8 when
    every entry is an opaque grey, L8A8 for greys with alpha, else RGBA8)."""
    if bits != 8:
        if bits == 16 and pf_flags & DDPF_ALPHAPIXELS:
            raise UnsupportedFormatError(path, "DDS A8P8 (16-bit palette with alpha)")
        raise TextureFormatError(path, f"DDS palette file with dwRGBBitCount {bits} (must be 8)")
    if len(palette) < PALETTE_BYTES:
        raise TextureFormatError(path, f"palette: truncated ({len(palette)} of {PALETTE_BYTES} "
                                       "bytes after the header)")
    entries = np.frombuffer(palette, np.uint8, PALETTE_BYTES).reshape(256, 4)
    grey = bool(np.all(entries[:, 0] == entries[:, 1]) and np.all(entries[:, 1] == entries[:, 2]))
    opaque = bool(np.all(entries[:, 3] == 255))
    if grey and opaque:
        name, lut = "L8", entries[:, :1]
    elif grey:
        name, lut = "L8A8", entries[:, [0, 3]]
    else:
        name, lut = "RGBA8", entries
    return _Pixels(get_format(name), 1, _PaletteLookup(np.ascontiguousarray(lut)), "palette")


@dataclass(frozen=True, eq=False)
class _PaletteLookup:
    """Indices -> palette entries (a class, not a closure, so a DdsFile pickles)."""

    lut: np.ndarray

    def __call__(self, data: bytes) -> bytes:
        return self.lut[np.frombuffer(data, np.uint8)].tobytes()


def _dx10(path: Path, prefix: bytes, height: int, depth: int) -> tuple[str, int, int, int, dict]:
    """(format name, height, depth, layers, extra incl. faces) from the DX10 extension header."""
    if len(prefix) < _HEADER.size + _DX10.size:
        raise TextureFormatError(path, "DX10 header: truncated")
    dxgi, dim, misc, array_size, _misc2 = _DX10.unpack_from(prefix, _HEADER.size)
    fmt = BY_DXGI.get(dxgi)
    name = fmt.name if fmt else _TYPELESS.get(dxgi)
    if name is None:
        raise UnsupportedFormatError(path, f"DXGI_FORMAT {dxgi}", "not in engine/formats.py")
    if dim == _DIM_UNKNOWN:
        # Some writers leave the dimension unknown; the legacy header's depth (already
        # checked against DDSD_DEPTH and DDSCAPS2_VOLUME) says whether it is a volume.
        dim = _DIM_3D if depth > 1 else _DIM_2D
        log.debug("%s: DX10 resourceDimension 0 read as %s", path,
                  "3D" if dim == _DIM_3D else "2D")
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
    return name, height, depth, array_size, {"dxgi_format": dxgi, "faces": faces,
                                             "resource_dimension": _DX10.unpack_from(
                                                 prefix, _HEADER.size)[1]}


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
        pixels = _dxgi_pixels(BY_NAME[name])
        data_offset, is_array = _HEADER.size + _DX10.size, layers > 1
    else:
        pixels = _legacy_format(path, pf_flags, fourcc, bits, (rmask, gmask, bmask, amask),
                                prefix[_HEADER.size:_HEADER.size + PALETTE_BYTES])
        layers, data_offset, is_array = 1, _HEADER.size, False
        if pixels.how == "palette":
            data_offset += PALETTE_BYTES
        if not pf_flags & DDPF_FOURCC:
            extra["masks"] = {"bits": bits, "r": rmask, "g": gmask, "b": bmask, "a": amask,
                              "flags": pf_flags, "read_as": pixels.how}
        faces = 1
        if caps2 & DDSCAPS2_CUBEMAP:
            if caps2 & DDSCAPS2_ALL_FACES != DDSCAPS2_ALL_FACES:
                raise TextureFormatError(path, f"dwCaps2 {caps2:#x}: partial cube map "
                                               "(all six faces are required)")
            faces = 6
    extra["dxgi_format"] = extra.get("dxgi_format", pixels.fmt.dxgi_format)
    return _Layout(pixels, width, height, depth, layers, faces, level_count, data_offset,
                   is_array, extra)


def open_dds(path: str | Path) -> DdsFile:
    """Parse a DDS file's headers and compute where every image lives (reads no pixels)."""
    path = Path(path)
    size = file_size(path)
    lay = _parse(path, read_prefix(path, _HEADER.size + max(_DX10.size, PALETTE_BYTES)))
    fmt, src_bytes = lay.pixels.fmt, lay.pixels.src_bytes
    check_geometry(path, fmt, lay.width, lay.height, lay.depth, lay.layers, lay.faces,
                   lay.level_count)
    levels: list[Level] = []
    sources: list[int] = []
    offset = lay.data_offset
    images = lay.layers * lay.faces
    for i in range(lay.level_count):
        w, h, d, image = level_geometry(fmt, lay.width, lay.height, lay.depth, i)
        source = image if lay.pixels.convert is None else w * h * d * src_bytes
        levels.append(Level(i, w, h, d, offset, source * images, image * images, image))
        sources.append(source)
        offset += source
    chain = offset - lay.data_offset
    end = lay.data_offset + chain * images
    if end > size:
        raise TextureFormatError(path, f"pixel data: needs {end} bytes for {lay.layers} layer(s) "
                                       f"x {lay.faces} face(s) x {lay.level_count} level(s), "
                                       f"file has {size}")
    if end < size:
        log.debug("%s: %d trailing bytes after the pixel data", path, size - end)
    return DdsFile(path=path, container="dds", pixel_format=fmt, width=lay.width,
                   height=lay.height, depth=lay.depth, layers=lay.layers, faces=lay.faces,
                   levels=tuple(levels), is_array=lay.is_array, file_size=size, extra=lay.extra,
                   source_nbytes=tuple(sources), convert=lay.pixels.convert)
