"""Upload: compressed texture upload rate against the host's memcpy of the same bytes (the
ceiling no upload path can beat), and the staging-ring path against the plain one.

Three loops over the same BC7 level, each timed to GPU idle and repeated (medians):
- memcpy: numpy copy of the bytes into a preallocated host buffer;
- raw: `device.commands.upload` (glCompressedTexSubImage2D from client memory), synchronous;
- ring: memmove into the persistently mapped staging ring, then the upload from the pixel
  unpack buffer (what the streamer does when a level fits a ring segment).
"""
from __future__ import annotations

import logging
import statistics
import time

import numpy as np

from engine.gl.device import Device
from engine.gl.staging import StagingRing
from engine.formats import get as get_format
from engine.memory.sizes import format_bytes, level_bytes
from engine.textures.transcode import served_format
from .common import SuiteResult, random_blocks

log = logging.getLogger(__name__)

FORMAT = "BC7_SRGB"


def memcpy_seconds(data: bytes, count: int) -> float:
    """Seconds to copy `data` `count` times into a buffer touched beforehand (no page
    faults in the timing)."""
    src = np.frombuffer(data, np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    start = time.perf_counter()
    for _ in range(count):
        np.copyto(dst, src)
    return time.perf_counter() - start


def raw_seconds(device: Device, tex, data: bytes, count: int) -> float:
    device.finish()
    start = time.perf_counter()
    for _ in range(count):
        device.commands.upload(tex, 0, data)
    device.finish()
    return time.perf_counter() - start


def ring_seconds(device: Device, ring: StagingRing, tex, data: bytes, count: int
                 ) -> tuple[float, int]:
    """Seconds through the staging ring, and how often a segment was still in use by the
    GPU (the loop then waits for it, as a frame that skips the ring would not)."""
    waits = 0
    device.finish()
    start = time.perf_counter()
    for _ in range(count):
        if not ring.begin_frame():
            waits += 1
            device.finish()
            ring.begin_frame()
        offset = ring.write(data)
        if offset is None:
            raise RuntimeError("staging segment smaller than one level")
        device.commands.upload_from_buffer(tex, 0, ring.glo, offset, len(data))
        ring.end_frame()
    device.finish()
    return time.perf_counter() - start, waits


def run(device: Device, quick: bool = False) -> SuiteResult:
    result = SuiteResult("upload")
    size, count, repeats = (1024, 16, 3) if quick else (4096, 16, 5)
    # the format the driver holds a BC7 file in (BC3, same blocks, on a driver without BPTC)
    fmt = served_format(get_format(FORMAT), device.caps.can_sample)
    nbytes = level_bytes(fmt, size, size)
    data = random_blocks(nbytes, 1)
    moved = nbytes * count
    tex = device.storage_texture(fmt, size, size, label="bench-upload")
    ring = None
    try:
        memcpy_s = statistics.median(memcpy_seconds(data, count) for _ in range(repeats))
        raw_s = statistics.median(raw_seconds(device, tex, data, count) for _ in range(repeats))
        rows = [{"path": "host memcpy (ceiling)", "MBps": moved / memcpy_s / 1e6,
                 "of_memcpy": 1.0, "of_raw": raw_s / memcpy_s},
                {"path": "raw upload (client memory)", "MBps": moved / raw_s / 1e6,
                 "of_memcpy": memcpy_s / raw_s, "of_raw": 1.0}]
        if device.caps.buffer_storage:
            ring = StagingRing(device, nbytes, label="bench-ring")
            timed = [ring_seconds(device, ring, tex, data, count) for _ in range(repeats)]
            ring_s = statistics.median(t for t, _ in timed)
            rows.append({"path": "staging ring (PBO)", "MBps": moved / ring_s / 1e6,
                         "of_memcpy": memcpy_s / ring_s, "of_raw": raw_s / ring_s,
                         "segment_waits": sum(w for _, w in timed)})
        else:
            result.notes.append("no ARB_buffer_storage: the staging ring cannot be measured")
    finally:
        if ring is not None:
            ring.release()
        device.release(tex)
    for row in rows:
        row.update(level=f"{size}^2 {fmt.name}", mib=moved / (1 << 20), repeats=repeats)
    result.rows += rows
    result.notes.append(f"{count} uploads of one {format_bytes(nbytes)} level per repeat, "
                        "timed to GPU idle (glFinish); medians of the repeats")
    return result
