"""DDS reader against the headers real writers produce (Pillow, texconv, NVTT, ImageMagick)."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from texture_helpers import (
    assert_open_refuses,
    DDPF_ALPHAPIXELS,
    DDPF_RGB,
    DDSD_MIPMAPCOUNT,
    DdsSpec,
    build_dds,
    legacy_dds,
    rgba_image,
    texconv_dds,
)

from engine import textures
from engine.errors import TextureFormatError, UnsupportedFormatError
from engine.memory.sizes import level_bytes


def _write(tmp_path: Path, data: bytes, name: str = "t.dds") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("pixel_format,fmt", [("DXT1", "BC1_RGBA"), ("DXT3", "BC2"),
                                              ("DXT5", "BC3"), ("BC2", "BC2"), ("BC3", "BC3"),
                                              ("BC5", "BC5"), (None, "BGRA8")])
def test_pillow_written(tmp_path: Path, pixel_format: str | None, fmt: str) -> None:
    """Pillow: legacy FourCC for DXTn, DX10 *_TYPELESS for BC2/3/5, BGRA masks otherwise;
    its dwPitchOrLinearSize is not the real size, which must not matter."""
    mode = "RGB" if pixel_format == "BC5" else "RGBA"
    img = Image.fromarray(rgba_image(20, 12)).convert(mode)
    p = tmp_path / "pil.dds"
    img.save(p, **({"pixel_format": pixel_format} if pixel_format else {}))
    tex = textures.open(p)
    assert (tex.container, tex.format, tex.width, tex.height, len(tex.levels)) == (
        "dds", fmt, 20, 12, 1)
    ours = textures.decode_rgba(tex)
    pil = np.asarray(Image.open(p).convert("RGBA")).astype(int)
    if fmt == "BC5":  # Pillow decodes BC5 as RGB: compare the two channels
        ours, pil = ours[..., :2], pil[..., :2]
    # Pillow's palette rounding is not llvmpipe's (ours): within 2, exact when uncompressed.
    assert np.abs(ours.astype(int) - pil).max() <= (0 if fmt == "BGRA8" else 2)


@pytest.mark.parametrize("dxgi,fmt", [(98, "BC7"), (99, "BC7_SRGB"), (72, "BC1_RGBA_SRGB"),
                                      (95, "BC6H_UF"), (80, "BC4"), (28, "RGBA8"),
                                      (87, "BGRA8")])
def test_texconv_dx10_mips(tmp_path: Path, dxgi: int, fmt: str) -> None:
    data, imgs = texconv_dds(dxgi, fmt, 40, 24, levels=6)
    tex = textures.open(_write(tmp_path, data))
    assert (tex.format, tex.extra["dxgi_format"], len(tex.levels)) == (fmt, dxgi, 6)
    for lv in tex.levels:
        assert lv.nbytes == level_bytes(fmt, lv.width, lv.height)
        assert tex.read_level(lv.index) == imgs[lv.index][0]


def test_texconv_array_and_cube_layout(tmp_path: Path) -> None:
    """DDS is layer/face-major (each a full chain); read_level_all returns KTX2 order."""
    data, imgs = texconv_dds(98, "BC7", 16, 16, levels=3, array=2, cube=True)
    tex = textures.open(_write(tmp_path, data))
    assert (tex.layers, tex.faces, tex.is_array, tex.is_cube) == (2, 6, True, True)
    for lv in tex.levels:
        assert tex.read_level(lv.index, layer=1, face=3) == imgs[lv.index][6 + 3]
        assert tex.read_level_all(lv.index) == b"".join(imgs[lv.index])
        assert lv.nbytes == 12 * lv.image_nbytes


@pytest.mark.parametrize("fourcc,fmt", [(b"DXT1", "BC1_RGBA"), (b"DXT2", "BC2"),
                                        (b"DXT3", "BC2"), (b"DXT4", "BC3"), (b"DXT5", "BC3"),
                                        (b"ATI1", "BC4"), (b"BC4U", "BC4"),
                                        (b"BC4S", "BC4_SNORM"), (b"ATI2", "BC5"),
                                        (b"BC5U", "BC5"), (b"BC5S", "BC5_SNORM")])
def test_legacy_fourcc_with_mips(tmp_path: Path, fourcc: bytes, fmt: str) -> None:
    """NVTT writes ATI2 for BC5; ImageMagick DXTn with DDSD_LINEARSIZE and a mip count."""
    data, imgs = legacy_dds(fourcc, fmt, 33, 17, levels=6)
    tex = textures.open(_write(tmp_path, data))
    assert tex.format == fmt and tex.extra["fourcc"] == fourcc.decode()
    assert [lv.width for lv in tex.levels] == [33, 16, 8, 4, 2, 1]
    for lv in tex.levels:
        assert tex.read_level(lv.index) == imgs[lv.index][0]


def test_legacy_cube(tmp_path: Path) -> None:
    data, imgs = legacy_dds(b"DXT5", "BC3", 8, 8, levels=4, cube=True)
    tex = textures.open(_write(tmp_path, data))
    assert tex.faces == 6 and tex.layers == 1 and not tex.is_array
    assert tex.read_level(2, face=5) == imgs[2][5]


def test_partial_cube_is_an_error(tmp_path: Path) -> None:
    raw = bytearray(legacy_dds(b"DXT5", "BC3", 8, 8, cube=True)[0])
    struct.pack_into("<I", raw, 4 + 108, 0x200 | 0x400 | 0x800)  # dwCaps2: +X, -X only
    with pytest.raises(TextureFormatError, match="partial cube"):
        textures.open(_write(tmp_path, bytes(raw)))


def test_mip_count_ignored_without_flag_and_garbage_pitch(tmp_path: Path) -> None:
    raw = bytearray(legacy_dds(b"DXT1", "BC1_RGBA", 16, 16, levels=5, pitch=0xDEADBEEF)[0])
    flags = struct.unpack_from("<I", raw, 8)[0]
    struct.pack_into("<I", raw, 8, flags & ~DDSD_MIPMAPCOUNT)
    assert len(textures.open(_write(tmp_path, bytes(raw))).levels) == 1


@pytest.mark.parametrize("masks,fmt", [((0xFF, 0xFF00, 0xFF0000, 0xFF000000), "RGBA8"),
                                       ((0xFF0000, 0xFF00, 0xFF, 0xFF000000), "BGRA8")])
def test_uncompressed_masks(tmp_path: Path, masks: tuple, fmt: str) -> None:
    img = rgba_image(5, 3)
    payload = img.tobytes() if fmt == "RGBA8" else img[..., [2, 1, 0, 3]].tobytes()
    spec = DdsSpec(5, 3, payload, pf_flags=DDPF_RGB | DDPF_ALPHAPIXELS, bitcount=32,
                   masks=masks, pitch=20)
    tex = textures.open(_write(tmp_path, build_dds(spec)))
    assert tex.format == fmt
    np.testing.assert_array_equal(textures.decode_rgba(tex), img)


def test_24bit_rgb_reads_as_rgba8(tmp_path: Path) -> None:
    """D3DFMT_R8G8B8 (bytes B, G, R): no driver keeps 3-byte texels, so it is repacked on read
    into RGBA8 with alpha 255; the level sizes are RGBA8's, the stored sizes the file's."""
    img = rgba_image(5, 3)
    spec = DdsSpec(5, 3, img[..., [2, 1, 0]].tobytes(), pf_flags=DDPF_RGB, bitcount=24,
                   masks=(0xFF0000, 0xFF00, 0xFF, 0), pitch=15)
    tex = textures.open(_write(tmp_path, build_dds(spec)))
    assert (tex.format, tex.levels[0].nbytes, tex.levels[0].stored_nbytes) == ("RGBA8", 60, 45)
    expected = img.copy()
    expected[..., 3] = 255
    np.testing.assert_array_equal(textures.decode_rgba(tex), expected)


def test_inspect_dds(tmp_path: Path) -> None:
    info = textures.inspect(_write(tmp_path, texconv_dds(99, "BC7_SRGB", 8, 8, levels=4)[0]))
    assert info["container"] == "dds" and info["dxgi_format"] == 99 and info["fourcc"] == "DX10"
    assert [lv["uncompressed_bytes"] for lv in info["levels"]] == [64, 16, 16, 16]


def _patch(data: bytes, offset: int, value: int) -> bytes:
    raw = bytearray(data)
    struct.pack_into("<I", raw, offset, value)
    return bytes(raw)


_DX10 = texconv_dds(98, "BC7", 8, 8, levels=4)[0]
_LEGACY = legacy_dds(b"DXT5", "BC3", 8, 8, levels=4)[0]
HOSTILE = {
    "magic": (b"DDX " + _LEGACY[4:], TextureFormatError),
    "truncated header": (_LEGACY[:100], TextureFormatError),
    "truncated DX10 header": (_DX10[:140], TextureFormatError),
    "truncated pixels": (_LEGACY[:-1], TextureFormatError),
    "header size": (_patch(_LEGACY, 4, 123), TextureFormatError),
    "width 0": (_patch(_LEGACY, 16, 0), TextureFormatError),
    "height huge": (_patch(_LEGACY, 12, 1 << 31), TextureFormatError),
    "mip count absurd": (_patch(_LEGACY, 28, 40), TextureFormatError),
    "array size huge": (_patch(_DX10, 128 + 12, 1 << 30), TextureFormatError),
    "resource dimension": (_patch(_DX10, 128 + 4, 9), TextureFormatError),
    "unknown dxgi": (_patch(_DX10, 128, 190), UnsupportedFormatError),
    "unknown fourcc": (_patch(_LEGACY, 84, int.from_bytes(b"ETC1", "little")),
                       UnsupportedFormatError),
    "RGB bitcount 12": (build_dds(DdsSpec(4, 4, bytes(24), pf_flags=DDPF_RGB, bitcount=12,
                                          masks=(0xF00, 0xF0, 0xF, 0))), TextureFormatError),
    "RGB mask with a hole": (build_dds(DdsSpec(4, 4, bytes(64), pf_flags=DDPF_RGB, bitcount=32,
                                               masks=(0xFF00FF, 0xFF00, 0, 0))),
                             TextureFormatError),
    "3:3:2 has no exact GL format": (build_dds(DdsSpec(4, 4, bytes(16), pf_flags=DDPF_RGB,
                                                       bitcount=8, masks=(0xE0, 0x1C, 0x3, 0))),
                                     UnsupportedFormatError),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile(tmp_path: Path, case: str) -> None:
    data, exc = HOSTILE[case]
    assert_open_refuses(_write(tmp_path, data), exc)
