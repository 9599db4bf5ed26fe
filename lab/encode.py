"""Encode: BC1 and BC7 through the CPU process pool (etcpak) and the GPU compute encoder, side
by side on the same image, so the encoder of a bake or a viewer is chosen by measurement.

The image is natural-ish: the photographs in assets/photos resized into a 2x2 mosaic of the
wanted size. Per format (the sRGB colour formats a bake of a photograph writes), medians of
`repeats` runs of the whole chain, level 0 to 1x1:
- cpu_pool: mips by engine.textures.mipgen in this process, then every level encoded by
  etcpak (with the opaque-alpha refit of BC7) in strips over a pool of `workers` processes,
  as a bake does; wall clock;
- cpu_core: the same mips and encodes in this process alone, per CPU second (on the
  image's top-left CORE_SIZE square at most: a rate per CPU second hardly depends on size,
  and one core would take minutes over a large image);
- gpu: upload of level 0, mips made on the GPU, compute encode, read-back; wall clock, and
  per CPU second of this process (on llvmpipe the "GPU" is this process's threads);
- gpu_encode: the compute dispatches alone (given chain already on the GPU, no read-back);
- gpu_band: the same chain in `step(BAND_BUDGET_S)` calls, as a render thread spends a few
  ms a frame: the calls' median and worst length against the budget.
PSNR is level 0's (RGB) against the image; `vs_cpu_db` is the GPU's minus etcpak's.
"""
from __future__ import annotations

import logging
import os
import statistics
import time
from concurrent.futures import Executor, ProcessPoolExecutor

import numpy as np

from engine import assets
from engine.gl.bc_encode import GpuBlockEncoder
from engine.gl.device import Device
from engine.textures.decode import decode_image
from engine.textures.encode import encode_image
from engine.textures.mipgen import generate_mips
from engine.textures.quality import psnr
from .common import SuiteResult

log = logging.getLogger(__name__)

FORMATS = ("BC1_RGB_SRGB", "BC7_SRGB")
#: Pixels per pool task, as the bake cuts its levels (engine.textures.bake_plan).
STRIP_PIXELS = {"BC1": 1 << 22, "BC7": 1 << 19}
#: Largest side the single-process CPU figure is measured on (see module).
CORE_SIZE = 2048
#: The per-call budget of the banded rows: a few ms of a 60 Hz frame.
BAND_BUDGET_S = 0.004


def mosaic(size: int) -> np.ndarray:
    """A size x size RGBA8 image of the photographs, each resized into a quarter."""
    from PIL import Image

    photos = sorted(assets.PHOTOS.glob("*.jpg"))
    if not photos:
        raise FileNotFoundError(f"no photographs in {assets.PHOTOS}")
    half = max(1, size // 2)
    out = np.zeros((size, size, 4), np.uint8)
    for k in range(4):
        with Image.open(photos[k % len(photos)]) as im:
            im = im.convert("RGBA").resize((size - half if k % 2 else half,
                                            size - half if k // 2 else half),
                                           Image.Resampling.BICUBIC)
            if k == 3:
                im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            y, x = (k // 2) * half, (k % 2) * half
            out[y:y + im.height, x:x + im.width] = np.asarray(im)
    return out


def _strips(levels: list[np.ndarray], family: str) -> list[tuple[int, np.ndarray]]:
    """(level, rows) pieces of about STRIP_PIXELS each, whole block rows."""
    out = []
    for level, img in enumerate(levels):
        h, w = img.shape[:2]
        rows = max(4, (STRIP_PIXELS[family] // max(w, 1)) // 4 * 4)
        out.extend((level, img[r:r + rows]) for r in range(0, h, rows))
    return out


def cpu_chain(img: np.ndarray, fmt: str, pool: Executor | None) -> tuple[bytes, float]:
    """Mips and every level encoded (over `pool` when given); (level 0's bytes, seconds:
    wall clock with a pool, CPU seconds of this process without)."""
    clock = time.perf_counter if pool is not None else time.process_time
    start = clock()
    levels = generate_mips(img, colorspace="srgb")
    pieces = _strips(levels, "BC7" if fmt.startswith("BC7") else "BC1")
    rows = [p for _, p in pieces]
    if pool is None:
        data = [encode_image(p, fmt) for p in rows]
    else:
        data = list(pool.map(encode_image, rows, [fmt] * len(rows)))
    seconds = clock() - start
    return b"".join(d for (level, _), d in zip(pieces, data) if level == 0), seconds


def gpu_chain(device: Device, enc: GpuBlockEncoder, img: np.ndarray, fmt: str
              ) -> tuple[bytes, float, float]:
    """(level 0's bytes, wall seconds, CPU seconds of this process) of upload, GPU mips,
    encode and read-back of the whole chain."""
    device.finish()
    wall, cpu = time.perf_counter(), time.process_time()
    levels = enc.encode_mipmapped(img, fmt)
    return levels[0], time.perf_counter() - wall, time.process_time() - cpu


def gpu_dispatch_seconds(device: Device, enc: GpuBlockEncoder, levels: list[np.ndarray],
                         fmt: str, repeats: int) -> float:
    """Median seconds of the compute dispatches alone, for a chain already on the GPU (after
    one untimed run: a driver may compile the program again for a new source format)."""
    samples = []
    for _ in range(repeats + 1):
        job = enc.start(levels, fmt)
        try:
            device.finish()
            start = time.perf_counter()
            job.run()
            samples.append(time.perf_counter() - start)
        finally:
            job.release()
    return statistics.median(samples[1:])


def banded(device: Device, enc: GpuBlockEncoder, levels: list[np.ndarray], fmt: str
           ) -> dict:
    """The chain in BAND_BUDGET_S calls: how many calls, their median and worst length."""
    job = enc.start(levels, fmt)
    calls = []
    try:
        done = False
        while not done:
            start = time.perf_counter()
            done = job.step(BAND_BUDGET_S)
            calls.append(time.perf_counter() - start)
    finally:
        job.release()
    return {"band_calls": len(calls), "band_call_ms_p50": statistics.median(calls) * 1e3,
            "band_call_ms_max": max(calls) * 1e3, "band_budget_ms": BAND_BUDGET_S * 1e3}


def _psnr(fmt: str, data: bytes, img: np.ndarray) -> float:
    h, w = img.shape[:2]
    return psnr(decode_image(fmt, data, w, h), img, channels=(0, 1, 2))


def run(device: Device, quick: bool = False, size: int | None = None,
        repeats: int | None = None, workers: int | None = None) -> SuiteResult:
    result = SuiteResult("encode")
    size = size or (256 if quick else 2048)
    repeats = repeats or (1 if quick else 3)
    workers = workers or os.cpu_count() or 1
    if not device.profile.compute:
        result.notes.append(f"no compute shaders on GL {device.caps.gl_version}: CPU only")
    img = mosaic(size)
    mpx = size * size / 1e6
    enc = GpuBlockEncoder(device) if device.profile.compute else None
    try:
        with ProcessPoolExecutor(workers) as pool:
            pool.map(int, range(workers))  # workers started before any timing
            for fmt in FORMATS:
                pooled = [cpu_chain(img, fmt, pool) for _ in range(repeats)]
                crop = np.ascontiguousarray(img[:CORE_SIZE, :CORE_SIZE])
                single = [cpu_chain(crop, fmt, None) for _ in range(repeats)]
                cpu_db = _psnr(fmt, pooled[0][0], img)
                pool_s = statistics.median(s for _, s in pooled)
                core_s = statistics.median(s for _, s in single)
                row = {"format": fmt, "size": f"{size}x{size}", "workers": workers,
                       "cpu_pool_mpx_s": mpx / pool_s,
                       "cpu_pool_mpx_s_core": mpx / pool_s / workers,
                       "cpu_core_mpx_s": crop.shape[0] * crop.shape[1] / 1e6 / core_s,
                       "cpu_psnr_db": cpu_db}
                if enc is not None:
                    gpu_chain(device, enc, img, fmt)  # compiles, and warms the driver
                    runs = [gpu_chain(device, enc, img, fmt) for _ in range(repeats)]
                    gpu_db = _psnr(fmt, runs[0][0], img)
                    wall = statistics.median(r[1] for r in runs)
                    cpu = statistics.median(r[2] for r in runs)
                    levels = generate_mips(img, colorspace="srgb")
                    row.update({
                        "gpu_mpx_s": mpx / wall, "gpu_mpx_cpu_s": mpx / cpu if cpu else None,
                        "gpu_encode_mpx_s": mpx / gpu_dispatch_seconds(device, enc, levels,
                                                                       fmt, repeats),
                        "gpu_psnr_db": gpu_db, "vs_cpu_db": gpu_db - cpu_db,
                        "gpu_over_pool": pool_s / wall,
                        **banded(device, enc, levels, fmt)})
                    row["faster"] = "gpu" if wall < pool_s else "cpu"
                result.rows.append(row)
    finally:
        if enc is not None:
            enc.release()
    result.notes.append(
        f"medians of {repeats} run(s) of the whole chain (mips included) on a {size}x{size} "
        "mosaic of the photographs; Mpx are level 0's; cpu_pool is wall clock over "
        f"{workers} processes (per core: / workers); cpu_core and gpu_mpx_cpu_s are per CPU "
        "second of one process; gpu is upload + GPU mips + encode + read-back, wall clock; "
        "gpu_encode the dispatches alone; PSNR: level 0, RGB")
    return result


def main(argv: list[str] | None = None) -> int:
    """`python -m lab.encode [--size N] [--repeats N] [--workers N] [--json OUT]`:
    this suite alone at a chosen size (the device script's entry)."""
    import argparse

    from .common import write_run
    from .harness import rows_table

    ap = argparse.ArgumentParser(prog="python -m lab.encode")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--size", type=int, help="side of the square image (default 2048)")
    ap.add_argument("--repeats", type=int, help="runs per figure (default 3)")
    ap.add_argument("--workers", type=int, help="CPU pool processes (default: all cores)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    device = Device.headless()
    try:
        res = run(device, quick=args.quick, size=args.size, repeats=args.repeats,
                  workers=args.workers)
        print(rows_table(res.rows))
        for note in res.notes:
            print(f"  note: {note}")
        if args.json:
            write_run(args.json, device, "encode", res.rows, res.notes)
    finally:
        device.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
