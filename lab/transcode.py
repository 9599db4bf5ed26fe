"""Transcode: what serving a format the driver cannot sample costs, per (source, served) pair.

On the sample photographs (assets/photos, a `size` square crop of each), each source format
is encoded as a bake would, then transcoded as the streamer's I/O threads do on a driver
without it (engine/textures/transcode.py). Per pair, medians over the photographs:
- psnr_vs_source_db: the served image against the source format's own decode (what the
  user loses against the full driver's picture);
- psnr_plain_db: the same with etcpak's endpoints as they are (no least-squares refit), side
  by side, for the compressed targets;
- mpx_s: transcode throughput of one thread (decode + encode), and bytes_ratio: served
  bytes over source bytes (the memory cost).
"""
from __future__ import annotations

import statistics
import time

import numpy as np
from PIL import Image

from engine import assets
from engine.formats import get
from engine.gl.device import Device
from engine.textures.decode import decode_image
from engine.textures.encode import encode_image
from engine.textures.quality import psnr
from engine.textures.transcode import transcode
from .common import SuiteResult

#: (source, served): the fallbacks a macOS-class driver (no BPTC) and a driver without
#: S3TC take (engine/textures/transcode.py FALLBACKS)
PAIRS = (("BC7_SRGB", "BC3_SRGB"), ("BC7_SRGB", "RGBA8_SRGB"), ("BC1_RGB_SRGB", "RGBA8_SRGB"),
         ("BC3_SRGB", "RGBA8_SRGB"))


def photographs(size: int) -> list[np.ndarray]:
    """Top-left `size` squares of the sample photographs, RGBA."""
    out = []
    for path in sorted(assets.PHOTOS.glob("*.jpg")):
        img = np.asarray(Image.open(path).convert("RGBA"))
        out.append(np.ascontiguousarray(img[:size, :size]))
    return out


def run(device: Device, quick: bool = False, size: int | None = None) -> SuiteResult:
    result = SuiteResult("transcode")
    size = size or (128 if quick else 512)
    photos = photographs(size)
    for src_name, dst_name in PAIRS:
        src, dst = get(src_name), get(dst_name)
        served, plain, rates, ratio = [], [], [], 1.0
        for img in photos:
            h, w = img.shape[:2]
            data = encode_image(img, src)
            ref = decode_image(src.name, data, w, h)
            t = time.perf_counter()
            out = transcode(data, src, dst, w, h)
            rates.append(w * h / 1e6 / (time.perf_counter() - t))
            served.append(psnr(ref, decode_image(dst.name, out, w, h)))
            if dst.compressed:
                plain.append(psnr(ref, decode_image(dst.name, encode_image(ref, dst), w, h)))
            ratio = len(out) / len(data)
        db = statistics.median(served)
        exact = db == float("inf")  # JSON has no infinity: an exact copy says so instead
        row = {"source": src_name, "served": dst_name, "size": f"{size}x{size}",
               "photos": len(photos), "psnr_vs_source_db": None if exact else db,
               "exact": exact, "mpx_s": statistics.median(rates), "bytes_ratio": ratio}
        if plain:
            row["psnr_plain_db"] = statistics.median(plain)
        result.rows.append(row)
    result.notes.append(f"served on this driver: {device.profile.fallbacks or 'nothing'}")
    return result
