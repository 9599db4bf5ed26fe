"""Bake inputs beyond 8 bits, and opacity, as issue 15 found them broken:

- a 16-bit grayscale PNG was clipped to 255 (black and white) with PSNR inf;
- a float TIFF became all black with PSNR inf;
- an opaque photograph baked to BC7 came back with alpha 254 in a third of its texels.

Each example is baked here through the public entry points and checked on the decoded file.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import engine.textures
from engine.errors import TextureFormatError
from engine.cli import main as cli_main
from engine.textures.bake import bake_file, bake_image, load_rgba
from engine.textures.bake_plan import FORMAT_CHOICES
from engine.textures.decode import decode_image
from engine.textures.encode import _as_blocks, _bc7_modes, encode_image, force_opaque_bc7, pad_to_blocks
from engine.textures.mipgen import linear_to_srgb, quantize_unorm8
from engine.textures.quality import psnr
from engine.textures.source_image import read_image, scale_16_to_8, to_target, tonemap

PHOTOS = Path(__file__).resolve().parent.parent / "assets" / "photos"


def _gray16(h: int = 64, w: int = 96) -> np.ndarray:
    """A 16-bit ramp over the whole range, with values between the 8-bit steps."""
    ramp = np.linspace(0, 65535, w * h).reshape(h, w)
    return np.rint(ramp).astype(np.uint16)


@pytest.fixture
def gray16_png(tmp_path: Path) -> tuple[Path, np.ndarray]:
    values = _gray16()
    path = tmp_path / "height16.png"
    image = Image.fromarray(values)  # Pillow picks "I;16" for uint16
    assert image.mode == "I;16"
    image.save(path)
    return path, values


@pytest.fixture
def float_tiff(tmp_path: Path) -> tuple[Path, np.ndarray]:
    y, x = np.mgrid[0:48, 0:80]
    values = ((x / 79.0) * 0.8 + (y / 47.0) * 0.2).astype(np.float32)  # linear light in [0, 1]
    path = tmp_path / "light.tif"
    image = Image.fromarray(values)  # "F" for float32
    assert image.mode == "F"
    image.save(path)
    return path, values


# ------------------------------------------------------------------- 16-bit grayscale PNG
def test_16bit_gray_png_is_read_at_16_bits(gray16_png):
    path, values = gray16_png
    src = read_image(path)
    assert src.kind == "16-bit"
    assert np.array_equal(src.pixels[..., 0], values)
    assert (src.pixels[..., 3] == 65535).all()


def test_16bit_gray_png_is_scaled_with_rounding_not_clipped(gray16_png, tmp_path):
    path, values = gray16_png
    result = bake_file(path, tmp_path / "out", "rgba8", srgb=False)
    got = engine.textures.decode_rgba(engine.textures.open(result.output), 0)
    expected = ((values.astype(np.int64) * 255 + 32767) // 65535).astype(np.uint8)
    assert np.array_equal(got[..., 0], expected)
    assert np.array_equal(got[..., 0], got[..., 2])
    assert len(np.unique(got[..., 0])) == 256  # a full ramp, not black and white
    # PSNR against the 16-bit input: only the 8-bit rounding is lost, so finite and high
    # (a uniform rounding error of +-0.5/255 is about 58.9 dB).
    assert math.isfinite(result.psnr_db)
    assert 55.0 < result.psnr_db < 62.0
    assert load_rgba(path)[..., 0].tolist() == expected.tolist()


def test_16bit_gray_png_to_bc7_keeps_the_ramp(gray16_png, tmp_path):
    path, values = gray16_png
    result = bake_file(path, tmp_path / "out", "bc7", srgb=False)
    got = engine.textures.decode_rgba(engine.textures.open(result.output), 0)[..., 0]
    assert np.abs(got.astype(int) - scale_16_to_8(values)).max() <= 8
    assert len(np.unique(got)) > 200
    assert math.isfinite(result.psnr_db) and result.psnr_db > 40.0


def test_16bit_input_exactly_representable_scores_inf(tmp_path):
    """inf only when the texture truly holds the input: 16-bit multiples of 257 are bytes."""
    values = (np.arange(256, dtype=np.uint16) * 257).reshape(16, 16)
    exact = bake_image(values, tmp_path / "exact.ktx2", "rgba8", srgb=False)
    assert exact.psnr_db == float("inf")
    off = values.copy()
    off[3, 3] += 1
    near = bake_image(off, tmp_path / "near.ktx2", "rgba8", srgb=False)
    assert math.isfinite(near.psnr_db) and near.psnr_db > 100.0


def test_scale_16_to_8_rounds_to_nearest():
    v = np.arange(65536, dtype=np.uint16)
    got = scale_16_to_8(v).astype(np.float64)
    assert np.abs(got - v / 257.0).max() <= 0.5 + 1e-9
    assert scale_16_to_8(np.array([0, 128, 129, 65535], np.uint16)).tolist() == [0, 0, 1, 255]


# ------------------------------------------------------------------- 16-bit colour PNG
def _write_png16(path: Path, rgb: np.ndarray) -> None:
    """A 16-bit RGB(A) PNG written by hand (Pillow cannot write one): filter 0 rows."""
    import struct
    import zlib

    h, w, c = rgb.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    rows = b"".join(b"\x00" + rgb[y].astype(">u2").tobytes() for y in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, 16, {3: 2, 4: 6}[c], 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


@pytest.fixture
def rgb16_png(tmp_path: Path) -> tuple[Path, np.ndarray]:
    y, x = np.mgrid[0:32, 0:48]
    rgb = np.stack([x * 1365, y * 2113, (x * y * 37) % 65536], -1).astype(np.uint16)
    path = tmp_path / "wide.png"
    _write_png16(path, rgb)
    return path, rgb


def test_16bit_colour_png_is_read_at_16_bits_with_the_hdr_extra(rgb16_png, tmp_path):
    pytest.importorskip("imagecodecs")
    path, rgb = rgb16_png
    src = read_image(path)
    assert src.kind == "16-bit" and np.array_equal(src.pixels[..., :3], rgb)
    result = bake_file(path, tmp_path / "out", "rgba8", srgb=False)
    got = engine.textures.decode_rgba(engine.textures.open(result.output), 0)
    assert np.array_equal(got[..., :3], scale_16_to_8(rgb))  # rounded, not Pillow's high byte
    assert (scale_16_to_8(rgb) != (rgb >> 8)).any()  # the two really differ on this image
    assert 55.0 < result.psnr_db < 62.0


def test_16bit_colour_png_without_the_extra_falls_back_to_8_bits(rgb16_png, monkeypatch,
                                                                   caplog):
    from engine.textures import source_image

    monkeypatch.setattr(source_image, "_imagecodecs", lambda: None)
    path, rgb = rgb16_png
    with caplog.at_level("WARNING"):
        src = read_image(path)
    assert src.kind == "8-bit" and np.array_equal(src.pixels[..., :3], rgb >> 8)
    assert "16-bit colour" in caplog.text


def test_rgb_float_tiff_and_radiance_hdr(tmp_path):
    codecs = pytest.importorskip("imagecodecs")
    rng = np.random.default_rng(3)
    light = (rng.random((24, 40, 3)) * 6.0).astype(np.float32)
    tif = tmp_path / "light.tif"
    tif.write_bytes(codecs.tiff_encode(light, photometric="rgb"))
    src = read_image(tif)
    assert src.kind == "float" and np.array_equal(src.pixels[..., :3], light)
    hdr = tmp_path / "sky.hdr"
    hdr.write_bytes(codecs.rgbe_encode(light))
    sky = read_image(hdr)
    assert sky.kind == "float"
    # RGBE: 8-bit mantissas under one shared exponent, so each channel is within a step of
    # the pixel's largest channel / 128.
    err = np.abs(sky.pixels[..., :3] - light)
    assert (err <= light.max(axis=-1, keepdims=True) / 128 + 1e-6).all()
    with pytest.raises(TextureFormatError, match="--tonemap"):
        bake_file(hdr, tmp_path / "out", "bc7")
    result = bake_file(hdr, tmp_path / "out", "rgba8", tonemap="aces")
    got = engine.textures.decode_rgba(engine.textures.open(result.output), 0)
    assert np.array_equal(got[..., :3], quantize_unorm8(linear_to_srgb(
        tonemap(sky.pixels[..., :3], "aces"))))
    assert math.isfinite(result.psnr_db) and result.psnr_db > 40.0
    (tmp_path / "big.hdr").write_bytes(b"#?RADIANCE\n\n-Y 99999999 +X 99999999\n")
    with pytest.raises(TextureFormatError, match="refused"):
        read_image(tmp_path / "big.hdr")


def test_multichannel_float_tiff_without_the_extra_is_refused(tmp_path, monkeypatch):
    from engine.textures import source_image

    codecs = pytest.importorskip("imagecodecs")
    tif = tmp_path / "light.tif"
    tif.write_bytes(codecs.tiff_encode(np.ones((8, 8, 3), np.float32), photometric="rgb"))
    monkeypatch.setattr(source_image, "_imagecodecs", lambda: None)
    with pytest.raises(TextureFormatError, match="light.tif"):
        read_image(tif)


# ------------------------------------------------------------------- float TIFF
def test_float_tiff_is_linear_light_encoded_to_srgb(float_tiff, tmp_path):
    path, values = float_tiff
    assert read_image(path).kind == "float"
    result = bake_file(path, tmp_path / "out", "rgba8")  # default: sRGB colour
    assert result.format == "RGBA8_SRGB"
    got = engine.textures.decode_rgba(engine.textures.open(result.output), 0)
    assert np.array_equal(got[..., 0], quantize_unorm8(linear_to_srgb(values)))
    assert got[..., :3].mean() > 100  # not black
    assert (got[..., 3] == 255).all()
    assert math.isfinite(result.psnr_db) and result.psnr_db > 40.0


def test_float_tiff_linear_target_stores_values(float_tiff, tmp_path):
    path, values = float_tiff
    result = bake_file(path, tmp_path / "out", "rgba8", srgb=False)
    got = engine.textures.decode_rgba(engine.textures.open(result.output), 0)
    assert np.array_equal(got[..., 1], quantize_unorm8(values))
    # Scored against the float input: the 8-bit rounding alone, ~59 dB.
    assert 55.0 < result.psnr_db < 62.0


def test_float_tiff_to_bc7_psnr_is_against_the_input(float_tiff, tmp_path):
    path, values = float_tiff
    result = bake_file(path, tmp_path / "out", "bc7")
    got = engine.textures.decode_rgba(engine.textures.open(result.output), 0)
    # Recompute the score the baker reports: decoded sRGB bytes -> linear vs the input.
    from engine.textures.mipgen import srgb_to_linear
    err = srgb_to_linear(got[..., :3]).astype(np.float64) - values[..., None]
    expected = 10 * np.log10(1.0 / np.mean(err ** 2))
    assert result.psnr_db == pytest.approx(expected, abs=0.01)
    assert 30.0 < result.psnr_db < 80.0


def test_hdr_float_refused_without_a_tone_map(tmp_path):
    hdr = np.full((8, 8, 3), 4.0, np.float32)
    hdr[:4] = 0.25
    with pytest.raises(TextureFormatError, match="--tonemap"):
        bake_image(hdr, tmp_path / "hdr.ktx2", "bc7")
    assert not (tmp_path / "hdr.ktx2").exists()


@pytest.mark.parametrize("op", ["reinhard", "aces", "clamp"])
def test_hdr_float_with_a_tone_map(tmp_path, op):
    y, x = np.mgrid[0:16, 0:16]
    hdr = np.stack([x * 0.5, y * 0.25, np.full_like(x, 0.1, dtype=float)], -1).astype(np.float32)
    result = bake_image(hdr, tmp_path / f"{op}.ktx2", "rgba8", srgb=False, tonemap=op)
    got = engine.textures.decode_rgba(engine.textures.open(result.output), 0)
    assert np.array_equal(got[..., :3], quantize_unorm8(tonemap(hdr, op)))
    assert math.isfinite(result.psnr_db)
    if op == "reinhard":  # every HDR value keeps its own level: monotone, no clipping
        assert len(np.unique(got[0, :, 0])) == 16


def test_negative_and_nan_floats_are_refused(tmp_path):
    neg = np.full((4, 4), -0.5, np.float32)
    with pytest.raises(TextureFormatError, match="negative"):
        bake_image(neg, tmp_path / "neg.ktx2", "rgba8", srgb=False)
    ramp = np.linspace(-0.5, 0.7, 16, dtype=np.float32).reshape(4, 4)
    clamped = bake_image(ramp, tmp_path / "neg.ktx2", "rgba8", srgb=False, tonemap="clamp")
    got = engine.textures.decode_rgba(engine.textures.open(clamped.output), 0)[..., 0]
    assert np.array_equal(got, quantize_unorm8(np.clip(ramp, 0.0, 1.0)))
    # Scored against the clamped values (the tone map the user chose): the rounding alone.
    assert math.isfinite(clamped.psnr_db) and clamped.psnr_db > 50.0
    nan = np.zeros((4, 4), np.float32)
    nan[1, 1] = np.nan
    with pytest.raises(TextureFormatError, match="NaN"):
        bake_image(nan, tmp_path / "nan.ktx2", "rgba8", tonemap="clamp")


def test_float_normal_map_in_minus_one_to_one_is_mapped(tmp_path):
    n = np.zeros((8, 8, 3), np.float32)
    n[..., 2] = 1.0
    n[:, :4, 0], n[:, :4, 2] = -0.6, 0.8
    result = bake_image(n, tmp_path / "n.ktx2", "rgba8", srgb=False, normal_map=True)
    got = engine.textures.decode_rgba(engine.textures.open(result.output), 0)
    assert got[0, 0, :3].tolist() == [51, 128, 230]  # round((n + 1) / 2 * 255)
    assert got[0, 7, :3].tolist() == [128, 128, 255]


def test_to_target_reference_keeps_input_precision():
    values = _gray16(8, 8)
    from engine.textures.source_image import from_array
    t = to_target(from_array(values), "BC7_SRGB", srgb=True)
    assert t.reference is not None and t.reference.dtype == np.uint16
    assert np.array_equal(t.reference[..., 1], values)


def test_cli_help_documents_input_conversion(capsys):
    assert cli_main(["bake", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--tonemap" in text and "rounding" in text and "linear light" in text


def test_cli_tonemap_bakes_an_hdr_float_tiff(tmp_path, capsys):
    path = tmp_path / "sun.tif"
    Image.fromarray(np.linspace(0, 20, 64 * 64, dtype=np.float32).reshape(64, 64)).save(path)
    assert cli_main(["bake", str(path), "-o", str(tmp_path / "a"), "--no-progress", "--jobs", "1"]) == 1
    assert "--tonemap" in capsys.readouterr().err
    assert cli_main(["bake", str(path), "-o", str(tmp_path / "b"), "--no-progress", "--jobs", "1",
                      "--tonemap", "reinhard", "--format", "bc7"]) == 0
    assert (tmp_path / "b" / "sun.ktx2").exists()
    assert "inf" not in capsys.readouterr().out


# ------------------------------------------------------------------- opaque stays opaque
@pytest.fixture(scope="module")
def opaque_photo() -> np.ndarray:
    img = load_rgba(PHOTOS / "coffee.jpg")[:128, :160]
    assert (img[..., 3] == 255).all()
    return np.ascontiguousarray(img)


@pytest.mark.parametrize("fmt", FORMAT_CHOICES)
def test_opaque_photo_stays_exactly_opaque_in_every_format(opaque_photo, tmp_path, fmt):
    if fmt in ("uastc", "etc1s"):  # Basis outputs, read back through their BC7 transcode
        from engine.textures import basis
        if not (basis.encoder_available() and basis.available()):
            pytest.skip("Basis encoder/transcoder not installed")
    result = bake_image(opaque_photo, tmp_path / f"{fmt}.ktx2", fmt)
    tf = engine.textures.open(result.output)
    for level in range(len(tf.levels)):
        alpha = engine.textures.decode_rgba(tf, level)[..., 3]
        assert (alpha == 255).all(), (fmt, level, float((alpha != 255).mean()))
    assert math.isfinite(result.psnr_db) or fmt == "rgba8"


def test_bc7_opaque_fix_is_needed_and_cheap():
    """etcpak alone leaves alpha 254 in many texels of a photo (its mode-6 p-bits); ours
    leaves none and loses little colour quality."""
    import etcpak

    img = pad_to_blocks(load_rgba(PHOTOS / "coffee.jpg"))
    h, w = img.shape[:2]
    raw = etcpak.compress_bc7(img.tobytes(), w, h, None)
    raw_dec = decode_image("BC7", raw, w, h)
    assert (raw_dec[..., 3] == 254).mean() > 0.1  # the bug this guards against is real
    ours = encode_image(img, "BC7")
    dec = decode_image("BC7", ours, w, h)
    assert (dec[..., 3] == 255).all()
    assert psnr(dec, img, (0, 1, 2)) > psnr(raw_dec, img, (0, 1, 2)) - 0.2  # measured +0.07
    modes = _bc7_modes(np.frombuffer(ours, np.uint8).reshape(-1, 16))
    assert set(modes.tolist()) <= {1, 6}


def test_bc7_keeps_opaque_blocks_opaque_next_to_transparent_ones():
    img = load_rgba(PHOTOS / "chelsea.jpg")[:64, :64].copy()
    img[:32, :32, 3] = 100  # one quarter translucent: the image is not opaque as a whole
    dec = decode_image("BC7", encode_image(img, "BC7"), 64, 64)
    opaque = np.ones((64, 64), bool)
    opaque[:32, :32] = False
    assert (dec[..., 3][opaque] == 255).all()
    assert np.abs(dec[:32, :32, 3].astype(int) - 100).max() <= 2


@pytest.mark.parametrize("mode", [4, 5, 6, 7])
def test_force_opaque_bc7_every_alpha_mode(mode):
    """Blocks of each alpha-carrying mode (translucent, so their alpha is not 255) come out
    decoding alpha 255; modes 4/5 without rotation and mode 6 keep their colour (6: within
    one step), the rest are re-encoded from their own colour."""
    import etcpak

    img = load_rgba(PHOTOS / "coffee.jpg")[:128, :128].copy()
    y, x = np.mgrid[0:128, 0:128]
    img[..., 3] = 60 + (x + y) % 190
    params = etcpak.BC7CompressBlockParams()
    params.m_mode_mask = 1 << mode
    data = etcpak.compress_bc7(img.tobytes(), 128, 128, params)
    modes = _bc7_modes(np.frombuffer(data, np.uint8).reshape(-1, 16))
    assert (modes == mode).any()
    before = _as_blocks(decode_image("BC7", data, 128, 128))
    after = _as_blocks(decode_image("BC7", force_opaque_bc7(data), 128, 128))
    assert (before[..., 3] < 255).any() and (after[..., 3] == 255).all()
    lo = np.frombuffer(data, np.uint8).reshape(-1, 16)[:, 0]
    rotation = np.where(modes == 4, (lo >> 5) & 3, (lo >> 6) & 3)
    keep = ((modes == 4) | (modes == 5)) & (rotation == 0)
    assert np.array_equal(after[keep][..., :3], before[keep][..., :3])
    six = modes == 6
    assert np.abs(after[six][..., :3].astype(int) - before[six][..., :3]).max(initial=0) <= 1


def test_bc1_rgba_opaque_texels_stay_opaque():
    img = load_rgba(PHOTOS / "rocket.jpg")[:64, :64].copy()
    img[10:20, 10:20, 3] = 0
    img[40:, :, :3] = 90  # flat opaque blocks (color0 == color1 is where BC1 turns 3-colour)
    dec = decode_image("BC1_RGBA", encode_image(img, "BC1_RGBA"), 64, 64)
    assert (dec[..., 3][img[..., 3] == 255] == 255).all()


@pytest.mark.needs("BC7 sampling")
def test_opaque_bc7_on_the_gpu(device, opaque_photo, tmp_path):
    """What llvmpipe samples from the baked BC7 file is opaque in every texel."""
    from engine.gl.upload import upload_texture_file

    result = bake_image(opaque_photo, tmp_path / "gpu.ktx2", "bc7")
    tf = engine.textures.open(result.output)
    tex = upload_texture_file(device, tf, label="opaque-bc7")
    try:
        lv = tf.levels[0]
        gpu = np.frombuffer(device.commands.read_level(tex, 0, rgba8=True), np.uint8)
        gpu = gpu.reshape(-1, lv.width, 4)[: lv.height]
        assert (gpu[..., 3] == 255).all()
        assert np.array_equal(gpu, engine.textures.decode_rgba(tf, 0))
    finally:
        device.release(tex)
