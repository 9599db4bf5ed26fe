"""The pixel formats the engine knows, as one table shared by every layer.

A `PixelFormat` ties together the names the same format has in each world: our name
("BC7_SRGB"), the GL internal format, the Vulkan/KTX2 vkFormat, the DXGI format of DDS
DX10 headers, and the block geometry that exact byte sizes are computed from.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PixelFormat:
    """One format. Uncompressed formats are 1x1 "blocks" of `block_bytes` bytes."""

    name: str
    family: str  # "BC1".."BC7", "RGBA8", "DEPTH", ... (what `info` lists for drivers)
    gl_internal: int
    block_w: int = 1
    block_h: int = 1
    block_bytes: int = 4
    srgb: bool = False
    signed: bool = False
    vk_format: int | None = None
    dxgi_format: int | None = None
    components: int = 4
    # For uncompressed formats: GL pixel transfer format/type and moderngl dtype.
    gl_format: int | None = None
    gl_type: int | None = None
    mgl_dtype: str | None = None
    #: What sampling returns per output channel R, G, B, A: a stored channel ("R".."A") or a
    #: constant ("0", "1"). None samples the stored channels as they are. It lets one small
    #: storage format stand for a layout GL has no format of (luminance L8 -> R8 "RRR1",
    #: alpha-only A8 -> R8 "000R", BGRX -> RGBA8 "RGB1" so the unused byte never shows).
    swizzle: str | None = None

    @property
    def compressed(self) -> bool:
        return self.block_w > 1 or self.block_h > 1

    @property
    def is_depth(self) -> bool:
        return self.family == "DEPTH"


GL_RGBA, GL_BGRA, GL_RED, GL_RG, GL_RGB = 0x1908, 0x80E1, 0x1903, 0x8227, 0x1907
GL_UNSIGNED_BYTE, GL_HALF_FLOAT, GL_FLOAT = 0x1401, 0x140B, 0x1406
GL_DEPTH_COMPONENT, GL_DEPTH_STENCIL = 0x1902, 0x84F9
GL_UNSIGNED_INT_24_8, GL_FLOAT_32_UNSIGNED_INT_24_8_REV, GL_UNSIGNED_SHORT = 0x84FA, 0x8DAD, 0x1403
GL_UNSIGNED_INT_2_10_10_10_REV, GL_UNSIGNED_INT_10F_11F_11F_REV = 0x8368, 0x8C3B
# Packed integer pixel types: widths listed from the most significant bit; *_REV puts the
# first component of the transfer format in the least significant bits instead.
GL_UNSIGNED_SHORT_5_6_5, GL_UNSIGNED_SHORT_5_6_5_REV = 0x8363, 0x8364
GL_UNSIGNED_SHORT_4_4_4_4, GL_UNSIGNED_SHORT_4_4_4_4_REV = 0x8033, 0x8365
GL_UNSIGNED_SHORT_5_5_5_1, GL_UNSIGNED_SHORT_1_5_5_5_REV = 0x8034, 0x8366
GL_UNSIGNED_INT_8_8_8_8, GL_UNSIGNED_INT_8_8_8_8_REV = 0x8035, 0x8367
GL_UNSIGNED_INT_10_10_10_2 = 0x8036
GL_RGB565, GL_RGB5_A1, GL_RGBA4, GL_RGB10_A2 = 0x8D62, 0x8057, 0x8056, 0x8059
GL_R8, GL_RG8, GL_RGBA8, GL_SRGB8_ALPHA8 = 0x8229, 0x822B, 0x8058, 0x8C43
GL_R16, GL_RG16, GL_RGBA16 = 0x822A, 0x822C, 0x805B


def _packed_family(family: str, internal: int, nbytes: int, names: dict[str, tuple[int, int]],
                   dxgi: dict[str, int]) -> list[PixelFormat]:
    """Every channel order GL can transfer of one packed layout, with and without alpha.

    Names list channels from the least significant bit, as DXGI does ("B5G6R5": blue in
    bits 0-4, red in 11-15 = D3DFMT_R5G6B5). The X variants hold the same bits but sample
    alpha as 1 (the file marks those bits unused, so they may hold anything)."""
    out = []
    for name, (gl_format, gl_type) in names.items():
        comps = 4 if "A" in name else 3
        out.append(PixelFormat(name, family, internal, block_bytes=nbytes, components=comps,
                               dxgi_format=dxgi.get(name), gl_format=gl_format,
                               gl_type=gl_type))
        if "A" in name:
            xname = name.replace("A", "X")
            out.append(PixelFormat(xname, family, internal, block_bytes=nbytes, components=3,
                                   dxgi_format=dxgi.get(xname), gl_format=gl_format,
                                   gl_type=gl_type, swizzle="RGB1"))
    return out


_PACKED_AND_LUMINANCE: tuple[PixelFormat, ...] = (
    *_packed_family("RGB565", GL_RGB565, 2, {
        "B5G6R5": (GL_RGB, GL_UNSIGNED_SHORT_5_6_5),
        "R5G6B5": (GL_RGB, GL_UNSIGNED_SHORT_5_6_5_REV)}, {"B5G6R5": 85}),
    *_packed_family("RGB5A1", GL_RGB5_A1, 2, {
        "B5G5R5A1": (GL_BGRA, GL_UNSIGNED_SHORT_1_5_5_5_REV),
        "R5G5B5A1": (GL_RGBA, GL_UNSIGNED_SHORT_1_5_5_5_REV),
        "A1B5G5R5": (GL_RGBA, GL_UNSIGNED_SHORT_5_5_5_1),
        "A1R5G5B5": (GL_BGRA, GL_UNSIGNED_SHORT_5_5_5_1)}, {"B5G5R5A1": 86}),
    *_packed_family("RGBA4", GL_RGBA4, 2, {
        "B4G4R4A4": (GL_BGRA, GL_UNSIGNED_SHORT_4_4_4_4_REV),
        "R4G4B4A4": (GL_RGBA, GL_UNSIGNED_SHORT_4_4_4_4_REV),
        "A4B4G4R4": (GL_RGBA, GL_UNSIGNED_SHORT_4_4_4_4),
        "A4R4G4B4": (GL_BGRA, GL_UNSIGNED_SHORT_4_4_4_4)}, {"B4G4R4A4": 115}),
    *_packed_family("RGB10A2", GL_RGB10_A2, 4, {
        "R10G10B10A2": (GL_RGBA, GL_UNSIGNED_INT_2_10_10_10_REV),
        "B10G10R10A2": (GL_BGRA, GL_UNSIGNED_INT_2_10_10_10_REV),
        "A2B10G10R10": (GL_RGBA, GL_UNSIGNED_INT_10_10_10_2),
        "A2R10G10B10": (GL_BGRA, GL_UNSIGNED_INT_10_10_10_2)}, {"R10G10B10A2": 24}),
    # 8:8:8:8 orders RGBA8 / BGRA8 (below) do not cover, and every order without alpha.
    PixelFormat("ABGR8", "RGBA8", GL_RGBA8, gl_format=GL_RGBA, gl_type=GL_UNSIGNED_INT_8_8_8_8),
    PixelFormat("ARGB8", "RGBA8", GL_RGBA8, gl_format=GL_BGRA, gl_type=GL_UNSIGNED_INT_8_8_8_8),
    PixelFormat("RGBX8", "RGBA8", GL_RGBA8, components=3, gl_format=GL_RGBA,
                gl_type=GL_UNSIGNED_BYTE, swizzle="RGB1"),
    PixelFormat("BGRX8", "RGBA8", GL_RGBA8, components=3, dxgi_format=88, gl_format=GL_BGRA,
                gl_type=GL_UNSIGNED_BYTE, swizzle="RGB1"),
    PixelFormat("BGRX8_SRGB", "RGBA8", GL_SRGB8_ALPHA8, srgb=True, components=3,
                dxgi_format=93, gl_format=GL_BGRA, gl_type=GL_UNSIGNED_BYTE, swizzle="RGB1"),
    PixelFormat("XBGR8", "RGBA8", GL_RGBA8, components=3, gl_format=GL_RGBA,
                gl_type=GL_UNSIGNED_INT_8_8_8_8, swizzle="RGB1"),
    PixelFormat("XRGB8", "RGBA8", GL_RGBA8, components=3, gl_format=GL_BGRA,
                gl_type=GL_UNSIGNED_INT_8_8_8_8, swizzle="RGB1"),
    # 16-bit unsigned normalized.
    PixelFormat("R16", "R16", GL_R16, block_bytes=2, components=1, dxgi_format=56,
                gl_format=GL_RED, gl_type=GL_UNSIGNED_SHORT),
    PixelFormat("RG16", "RG16", GL_RG16, block_bytes=4, components=2, dxgi_format=35,
                gl_format=GL_RG, gl_type=GL_UNSIGNED_SHORT),
    PixelFormat("RGBA16", "RGBA16", GL_RGBA16, block_bytes=8, dxgi_format=11,
                gl_format=GL_RGBA, gl_type=GL_UNSIGNED_SHORT),
    # Luminance and alpha-only: one or two stored channels, spread by the swizzle.
    PixelFormat("L8", "R8", GL_R8, block_bytes=1, components=1, gl_format=GL_RED,
                gl_type=GL_UNSIGNED_BYTE, swizzle="RRR1"),
    PixelFormat("L8A8", "RG8", GL_RG8, block_bytes=2, components=2, gl_format=GL_RG,
                gl_type=GL_UNSIGNED_BYTE, swizzle="RRRG"),
    PixelFormat("A8", "R8", GL_R8, block_bytes=1, components=1, dxgi_format=65,
                gl_format=GL_RED, gl_type=GL_UNSIGNED_BYTE, swizzle="000R"),
    PixelFormat("L16", "R16", GL_R16, block_bytes=2, components=1, gl_format=GL_RED,
                gl_type=GL_UNSIGNED_SHORT, swizzle="RRR1"),
)

_F = PixelFormat
FORMATS: tuple[PixelFormat, ...] = (
    # S3TC / BC1-BC3
    _F("BC1_RGB", "BC1", 0x83F0, 4, 4, 8, vk_format=131, dxgi_format=None, components=3),
    _F("BC1_RGB_SRGB", "BC1", 0x8C4C, 4, 4, 8, srgb=True, vk_format=132, components=3),
    _F("BC1_RGBA", "BC1", 0x83F1, 4, 4, 8, vk_format=133, dxgi_format=71),
    _F("BC1_RGBA_SRGB", "BC1", 0x8C4D, 4, 4, 8, srgb=True, vk_format=134, dxgi_format=72),
    _F("BC2", "BC2", 0x83F2, 4, 4, 16, vk_format=135, dxgi_format=74),
    _F("BC2_SRGB", "BC2", 0x8C4E, 4, 4, 16, srgb=True, vk_format=136, dxgi_format=75),
    _F("BC3", "BC3", 0x83F3, 4, 4, 16, vk_format=137, dxgi_format=77),
    _F("BC3_SRGB", "BC3", 0x8C4F, 4, 4, 16, srgb=True, vk_format=138, dxgi_format=78),
    # RGTC / BC4-BC5
    _F("BC4", "BC4", 0x8DBB, 4, 4, 8, vk_format=139, dxgi_format=80, components=1),
    _F("BC4_SNORM", "BC4", 0x8DBC, 4, 4, 8, signed=True, vk_format=140, dxgi_format=81, components=1),
    _F("BC5", "BC5", 0x8DBD, 4, 4, 16, vk_format=141, dxgi_format=83, components=2),
    _F("BC5_SNORM", "BC5", 0x8DBE, 4, 4, 16, signed=True, vk_format=142, dxgi_format=84, components=2),
    # BPTC / BC6H-BC7
    _F("BC6H_UF", "BC6H", 0x8E8F, 4, 4, 16, vk_format=143, dxgi_format=95, components=3),
    _F("BC6H_SF", "BC6H", 0x8E8E, 4, 4, 16, signed=True, vk_format=144, dxgi_format=96, components=3),
    _F("BC7", "BC7", 0x8E8C, 4, 4, 16, vk_format=145, dxgi_format=98),
    _F("BC7_SRGB", "BC7", 0x8E8D, 4, 4, 16, srgb=True, vk_format=146, dxgi_format=99),
    # Uncompressed colour
    _F("RGBA8", "RGBA8", 0x8058, vk_format=37, dxgi_format=28,
       gl_format=GL_RGBA, gl_type=GL_UNSIGNED_BYTE, mgl_dtype="f1"),
    _F("RGBA8_SRGB", "RGBA8", 0x8C43, srgb=True, vk_format=43, dxgi_format=29,
       gl_format=GL_RGBA, gl_type=GL_UNSIGNED_BYTE, mgl_dtype="f1"),
    _F("BGRA8", "BGRA8", 0x8058, vk_format=44, dxgi_format=87,
       gl_format=GL_BGRA, gl_type=GL_UNSIGNED_BYTE, mgl_dtype="f1"),
    _F("BGRA8_SRGB", "BGRA8", 0x8C43, srgb=True, vk_format=50, dxgi_format=91,
       gl_format=GL_BGRA, gl_type=GL_UNSIGNED_BYTE, mgl_dtype="f1"),
    _F("R8", "R8", 0x8229, block_bytes=1, components=1, vk_format=9, dxgi_format=61,
       gl_format=GL_RED, gl_type=GL_UNSIGNED_BYTE, mgl_dtype="f1"),
    _F("RG8", "RG8", 0x822B, block_bytes=2, components=2, vk_format=16, dxgi_format=49,
       gl_format=GL_RG, gl_type=GL_UNSIGNED_BYTE, mgl_dtype="f1"),
    _F("RGBA16F", "RGBA16F", 0x881A, block_bytes=8, vk_format=97, dxgi_format=10,
       gl_format=GL_RGBA, gl_type=GL_HALF_FLOAT, mgl_dtype="f2"),
    _F("RGBA32F", "RGBA32F", 0x8814, block_bytes=16, vk_format=109, dxgi_format=2,
       gl_format=GL_RGBA, gl_type=GL_FLOAT, mgl_dtype="f4"),
    _F("R32F", "R32F", 0x822E, block_bytes=4, components=1, vk_format=100, dxgi_format=41,
       gl_format=GL_RED, gl_type=GL_FLOAT, mgl_dtype="f4"),
    _F("RG16F", "RG16F", 0x822F, block_bytes=4, components=2, vk_format=83, dxgi_format=34,
       gl_format=GL_RG, gl_type=GL_HALF_FLOAT, mgl_dtype="f2"),
    _F("RG32UI", "RG32UI", 0x823C, block_bytes=8, components=2, vk_format=101, dxgi_format=17,
       mgl_dtype="u4"),
    _F("R11G11B10F", "R11G11B10F", 0x8C3A, block_bytes=4, components=3, vk_format=122,
       dxgi_format=26, gl_format=GL_RGB, gl_type=GL_UNSIGNED_INT_10F_11F_11F_REV),
    *_PACKED_AND_LUMINANCE,
    # Depth / stencil (block_bytes is the storage GL requires at minimum; drivers agree on these)
    _F("DEPTH16", "DEPTH", 0x81A5, block_bytes=2, components=1,
       gl_format=GL_DEPTH_COMPONENT, gl_type=GL_UNSIGNED_SHORT),
    _F("DEPTH24", "DEPTH", 0x81A6, block_bytes=4, components=1,
       gl_format=GL_DEPTH_COMPONENT, gl_type=GL_UNSIGNED_BYTE),
    _F("DEPTH32F", "DEPTH", 0x8CAC, block_bytes=4, components=1,
       gl_format=GL_DEPTH_COMPONENT, gl_type=GL_FLOAT, mgl_dtype="f4"),
    _F("DEPTH24_STENCIL8", "DEPTH", 0x88F0, block_bytes=4, components=2,
       gl_format=GL_DEPTH_STENCIL, gl_type=GL_UNSIGNED_INT_24_8),
    _F("DEPTH32F_STENCIL8", "DEPTH", 0x8CAD, block_bytes=8, components=2,
       gl_format=GL_DEPTH_STENCIL, gl_type=GL_FLOAT_32_UNSIGNED_INT_24_8_REV),
)

BY_NAME: dict[str, PixelFormat] = {f.name: f for f in FORMATS}
BY_VK: dict[int, PixelFormat] = {f.vk_format: f for f in FORMATS if f.vk_format is not None}
BY_DXGI: dict[int, PixelFormat] = {f.dxgi_format: f for f in FORMATS if f.dxgi_format is not None}
BCN_FAMILIES: tuple[str, ...] = ("BC1", "BC2", "BC3", "BC4", "BC5", "BC6H", "BC7")


def get(name: str) -> PixelFormat:
    """Look a format up by our name; raises KeyError naming the known ones."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown pixel format {name!r}; known: {', '.join(BY_NAME)}") from None
