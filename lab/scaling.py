"""Scaling: how the streamer's costs grow with the number of textures, 50 to 5,000.

For each count N: registration time (open each file's header, make and fill its tail), the
streamer's per-frame cost (`LevelStreamer.begin_frame`: estimate, plan, uploads) with all N
instances on a grid in view of a slowly panning camera, GPU memory (ledger) and host memory
(resident set growth). Every figure is also given relative to the smallest N, next to the
count ratio: linear growth shows as equal ratios, anything above it is a scaling problem.

The textures are small generated KTX2 files (256^2 BC1, random blocks: content does not
matter for residency), cached next to the gallery's.
"""
from __future__ import annotations

import logging
import math
import statistics
import time
from pathlib import Path

import numpy as np
from pyglm import glm

from engine.gl.device import Device
from engine.memory.budget import Budget
from engine.memory.governor import Governor
from engine.memory.sizes import level_bytes, mip_count, mip_dims
from engine.render.camera import mat_to_numpy
from engine.streaming.contract import TEXTURE_SLOTS, FrameView
from engine.textures.cachedir import cache_root
from engine.streaming.levels.backends import CATEGORY
from engine.streaming.levels.streamer import LevelStreamer
from engine.textures.ktx2_write import write_ktx2
from .common import SuiteResult
from .streaming import mib

log = logging.getLogger(__name__)

SIZE = 256
FORMAT = "BC1_RGBA"
SPACING = 1.5
VIEWPORT = (1280, 720)


def scaling_textures(count: int) -> list[Path]:
    """`count` KTX2 files of random blocks, generated once (seeded per file) and cached."""
    folder = cache_root() / "bench-scaling" / f"{SIZE}-{FORMAT.lower()}"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"tex{i:05d}.ktx2" for i in range(count)]
    levels = mip_count(SIZE, SIZE)
    for i, path in enumerate(paths):
        if path.is_file():
            continue
        rng = np.random.default_rng([7, i])
        data = [rng.integers(0, 256, level_bytes(FORMAT, *mip_dims(SIZE, SIZE, lvl)),
                             dtype=np.uint8).tobytes() for lvl in range(levels)]
        tmp = path.with_suffix(".tmp")
        write_ktx2(tmp, FORMAT, SIZE, SIZE, data)
        tmp.replace(path)
    return paths


def grid_view(frame: int, count: int) -> FrameView:
    """All `count` unit quads on a square grid in the plane z=0, seen at a slant from just
    beyond one edge at a fixed height: near quads want their finest levels, far ones only
    tails, and a slow pan keeps the desired mips changing (so the streamer has work every
    frame)."""
    cols = math.ceil(math.sqrt(count))
    idx = np.arange(count)
    centers = np.stack([(idx % cols) * SPACING, (idx // cols) * SPACING, np.zeros(count)], 1)
    extent = cols * SPACING
    pan = 0.25 * extent * math.sin(frame * 0.05)
    fovy = float(np.radians(60.0))
    eye = glm.vec3(extent / 2 + pan, -2.0, 3.0)
    view = glm.lookAt(eye, glm.vec3(extent / 2 + pan, 0.5 * extent, 0.0), glm.vec3(0, 0, 1))
    proj = glm.perspective(fovy, VIEWPORT[0] / VIEWPORT[1], 0.1, 4 * extent)
    ids = np.full((count, len(TEXTURE_SLOTS)), -1, np.int32)
    ids[:, 0] = idx
    return FrameView(frame=frame, time=frame / 60.0, camera_pos=np.array(eye, np.float32),
                     view=mat_to_numpy(view), proj=mat_to_numpy(proj), fovy=fovy,
                     viewport=VIEWPORT, render_scale=1.0, centers=centers.astype(np.float32),
                     radii=np.full(count, 0.71, np.float32), uv_density=np.ones(count, np.float32),
                     texture_ids=ids)


def rss_bytes() -> int | None:
    """This process's resident set now (Linux /proc), None where unavailable."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    import os
    return pages * os.sysconf("SC_PAGE_SIZE")


def measure(device: Device, count: int, frames: int, warmup: int) -> dict:
    paths = scaling_textures(count)
    rss0 = rss_bytes()
    ledger0 = device.ledger.total
    streamer = LevelStreamer(device)
    try:
        start = time.perf_counter()
        streamer.register_many([(f"s{i}", path) for i, path in enumerate(paths)])
        device.finish()
        register_s = time.perf_counter() - start
        tails = device.ledger.category_total(CATEGORY)
        times = []
        # The budget's owner splits it each frame, as in a run: the pool is its allowance.
        governor = Governor(budget=Budget.on_device(device))
        for frame in range(frames):
            view = grid_view(frame, count)
            streamer.grant(governor.split(device.ledger.by_category()).pool_allowance)
            t0 = time.perf_counter()
            streamer.begin_frame(view)
            times.append(time.perf_counter() - t0)
            streamer.end_frame()
        device.finish()
        stats = streamer.stats()
        rss1 = rss_bytes()
        row = {"textures": count, "register_s": register_s,
               "register_ms_per_texture": register_s / count * 1e3,
               "begin_frame_ms": statistics.median(times[warmup:]) * 1e3,
               "begin_frame_p95_ms": float(np.percentile(times[warmup:], 95)) * 1e3,
               "tail_mib": mib(tails), "resident_mib": mib(stats.resident_bytes),
               "ledger_mib": mib(device.ledger.total - ledger0),
               "rss_mib": mib(rss1 - rss0) if rss0 is not None and rss1 is not None else None,
               "loads": int(stats.loads)}
    finally:
        streamer.release()
        device.flush_releases()
    return row


def run(device: Device, quick: bool = False) -> SuiteResult:
    result = SuiteResult("scaling")
    counts = (50, 500) if quick else (50, 500, 2000, 5000)
    frames, warmup = (20, 5) if quick else (60, 10)
    rows = [measure(device, n, frames, warmup) for n in counts]
    first = rows[0]
    for row in rows:
        row["count_ratio"] = row["textures"] / first["textures"]
        row["register_ratio"] = row["register_s"] / first["register_s"]
        row["frame_ratio"] = row["begin_frame_ms"] / first["begin_frame_ms"]
        row["resident_ratio"] = row["resident_mib"] / first["resident_mib"]
    result.rows += rows
    result.notes.append(
        f"{SIZE}^2 {FORMAT} files; grid camera at {VIEWPORT[0]}x{VIEWPORT[1]}; begin_frame "
        f"median over frames {warmup}..{frames - 1} (the first ones carry the initial "
        f"loads); rss is the process's resident-set growth (the streamer's RAM level cache "
        f"included)")
    return result
