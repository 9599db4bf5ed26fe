"""Upscaler quality benchmark: how much of a native render bilinear and FSR win back.

A low-resolution render is simulated by area-downsampling a high-quality native image (each
low-res pixel is the exact average of the native area it covers, like a supersampled render
at that resolution). It is uploaded, upscaled to native size on the GPU, read back and scored
against the native image with `quality.psnr` / `quality.ssim`.

Run `python -m lab.upscale_quality [image ...]` for the table (defaults to
assets/photos/*.jpg).
"""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import numpy as np

from engine.memory.ledger import Category
from engine import assets

from engine.gl.device import Device
from engine.resolution import quality
from engine.resolution.upscale import MODES, Upscaler

log = logging.getLogger(__name__)

PHOTOS = assets.PHOTOS


def _area_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) weights: output pixel i covers input interval [i, i+1) * n_in / n_out;
    each weight is the covered length of an input pixel, rows normalised to sum to 1."""
    edges = np.arange(n_out + 1) * (n_in / n_out)
    lo, hi = edges[:-1, None], edges[1:, None]
    pix = np.arange(n_in)[None, :]
    overlap = np.clip(np.minimum(hi, pix + 1) - np.maximum(lo, pix), 0.0, None)
    return overlap / overlap.sum(axis=1, keepdims=True)


def area_downsample(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Exact area (box-coverage) resampling of an (H, W, C) uint8 image to size = (w, h),
    for any ratio: two matrix products, no Python loops."""
    w, h = size
    rows = _area_matrix(image.shape[0], h)
    cols = _area_matrix(image.shape[1], w)
    out = np.einsum("yi,ixc,wx->ywc", rows, image.astype(np.float64), cols, optimize=True)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _rgba(image: np.ndarray) -> np.ndarray:
    if image.ndim != 3 or image.shape[2] not in (3, 4) or image.dtype != np.uint8:
        raise ValueError(f"need an (H, W, 3|4) uint8 image, got {image.shape} {image.dtype}")
    if image.shape[2] == 4:
        return np.ascontiguousarray(image)
    alpha = np.full(image.shape[:2] + (1,), 255, np.uint8)
    return np.ascontiguousarray(np.concatenate([image, alpha], axis=2))


def upscale_quality(device: Device, image: np.ndarray, scales: tuple[float, ...] = (0.67, 0.5),
                    modes: tuple[str, ...] = MODES,
                    sharpness_stops: float | None = None) -> list[dict]:
    """For each scale and mode: PSNR (dB, RGB) and SSIM (luma) of the upscaled image against
    `image`, plus the GPU pass time in ms. `sharpness_stops` None keeps the FSR default.

    Rows are read back in GL order (bottom first) for both the upload and the read, so the
    comparison needs no flip.
    """
    native = _rgba(image)
    height, width = native.shape[:2]
    dst = device.texture((width, height), 4, category=Category.TARGET, label="bench.native")
    fbo = None
    results: list[dict] = []
    try:
        fbo = device.framebuffer([dst], label="bench.native_fbo")
        for mode in modes:
            kw = {} if sharpness_stops is None else {"sharpness_stops": sharpness_stops}
            upscaler = Upscaler(device, mode, label=f"bench.{mode}", **kw)
            try:
                for scale in scales:
                    results.append(_measure(device, upscaler, native, scale, fbo))
            finally:
                upscaler.release()
    finally:
        device.release(fbo)
        device.release(dst)
    return results


def _measure(device: Device, upscaler: Upscaler, native: np.ndarray, scale: float,
             fbo) -> dict:
    height, width = native.shape[:2]
    low_size = max(1, round(width * scale)), max(1, round(height * scale))
    low = area_downsample(native, low_size)
    src = device.texture(low_size, 4, low.tobytes(), label="bench.low")
    try:
        upscaler.present(src, low_size, fbo, (width, height))  # warm-up: compiles, allocates
        device.finish()
        start = time.perf_counter()
        upscaler.present(src, low_size, fbo, (width, height))
        device.finish()
        ms = (time.perf_counter() - start) * 1e3
        out = np.frombuffer(fbo.read(components=4), np.uint8).reshape(height, width, 4)
    finally:
        device.release(src)
    return {"mode": upscaler.mode, "scale": scale, "low_size": low_size,
            "size": (width, height), "psnr": quality.psnr(out, native),
            "ssim": quality.ssim(out, native), "ms": ms}


def main(paths: list[str]) -> None:
    """Log the quality table for each image (default: every photo in assets/photos)."""
    from PIL import Image
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    files = [Path(p) for p in paths] or sorted(PHOTOS.glob("*.jpg"))
    device = Device.headless()
    try:
        log.info("%s", device.caps.renderer)
        log.info("%-14s %5s %-9s %9s %7s %8s", "image", "scale", "mode", "PSNR dB", "SSIM", "ms")
        for path in files:
            image = np.asarray(Image.open(path).convert("RGB"))
            for r in upscale_quality(device, image):
                log.info("%-14s %5.2f %-9s %9.2f %7.4f %8.1f", path.name, r["scale"], r["mode"],
                         r["psnr"], r["ssim"], r["ms"])
    finally:
        device.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
