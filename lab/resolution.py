"""Resolution: how much of a native image bilinear and FSR upscaling win back, at render
scales 0.67 and 0.5, on the real photos in assets/photos (lab.upscale_quality does the
measuring: area-downsample, upscale on the GPU, score against the native image).

The figure that matters is the ratio of FSR to bilinear on the same low-resolution input:
the dB gained and the SSIM ratio, medians over the photos.
"""
from __future__ import annotations

import logging
import statistics
from pathlib import Path

import numpy as np

from engine.gl.device import Device
from .upscale_quality import PHOTOS, upscale_quality
from .common import SuiteResult

log = logging.getLogger(__name__)

SCALES = (0.67, 0.5)
QUICK_PHOTOS = 2  # the quick run's photos: both modes and scales, medians of more than one


def _load_rgb(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def run(device: Device, quick: bool = False) -> SuiteResult:
    result = SuiteResult("resolution")
    photos = sorted(PHOTOS.glob("*.jpg"))[:QUICK_PHOTOS if quick else None]
    if not photos:
        result.notes.append(f"no photos in {PHOTOS}")
        return result
    measured = [r for p in photos for r in upscale_quality(device, _load_rgb(p), SCALES)]
    for scale in SCALES:
        at = {mode: [r for r in measured if r["scale"] == scale and r["mode"] == mode]
              for mode in ("bilinear", "fsr")}
        med = {mode: {k: statistics.median(r[k] for r in rows) for k in ("psnr", "ssim", "ms")}
               for mode, rows in at.items()}
        for mode in ("bilinear", "fsr"):
            result.rows.append({"scale": scale, "mode": mode, "psnr_db": med[mode]["psnr"],
                                "ssim": med[mode]["ssim"], "gpu_ms": med[mode]["ms"],
                                "images": len(at[mode])})
        result.rows[-1]["gain_db"] = med["fsr"]["psnr"] - med["bilinear"]["psnr"]
        result.rows[-1]["ssim_ratio"] = med["fsr"]["ssim"] / med["bilinear"]["ssim"]
        wins = sum(f["psnr"] > b["psnr"] for f, b in zip(at["fsr"], at["bilinear"]))
        result.notes.append(f"scale {scale}: FSR beats bilinear in PSNR on {wins} of "
                            f"{len(at['fsr'])} photos")
    result.notes.append("medians over the photos; the same low-resolution input for both "
                        "modes (area downsample of the native photo)")
    return result
