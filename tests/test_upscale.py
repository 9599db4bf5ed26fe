"""The upscaler pass (bilinear and our FSR 1: EASU + RCAS) and its quality measurement."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.resolution import quality
from lab.upscale_quality import area_downsample, upscale_quality
from engine.resolution.upscale import Upscaler

PHOTO = Path(__file__).resolve().parents[1] / "assets" / "photos" / "astronaut.jpg"


def _test_image(size: int = 192) -> np.ndarray:
    """Anti-aliased detail a renderer makes: hard edges at many angles, thin lines, discs and
    smooth shading, drawn at 4x and area-downsampled (like a supersampled render)."""
    n = size * 4
    y, x = np.mgrid[0:n, 0:n] / n
    angle = np.arctan2(y - 0.5, x - 0.5)
    radius = np.hypot(x - 0.5, y - 0.5)
    spokes = (np.sin(angle * 24) > 0) & (radius < 0.45)
    rings = (np.sin(radius * 90) > 0.6) & (radius >= 0.45)
    disc = np.hypot(x - 0.2, y - 0.2) < 0.12
    r = np.where(spokes, 230, 40 + 120 * x)
    g = np.where(rings, 220, np.where(disc, 30, 60 + 100 * y))
    b = np.where(spokes | disc, 200, 90)
    big = np.stack([r, g, b], -1).astype(np.uint8)
    return area_downsample(big, (size, size))


def _present(device, mode: str, src: np.ndarray, out_size: tuple[int, int],
             viewport=None) -> np.ndarray:
    h, w = src.shape[:2]
    rgba = np.concatenate([src, np.full((h, w, 1), 255, np.uint8)], -1)
    src_tex = device.texture((w, h), 4, rgba.tobytes(), label="test.src")
    dst = device.texture(out_size, 4, label="test.dst")
    fbo = device.framebuffer([dst], label="test.fbo")
    upscaler = Upscaler(device, mode)
    try:
        fbo.use()
        fbo.clear(0.0, 0.0, 0.0, 0.0)
        upscaler.present(src_tex, (w, h), fbo, out_size, viewport)
        return np.frombuffer(fbo.read(components=4), np.uint8).reshape(out_size[1],
                                                                         out_size[0], 4)
    finally:
        upscaler.release()
        device.release(fbo)
        device.release(dst)
        device.release(src_tex)


@pytest.mark.parametrize("mode", ["bilinear", "fsr"])
def test_flat_colour_stays_exact(device, mode):
    """Kernel weights are normalised and RCAS has nothing to sharpen: flat in, flat out."""
    out = _present(device, mode, np.full((30, 40, 3), (64, 128, 192), np.uint8), (97, 71))
    assert (out[..., :3] == (64, 128, 192)).all() and (out[..., 3] == 255).all()


@pytest.mark.parametrize("mode", ["bilinear", "fsr"])
def test_viewport_is_the_only_area_written(device, mode):
    out = _present(device, mode, np.full((8, 8, 3), 200, np.uint8), (64, 48), (10, 5, 30, 20))
    inside = np.zeros((48, 64), bool)
    inside[5:25, 10:40] = True
    assert (out[inside][:, :3] == 200).all() and (out[~inside] == 0).all()


def test_fsr_intermediate_is_a_ledgered_target_reallocated_on_size_change(device):
    src = device.texture((16, 16), 4, label="test.src")
    dst = device.texture((64, 64), 4, label="test.dst")
    fbo = device.framebuffer([dst], label="test.fbo")
    upscaler = Upscaler(device, "fsr")
    try:
        before = device.ledger.category_total("target")
        upscaler.present(src, (16, 16), fbo, (64, 64))
        assert upscaler.nbytes == 64 * 64 * 4
        assert device.ledger.category_total("target") - before == 64 * 64 * 4
        upscaler.present(src, (16, 16), fbo, (64, 64), viewport=(0, 0, 32, 32))
        assert device.ledger.category_total("target") - before == 32 * 32 * 4
    finally:
        upscaler.release()
        device.release(fbo)
        device.release(dst)
        device.release(src)
    assert device.ledger.category_total("target") == before


def test_bad_arguments(device):
    with pytest.raises(ValueError, match="mode"):
        Upscaler(device, "lanczos")
    with pytest.raises(ValueError, match="sharpness"):
        Upscaler(device, "fsr", sharpness_stops=-1)


def test_area_downsample_preserves_the_mean():
    image = _test_image(96)
    small = area_downsample(image, (64, 64))  # a non-integer ratio (1.5)
    assert small.shape == (64, 64, 3)
    assert np.allclose(small.mean((0, 1)), image.mean((0, 1)), atol=0.5)


def test_quality_metrics():
    a = _test_image(64)
    assert quality.psnr(a, a) == float("inf") and quality.ssim(a, a) == pytest.approx(1.0)
    noisy = np.clip(a + np.random.default_rng(1).normal(0, 8, a.shape), 0, 255).astype(np.uint8)
    assert 25 < quality.psnr(a, noisy) < 35 and 0 < quality.ssim(a, noisy) < 0.99


def _by_mode(rows: list[dict], scale: float) -> dict[str, dict]:
    return {r["mode"]: r for r in rows if r["scale"] == scale}


def test_fsr_beats_bilinear_on_a_synthetic_render(device):
    rows = _by_mode(upscale_quality(device, _test_image(), scales=(0.5,)), 0.5)
    assert rows["fsr"]["psnr"] > rows["bilinear"]["psnr"]
    assert rows["fsr"]["ssim"] > rows["bilinear"]["ssim"]


@pytest.mark.slow
def test_fsr_beats_bilinear_on_a_photo(device):
    if not PHOTO.is_file():
        pytest.skip(f"{PHOTO} not present")
    from PIL import Image
    image = np.asarray(Image.open(PHOTO).convert("RGB"))
    rows = upscale_quality(device, image)
    for scale in (0.67, 0.5):
        by = _by_mode(rows, scale)
        assert by["fsr"]["psnr"] > by["bilinear"]["psnr"] + 1.0  # measured: +1.9 / +1.7 dB
        assert by["fsr"]["ssim"] > by["bilinear"]["ssim"]
