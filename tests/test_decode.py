"""CPU decode: every block mode of BC1-BC5 by hand, and against texture2ddecoder.

Our BC1-BC5 arithmetic is llvmpipe's (tests/test_decode_gpu.py holds it to the driver);
texture2ddecoder rounds palette entries differently, so it agrees only within 2.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import texture2ddecoder
from texture_helpers import Ktx2Spec, build_ktx2, ktx2_for

from engine import textures
from engine.errors import UnsupportedFormatError
from engine.textures.decode import decode_image

RNG = np.random.default_rng(7)


def _random_blocks(n: int, size: int) -> bytes:
    return RNG.integers(0, 256, n * size, dtype=np.uint8).tobytes()


def _t2d(fn, data: bytes, w: int, h: int) -> np.ndarray:
    return np.frombuffer(fn(data, w, h), np.uint8).reshape(h, w, 4)[..., [2, 1, 0, 3]]


def _close(ours: np.ndarray, ref: np.ndarray) -> None:
    assert np.abs(ours.astype(int) - ref.astype(int)).max() <= 2


def _colour_block(c0: int, c1: int, indices: int) -> bytes:
    return struct.pack("<HHI", c0, c1, indices)


def _colour_modes(blocks: bytes, offset: int, size: int) -> np.ndarray:
    b = np.frombuffer(blocks, np.uint8).reshape(-1, size)
    c0 = b[:, offset].astype(int) | b[:, offset + 1].astype(int) << 8
    c1 = b[:, offset + 2].astype(int) | b[:, offset + 3].astype(int) << 8
    return c0 > c1


def test_bc1_matches_texture2ddecoder_colour_and_gl_alpha() -> None:
    data = _random_blocks(16 * 16, 8)
    ref = _t2d(texture2ddecoder.decode_bc1, data, 64, 64)
    rgb, rgba = decode_image("BC1_RGB", data, 64, 64), decode_image("BC1_RGBA", data, 64, 64)
    _close(rgb, ref)  # opaque black for punch-through, alpha 255
    punch = (ref[..., 3] == 255) & (rgba[..., 3] == 0)
    assert punch.any()
    _close(rgba[~punch], ref[~punch])
    assert (rgba[punch] == 0).all() and (ref[punch][:, :3] == 0).all()


def test_bc1_three_colour_mode_by_hand() -> None:
    block = _colour_block(0x0000, 0xFFFF, 0b11_10_01_00)  # row 0: indices 0, 1, 2, 3
    row = decode_image("BC1_RGBA", block, 4, 4)[0]
    assert row.tolist() == [[0, 0, 0, 255], [255, 255, 255, 255], [128, 128, 128, 255],
                            [0, 0, 0, 0]]


def test_bc3_colour_is_always_four_colour_mode() -> None:
    """color0 <= color1 must not switch BC3 (or BC2) to BC1's 3-colour mode."""
    block = b"\xff\xff" + bytes(6) + _colour_block(0x0000, 0xFFFF, 0b11_10_01_00)
    row = decode_image("BC3", block, 4, 4)[0]
    # llvmpipe's lerp: 255 * 85 >> 8 = 84, 255 * 170 >> 8 = 169
    assert row[:, :3].tolist() == [[0, 0, 0], [255, 255, 255], [84, 84, 84], [169, 169, 169]]
    assert (row[:, 3] == 255).all()


def test_bc3_matches_texture2ddecoder_on_four_colour_blocks() -> None:
    data = _random_blocks(16 * 16, 16)
    ours, ref = decode_image("BC3", data, 64, 64), _t2d(texture2ddecoder.decode_bc3, data, 64, 64)
    four = np.repeat(np.repeat(_colour_modes(data, 8, 16).reshape(16, 16), 4, 0), 4, 1)
    _close(ours[four], ref[four])
    _close(ours[..., 3], ref[..., 3])  # alpha: every mode


def test_bc2_explicit_alpha_and_four_colour() -> None:
    alpha = sum(i << (4 * i) for i in range(16))
    block = struct.pack("<Q", alpha) + _colour_block(0xFFFF, 0xFFFF, 0xFFFFFFFF)
    img = decode_image("BC2", block, 4, 4)
    assert img[..., 3].reshape(-1).tolist() == [17 * i for i in range(16)]
    assert (img[..., :3] == 255).all()  # c0 == c1, index 3: 4-colour mode, not black


@pytest.mark.parametrize("fmt,fn,size", [("BC4", texture2ddecoder.decode_bc4, 8),
                                         ("BC5", texture2ddecoder.decode_bc5, 16),
                                         ("BC7", texture2ddecoder.decode_bc7, 16),
                                         ("BC6H_UF", texture2ddecoder.decode_bc6, 16)])
def test_matches_texture2ddecoder(fmt: str, fn, size: int) -> None:
    data = _random_blocks(16 * 16, size)
    ours, ref = decode_image(fmt, data, 64, 64), _t2d(fn, data, 64, 64)
    if fmt == "BC6H_UF":  # reserved modes: texture2ddecoder gives alpha 0, GL alpha 1
        ours, ref = ours[..., :3], ref[..., :3]
    _close(ours, ref)
    if fmt.startswith(("BC4", "BC5")):
        assert (ours[..., 2] == 0).all() and (ours[..., 3] == 255).all()
        if fmt == "BC4":
            assert (ours[..., 1] == 0).all()


def test_bc4_snorm_by_hand() -> None:
    # r0=127 (1.0) > r1=-127 (-1.0): 8-value mode; row 0 indices 0, 1, 2, 7.
    eight = struct.pack("<bb", 127, -127) + (0 | 1 << 3 | 2 << 6 | 7 << 9).to_bytes(6, "little")
    row = decode_image("BC4_SNORM", eight, 4, 4)[0]
    # lerp(127, -127, w) = (127*256 - 254*w) >> 8: w=36 -> 91, w=218 -> -90 (floored)
    assert row[:, 0].tolist() == [255, 0, round((91 / 127 + 1) * 127.5),
                                  round((-90 / 127 + 1) * 127.5)]
    # r0=-128 <= r1=0: 6-value mode, index 6 = -1.0, index 7 = +1.0; -128 reads as -1.0 too
    six = struct.pack("<bb", -128, 0) + (0 | 6 << 3 | 7 << 6).to_bytes(6, "little")
    assert decode_image("BC4_SNORM", six, 4, 4)[0, :3, 0].tolist() == [0, 0, 255]
    assert decode_image("BC5_SNORM", eight + six, 4, 4)[0, 0].tolist() == [255, 0, 0, 255]


def test_crop_non_multiple_of_four() -> None:
    data = _random_blocks(2 * 3, 16)
    for fmt in ("BC2", "BC3", "BC5", "BC7"):
        full = decode_image(fmt, data, 8, 12)
        np.testing.assert_array_equal(decode_image(fmt, data, 5, 9), full[:9, :5])


def test_bc6h_signed_is_unsupported() -> None:
    with pytest.raises(UnsupportedFormatError, match="BC6H_SF"):
        decode_image("BC6H_SF", bytes(16), 4, 4)


def test_float_formats_clamp() -> None:
    px = np.array([[-1.0, 0.5, 2.0, 1.0]], np.float16).tobytes()
    assert decode_image("RGBA16F", px, 1, 1)[0, 0].tolist() == [0, 128, 255, 255]


def test_decode_layer_face_and_level_from_file(tmp_path: Path) -> None:
    data, images = ktx2_for("BC3", 16, 8, levels=3, layers=3)
    p = tmp_path / "a.ktx2"
    p.write_bytes(data)
    tex = textures.open(p)
    got = textures.decode_rgba(tex, level=1, layer=2)
    np.testing.assert_array_equal(got, decode_image("BC3", images[1][2], 8, 4))


def test_decode_3d_slice(tmp_path: Path) -> None:
    slices = [bytes([z]) * 4 * 4 * 4 for z in range(3)]
    p = tmp_path / "v.ktx2"
    p.write_bytes(build_ktx2(Ktx2Spec(37, 4, 4, [b"".join(slices)], depth=3)))
    tex = textures.open(p)
    assert tex.depth == 3
    assert (textures.decode_rgba(tex, z=2) == 2).all()
