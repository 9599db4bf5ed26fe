"""A per-frame data ring: the one buffer the GPU-driven frame writes each frame.

Each frame the renderer writes everything per object (transforms, material parameters,
texture references, min LODs) and the indirect draw commands into one slice of this buffer
with ONE copy, then binds the slice as a shader storage buffer and as the draw-indirect
buffer. Why a ring: the GPU may still be reading last frame's slice when the CPU writes the
next, so there are `slices` of them (3 by default, one per frame in flight), each closed by a
fence; a slice is reused once its fence has signalled, which with three slices and a frame
loop that waits for the GPU never takes time.

Where ARB_buffer_storage exists the buffer is persistently and coherently mapped: a write is a
memmove into mapped memory, no GL call at all. Elsewhere (or when forced) each write orphans
the buffer (glBufferData with no data) and uploads with glBufferSubData: the driver gives us
fresh storage, so the CPU does not wait either. The buffer and every fence are ledgered and
leak-tracked through the device's registration.
"""
from __future__ import annotations

import ctypes as C
import logging
from typing import Any

import numpy as np

from . import constants as K
from .commands import Fence
from .extensions import (
    SHADER_STORAGE_BUFFER,
    SHADER_STORAGE_BUFFER_OFFSET_ALIGNMENT,
    STREAM_DRAW,
    extensions,
    guarded,
    raw_of,
    register,
)

log = logging.getLogger(__name__)

#: How long a write waits for a slice the GPU still reads before giving up (ns). With three
#: slices it never waits in practice; `waits` counts the times it had to.
_WAIT_NS = 1_000_000_000


def _round_up(n: int, a: int) -> int:
    return (int(n) + a - 1) // a * a


class FrameRing:
    """`slices` slices of `slice_bytes` in one GL buffer; `write()` returns the offset the
    data went to. Grows (reallocates, doubling) when one frame's data does not fit."""

    def __init__(self, device: Any, slice_bytes: int = 64 << 10, slices: int = 3, *,
                 persistent: bool | None = None, category: str = "buffer",
                 label: str = "frame-ring") -> None:
        self.device = device
        self.label = label
        self.category = category
        self.slices = max(1, int(slices))
        self.persistent = device.caps.buffer_storage if persistent is None else persistent
        raw = raw_of(device)
        self.align = max(256, raw.get_int(SHADER_STORAGE_BUFFER_OFFSET_ALIGNMENT) or 256)
        self._ext = extensions(device)
        self.waits = 0
        self.writes = 0
        self.glo = 0
        self._ptr = 0
        self._fences: list[Fence | None] = []
        self._current = -1
        self._allocate(_round_up(max(slice_bytes, 256), self.align))

    # ------------------------------------------------------------------ storage
    @property
    def size(self) -> int:
        return self.slice_bytes * (self.slices if self.persistent else 1)

    def _allocate(self, slice_bytes: int) -> None:
        self.slice_bytes = int(slice_bytes)
        raw, ext = raw_of(self.device), self._ext
        size = self.size
        flags = K.MAP_WRITE_BIT | K.MAP_PERSISTENT_BIT | K.MAP_COHERENT_BIT

        def make() -> int:
            glo = raw.gen_buffer()
            raw.glBindBuffer(SHADER_STORAGE_BUFFER, glo)
            if self.persistent:
                raw.glBufferStorage(SHADER_STORAGE_BUFFER, size, None, flags)
            else:
                ext.glBufferData(SHADER_STORAGE_BUFFER, size, None, STREAM_DRAW)
            raw.glBindBuffer(SHADER_STORAGE_BUFFER, 0)
            return glo

        glo = guarded(self.device, f"frame ring '{self.label}' {size} bytes", size, make,
                      raw.delete_buffer)
        self.glo = glo
        register(self.device, self, "buffer", self.category, self.label, size, glo,
                 self._destroy)
        if self.persistent:
            raw.glBindBuffer(SHADER_STORAGE_BUFFER, glo)
            self._ptr = raw.glMapBufferRange(SHADER_STORAGE_BUFFER, 0, size, flags) or 0
            raw.glBindBuffer(SHADER_STORAGE_BUFFER, 0)
            if not self._ptr:
                self.device.release(self)
                raise RuntimeError(f"glMapBufferRange returned NULL for '{self.label}'")
        self._fences = [None] * (self.slices if self.persistent else 1)
        self._current = -1

    def _destroy(self) -> None:
        raw = raw_of(self.device)
        for i, f in enumerate(self._fences):
            if f is not None:
                self.device.release(f)
                self._fences[i] = None
        if self.persistent and self._ptr:
            raw.glBindBuffer(SHADER_STORAGE_BUFFER, self.glo)
            raw.glUnmapBuffer(SHADER_STORAGE_BUFFER)
            raw.glBindBuffer(SHADER_STORAGE_BUFFER, 0)
            self._ptr = 0
        raw.delete_buffer(self.glo)

    def _grow(self, nbytes: int) -> None:
        """Reallocate with slices large enough for `nbytes` (doubling: amortised)."""
        new = self.slice_bytes
        while new < nbytes:
            new *= 2
        log.debug("frame ring '%s' grows to %d bytes a slice", self.label, new)
        self.device.release(self)
        self._allocate(_round_up(new, self.align))

    def reserve(self, nbytes: int) -> None:
        """Grow now, if a frame of `nbytes` would not fit a slice: the frame loop calls this
        before the budget is split, so the ring's growth is fixed memory the split sees
        instead of an allocation in the middle of a frame whose budget is already spent."""
        if nbytes > self.slice_bytes:
            self._grow(nbytes)

    # ------------------------------------------------------------------ per frame
    def _fence_signalled(self, fence: Fence, timeout_ns: int) -> bool:
        status = raw_of(self.device).glClientWaitSync(C.c_void_p(fence.sync),
                                                       K.SYNC_FLUSH_COMMANDS_BIT if timeout_ns
                                                       else 0, timeout_ns)
        return status in (K.ALREADY_SIGNALED, K.CONDITION_SATISFIED)

    def write(self, data: np.ndarray | bytes | memoryview) -> int:
        """Copy one frame's data into the next slice; returns its byte offset in the buffer
        (bind ranges and indirect offsets are relative to it)."""
        view = memoryview(data).cast("B") if not isinstance(data, np.ndarray) else None
        nbytes = data.nbytes if isinstance(data, np.ndarray) else view.nbytes
        if nbytes > self.slice_bytes:
            self._grow(nbytes)
        self.writes += 1
        if not self.persistent:
            raw, ext = raw_of(self.device), self._ext
            src = data.ctypes.data if isinstance(data, np.ndarray) else \
                C.addressof((C.c_ubyte * nbytes).from_buffer_copy(view))
            raw.glBindBuffer(SHADER_STORAGE_BUFFER, self.glo)
            ext.glBufferData(SHADER_STORAGE_BUFFER, self.slice_bytes, None, STREAM_DRAW)
            ext.glBufferSubData(SHADER_STORAGE_BUFFER, 0, nbytes, C.c_void_p(src))
            raw.glBindBuffer(SHADER_STORAGE_BUFFER, 0)
            self._current = 0
            return 0
        self._current = (self._current + 1) % self.slices
        fence = self._fences[self._current]
        if fence is not None:
            if not self._fence_signalled(fence, 0):
                self.waits += 1
                if not self._fence_signalled(fence, _WAIT_NS):
                    log.warning("frame ring '%s': slice still busy after 1 s", self.label)
            self.device.release(fence)
            self._fences[self._current] = None
        offset = self._current * self.slice_bytes
        if isinstance(data, np.ndarray):
            C.memmove(self._ptr + offset, np.ascontiguousarray(data).ctypes.data, nbytes)
        else:
            C.memmove(self._ptr + offset, bytes(view), nbytes)
        return offset

    def end_frame(self) -> None:
        """Fence the slice written (or read again) this frame, after the draws that read
        it were issued. A slice read again by a later frame gets a new fence: the slice is
        free only once the last frame that read it is done."""
        if not self.persistent or self._current < 0:
            return
        old = self._fences[self._current]
        if old is not None:
            self.device.release(old)
            self._fences[self._current] = None
        # made, tracked and released through the device like every fence
        fence = self.device.fence(f"{self.label}.slice{self._current}")
        self._fences[self._current] = fence

    def release(self) -> None:
        self.device.release(self)
