"""A ring of pixel-unpack memory for texture uploads, persistently mapped where
ARB_buffer_storage exists, so the streamer copies level bytes with a memmove and the driver
pulls them asynchronously (no client-memory copy inside the GL call, no stall).

The ring is split into `segments` (one per frame in flight); a fence closes each frame's
segment and the segment is reused only once its fence has signalled. If it has not, that
frame uploads nothing through the ring (the caller falls back or waits a frame): never a stall.
"""
from __future__ import annotations

import ctypes as C
import logging
from dataclasses import dataclass

from ..memory.ledger import Category
from . import constants as K
from .commands import Fence

log = logging.getLogger(__name__)


@dataclass
class _Segment:
    offset: int
    used: int = 0
    fence: Fence | None = None


class StagingRing:
    """Persistently mapped upload ring, made and ledgered through the device."""

    def __init__(self, device, segment_bytes: int, segments: int = 3,
                 label: str = "staging-ring") -> None:
        if not device.caps.buffer_storage:
            raise RuntimeError("StagingRing needs ARB_buffer_storage")
        self.device = device
        self._label = label
        self.segment_bytes = int(segment_bytes)
        self.size = self.segment_bytes * segments
        raw = device._raw
        flags = K.MAP_WRITE_BIT | K.MAP_PERSISTENT_BIT | K.MAP_COHERENT_BIT

        def make() -> int:
            glo = raw.gen_buffer()
            raw.glBindBuffer(K.PIXEL_UNPACK_BUFFER, glo)
            raw.glBufferStorage(K.PIXEL_UNPACK_BUFFER, self.size, None, flags)
            raw.glBindBuffer(K.PIXEL_UNPACK_BUFFER, 0)
            return glo

        self.glo = device._alloc.guarded(f"staging ring '{label}'", self.size, make, raw.delete_buffer)
        device._alloc.register(self, "buffer", Category.STAGING, label, self.size, self.glo, self._destroy)
        raw.glBindBuffer(K.PIXEL_UNPACK_BUFFER, self.glo)
        self._ptr = raw.glMapBufferRange(K.PIXEL_UNPACK_BUFFER, 0, self.size, flags)
        raw.glBindBuffer(K.PIXEL_UNPACK_BUFFER, 0)
        if not self._ptr:
            device.release(self)
            raise RuntimeError("glMapBufferRange returned NULL for the staging ring")
        self._segments = [_Segment(i * self.segment_bytes) for i in range(segments)]
        self._current = 0
        self.stalls_avoided = 0

    def begin_frame(self) -> bool:
        """Move to the next segment; False if the GPU still reads it (skip ring uploads)."""
        self._current = (self._current + 1) % len(self._segments)
        seg = self._segments[self._current]
        if seg.fence is not None:
            if not self.device.commands.fence_signalled(seg.fence):
                self.stalls_avoided += 1
                seg.used = self.segment_bytes  # full: nothing goes through it this frame
                return False
            self.device.release(seg.fence)
            seg.fence = None
        seg.used = 0
        return True

    def write(self, data: bytes | memoryview) -> int | None:
        """Copy `data` into this frame's segment; its buffer offset, or None if it is full."""
        seg = self._segments[self._current]
        n = memoryview(data).nbytes
        offset = (seg.used + 15) & ~15
        if offset + n > self.segment_bytes:
            return None
        C.memmove(self._ptr + seg.offset + offset, bytes(data) if not isinstance(data, bytes)
                  else data, n)
        seg.used = offset + n
        return seg.offset + offset

    def occupancy(self) -> list[tuple[int, int, bool]]:
        """Per segment: bytes written this round, its size, and whether the GPU may still
        read it (its fence is unsignalled or unpolled): the staging view of a snapshot."""
        return [(min(seg.used, self.segment_bytes), self.segment_bytes, seg.fence is not None)
                for seg in self._segments]

    def end_frame(self) -> None:
        """Fence the segment's uploads so it is reused only after the GPU read it."""
        seg = self._segments[self._current]
        if seg.used and seg.fence is None:
            seg.fence = self.device.fence(f"{self._label}.segment{self._current}")

    def _destroy(self) -> None:
        raw = self.device._raw
        for seg in self._segments:
            if seg.fence is not None:
                self.device.release(seg.fence)
                seg.fence = None
        raw.glBindBuffer(K.PIXEL_UNPACK_BUFFER, self.glo)
        raw.glUnmapBuffer(K.PIXEL_UNPACK_BUFFER)
        raw.glBindBuffer(K.PIXEL_UNPACK_BUFFER, 0)
        raw.delete_buffer(self.glo)

    def release(self) -> None:
        self.device.release(self)
