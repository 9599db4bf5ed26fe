"""Shared pieces of the virtual-texture tests: a headless device and small BC7 files."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from texture_helpers import encode

from engine.errors import ContextError
from engine.textures.ktx2_write import write_ktx2


def headless_device():
    from engine.gl.device import Device
    try:
        return Device.headless()
    except ContextError as exc:
        pytest.skip(f"no headless GL context: {exc}")


def chain_file(directory: Path, name: str, size: int, seed: int = 0, fmt: str = "BC1_RGB",
               supercompression: str | None = None) -> Path:
    """A size^2 chain of etcpak blocks of `fmt` (gradients and noise); the seed makes the
    noise, so textures of different seeds differ. BC1 by default: llvmpipe samples it far
    faster than BC7, and most tests do not depend on the format."""
    path = directory / name
    if not path.exists():
        levels = int(np.log2(size)) + 1
        chain = [encode(fmt, max(1, size >> lvl), max(1, size >> lvl), seed=seed * 97 + lvl)
                 for lvl in range(levels)]
        write_ktx2(path, fmt, size, size, chain, supercompression=supercompression)
    return path


def bc7_file(directory: Path, name: str, size: int, seed: int = 0,
             supercompression: str | None = None) -> Path:
    """`chain_file` of BC7 (every block mode), for the tests about BC7's own layout."""
    return chain_file(directory, name, size, seed, "BC7", supercompression)


class PacedReads:
    """A deterministic stand-in for the tile I/O pool (LevelIO's surface and cancellation
    rules) at a fixed bandwidth, for flights whose outcome must not depend on thread timing:
    at most `concurrency` reads are under way, each finishing `latency` polls after it
    started (the system polls twice a frame), most wanted first. A read cancelled while
    under way is thrown away when it finishes, as LevelIO does, and counted in `wasted`;
    `retain(..., keep_reading=True)` leaves reads under way alone."""

    def __init__(self, read, concurrency: int, latency: int) -> None:
        from engine.streaming.stats import IOStats
        self._read, self.concurrency, self.latency = read, concurrency, latency
        self._pending: dict[tuple[int, int], float] = {}
        self._flight: dict[tuple[int, int], int] = {}  # key -> polls left
        self._cancelled: set[tuple[int, int]] = set()
        self._stats = IOStats()
        self.wasted = 0

    def request(self, texture_id: int, level: int, priority: float = 0.0) -> None:
        key = (int(texture_id), int(level))
        if key in self._flight:
            self._cancelled.discard(key)
            return
        if key not in self._pending:
            self._stats.requested += 1
        self._pending[key] = float(priority)

    def request_many(self, items) -> None:
        for texture_id, level, priority in items:
            self.request(texture_id, level, priority)

    def cancel(self, texture_id: int, level: int) -> bool:
        key = (int(texture_id), int(level))
        if self._pending.pop(key, None) is not None:
            self._stats.cancelled += 1
            return True
        if key in self._flight and key not in self._cancelled:
            self._cancelled.add(key)
            self._stats.cancelled += 1
            return True
        return False

    def retain(self, keys, *, keep_reading: bool = False) -> int:
        keep = {(int(t), int(lvl)) for t, lvl in keys}
        live = list(self._pending) if keep_reading else [*self._pending, *self._flight]
        return sum(self.cancel(*k) for k in live if k not in keep)

    def poll(self, max_items: int = 64):
        from engine.streaming.io import ReadResult
        out = []
        for key in list(self._flight):
            self._flight[key] -= 1
            if self._flight[key] > 0:
                continue
            del self._flight[key]
            if key in self._cancelled:
                self._cancelled.discard(key)
                self.wasted += 1
                continue
            data = bytes(self._read(*key))
            self._stats.completed += 1
            self._stats.bytes_read += len(data)
            out.append(ReadResult(key[0], key[1], data))
        room = self.concurrency - len(self._flight)
        for key in sorted(self._pending, key=lambda k: (-self._pending[k], k))[:max(0, room)]:
            del self._pending[key]
            self._flight[key] = self.latency
        return out

    def stats(self):
        from engine.streaming.stats import IOStats
        snap = IOStats(**vars(self._stats))
        snap.pending, snap.in_progress = len(self._pending), len(self._flight)
        return snap

    def close(self) -> None:
        self._pending.clear()
        self._flight.clear()


def paced_reads(vts, concurrency: int, latency: int) -> PacedReads:
    """Swap a system's reader pool (built with io_workers=0) for a PacedReads."""
    vts.io._io.close()
    vts.io._io = PacedReads(vts.io._read, concurrency, latency)
    return vts.io._io


def wait_tiled(vts, seconds: float = 30.0) -> None:
    """Wait until the system's tile-contiguous copies are made, and check every texture
    reads from one (the default storage)."""
    import time
    cache = vts.io.tiled
    assert cache is not None and cache.disabled is None, "tiled copies are off"
    end = time.perf_counter() + seconds
    while not cache.idle():
        assert time.perf_counter() < end, "tiled copies not made in time"
        time.sleep(0.01)
    assert all(src.tiled for src in vts.io.sources)


def sparse_periodic_ktx2(path: Path, fmt_name: str, size: int, small: list[bytes],
                         period: int, window: tuple[float, float], levels: int) -> Path:
    """A size^2 KTX2 file (no supercompression) whose levels are the small chain `small`
    (a period^2 texture's levels) repeated, written only inside the UV `window` (lo, hi) of
    each of the first `levels` levels: the rest of the file is a hole (zero blocks, no
    disk). Cheap stand-in for a huge image whose viewed part is exact: drawing it equals
    drawing the small texture with repeat wrap at `size / period` times the UV there."""
    import os
    import struct

    from engine.formats import get
    from engine.memory.sizes import level_bytes, mip_dims
    from engine.textures import ktx2_write as kw

    fmt = get(fmt_name)
    bw, bb = fmt.block_w, fmt.block_bytes
    count = size.bit_length()  # a power of two: down to 1x1
    sizes = [level_bytes(fmt, *mip_dims(size, size, i)) for i in range(count)]
    dfd, kvd = kw.data_format_descriptor(fmt), kw.key_value_data(kw.default_kv())
    dfd_offset = kw.HEADER_BYTES + kw.LEVEL_INDEX_ENTRY_BYTES * count
    end = dfd_offset + len(dfd) + len(kvd)
    offsets = [0] * count
    for i in reversed(range(count)):  # smallest level first, as write_ktx2 lays it out
        end += -end % bb
        offsets[i] = end
        end += sizes[i]
    head = kw.KTX2_IDENTIFIER + struct.pack("<9I", fmt.vk_format, 1, size, size, 0, 0, 1,
                                            count, kw.SUPERCOMPRESSION_NONE)
    head += struct.pack("<IIIIQQ", dfd_offset, len(dfd), dfd_offset + len(dfd), len(kvd), 0, 0)
    head += b"".join(struct.pack("<QQQ", offsets[i], sizes[i], sizes[i]) for i in range(count))
    with open(path, "wb") as fh:
        fh.write(head + dfd + kvd)
        fh.truncate(end)
        for lv in range(min(levels, count)):
            side = size >> lv
            nb, pb = side // bw, (period >> lv) // bw  # blocks a side: level, small level
            blocks = np.frombuffer(small[lv], np.uint8).reshape(pb, pb, bb)
            b0, b1 = int(window[0] * nb), min(nb, int(np.ceil(window[1] * nb)))
            cols = np.arange(b0, b1) % pb
            for by in range(b0, b1):
                os.pwrite(fh.fileno(), blocks[by % pb, cols].tobytes(),
                          offsets[lv] + (by * nb + b0) * bb)
    return path
