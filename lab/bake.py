"""Bake: BC1 and BC7 throughput and quality on the real photos in assets/photos.

Per photo and format, medians over repeats of `bake_file` (in this process): level-0 Mpx per
CPU second of the whole bake (decode, mips, encode, PSNR, write) and its PSNR. The ceiling
is the bare encoder on level 0 alone (`encode_image`, what etcpak does by itself): the
ratio says what the rest of the pipeline costs. One more row per format bakes all photos at
once with `bake_many` over a process pool: its wall-clock Mpx/s over one core's says how
well the pool spreads the work.
"""
from __future__ import annotations

import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

from engine import assets
from engine.textures.bake import bake_file, bake_many, choose_format, load_rgba
from engine.textures.encode import encode_image
from .common import SuiteResult

log = logging.getLogger(__name__)

PHOTOS = assets.PHOTOS
FORMATS = ("bc1", "bc7")
QUICK_PHOTOS = 2  # the quick run's photos: one bake each, and bake_many over more than one


def cpu_seconds(fn, repeats: int) -> float:
    """Median CPU seconds of `fn` (process time, all threads): the unit bake results use."""
    samples = []
    for _ in range(max(1, repeats)):
        start = time.process_time()
        fn()
        samples.append(time.process_time() - start)
    return statistics.median(samples)


def run(device, quick: bool = False) -> SuiteResult:
    """`device` is unused: baking is CPU work (the harness passes one to every suite)."""
    result = SuiteResult("bake")
    photos = sorted(PHOTOS.glob("*.jpg"))[:QUICK_PHOTOS if quick else None]
    if not photos:
        result.notes.append(f"no photos in {PHOTOS}")
        return result
    repeats = 1 if quick else 5
    with tempfile.TemporaryDirectory(prefix="bench-bake-") as tmp:
        for fmt in FORMATS:
            single = []
            for photo in photos:
                baked = [bake_file(photo, tmp, fmt) for _ in range(repeats)]
                rgba = load_rgba(photo)
                exact = choose_format(fmt, True, rgba)
                enc_s = cpu_seconds(lambda rgba=rgba, exact=exact: encode_image(rgba, exact),
                                    repeats)
                mpx = rgba.shape[0] * rgba.shape[1] / 1e6
                bake_rate = statistics.median(b.mpx_per_s for b in baked)
                single.append(bake_rate)
                result.rows.append({
                    "image": photo.name, "format": exact, "size": f"{rgba.shape[1]}x"
                    f"{rgba.shape[0]}", "bake_mpx_s": bake_rate,
                    "psnr_db": statistics.median(b.psnr_db for b in baked),
                    "encoder_mpx_s": mpx / enc_s, "of_encoder": bake_rate * enc_s / mpx})
            jobs = os.cpu_count() or 1
            start = time.perf_counter()
            many = bake_many(photos, Path(tmp) / "many", fmt, jobs=jobs, progress=False)
            wall = time.perf_counter() - start
            rate = sum(b.width * b.height for b in many) / 1e6 / wall
            result.rows.append({"image": f"all {len(photos)} (bake_many, {jobs} processes)",
                                "format": fmt.upper(), "bake_mpx_s": rate,
                                "psnr_db": statistics.median(b.psnr_db for b in many),
                                "of_one_core": rate / statistics.median(single)})
    result.notes.append(f"medians of {repeats} repeat(s); bake and encoder Mpx/s are per CPU "
                        "second (the whole bake; etcpak alone on level 0); bake_many is wall "
                        "clock, pool start-up included")
    return result
