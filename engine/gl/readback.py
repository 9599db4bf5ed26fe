"""Asynchronous readback of a small render target: a ring of pixel-pack buffers with fences.

Why one module: the mip-level feedback pass (render/feedback.py) and the virtual-texture
feedback target (gl/vt.py) both copy a low-resolution integer image to the CPU every few
frames and must never wait for the GPU to do it. Each copy goes into a PBO of the ring
(glReadPixels into a buffer returns at once) followed by a fence; a later frame asks the
fences with a zero timeout and takes the newest finished copy. With every buffer in flight
a new copy is refused (the caller skips that frame's pass) rather than waited for.

The buffers are ledgered as staging memory and the fences as objects of their own, through
the Device, so a leak check sees both.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..memory.ledger import Category
from .commands import Fence
from .device import Device
from .types import Buffer, Framebuffer


@dataclass(eq=False)
class _Slot:
    buffer: Buffer | None = None
    fence: Fence | None = None  # set while the GPU copy may be in flight
    frame: int = -1
    size: tuple[int, int] = (0, 0)
    nbytes: int = 0
    tag: Any = None  # what the caller needs to read the image (e.g. how many ids it names)


@dataclass(frozen=True)
class Readback:
    """A finished copy: the frame it was drawn in, its size (w, h) and its uint32 words
    (components per pixel along the last axis), plus the caller's tag."""

    frame: int
    size: tuple[int, int]
    image: np.ndarray
    tag: Any = None


class ReadbackRing:
    """`ring` PBOs and fences for asynchronous uint32 readbacks of a framebuffer."""

    def __init__(self, device: Device, ring: int = 3, label: str = "readback") -> None:
        if ring < 2:
            raise ValueError("a readback ring needs at least 2 buffers to avoid waiting")
        self.device = device
        self.label = label
        self._slots = [_Slot() for _ in range(ring)]

    def has_free(self) -> bool:
        """Whether a copy can start now (else the caller skips its pass this frame)."""
        return any(s.fence is None for s in self._slots)

    def in_flight(self) -> int:
        return sum(s.fence is not None for s in self._slots)

    def reserve(self, nbytes: int) -> None:
        """Give every buffer of the ring exactly `nbytes` now, so no later copy of at most
        that size allocates and the ring holds what its owner priced. A copy still in
        flight in a buffer of another size is dropped (a feedback frame lost, never a
        wait); each buffer goes before its replacement is made."""
        for slot in self._slots:
            if slot.buffer is None or slot.buffer.size != nbytes:
                self._retire(slot)
                self._resize(slot, nbytes)

    @property
    def nbytes(self) -> int:
        """Bytes of the ring's buffers."""
        return sum(s.buffer.size for s in self._slots if s.buffer is not None)

    def _resize(self, slot: _Slot, nbytes: int) -> None:
        old, slot.buffer = slot.buffer, None
        self.device.release(old)
        slot.buffer = self.device.buffer(reserve=nbytes, category=Category.STAGING,
                                         label=f"{self.label}.pbo")

    def start(self, fbo: Framebuffer, size: tuple[int, int], components: int, frame: int,
              tag: Any = None, also: Callable[[int], None] | None = None) -> bool:
        """Copy `fbo`'s first colour attachment (uint32 x `components` per pixel) into a
        free buffer and fence it. False when every buffer is in flight (nothing copied).
        `also(index)`: GPU work of the caller's own for buffer `index` of the ring, issued
        before the fence so the same poll sees it finished (the feedback reduction)."""
        index = next((i for i, s in enumerate(self._slots) if s.fence is None), None)
        if index is None:
            return False
        slot = self._slots[index]
        w, h = int(size[0]), int(size[1])
        nbytes = w * h * 4 * components
        if slot.buffer is None or slot.buffer.size < nbytes:
            self._resize(slot, nbytes)
        fbo.read_into(slot.buffer, components=components, dtype="u4", alignment=1)
        if also is not None:
            also(index)
        slot.fence = self.device.fence(f"{self.label}.readback")  # flushed: polls see it
        slot.frame, slot.size, slot.nbytes, slot.tag = frame, (w, h), nbytes, tag
        return True

    def poll(self) -> Readback | None:
        """The newest finished copy, or None when none finished since the last poll; older
        finished ones are superseded and their buffers freed. Never waits."""
        index = self.take()
        return None if index is None else self.image(index)

    def take(self) -> int | None:
        """The index of the newest finished copy (None when none finished since the last
        poll), its image not read: it stays in its buffer until that buffer's next
        `start`. Older finished ones are superseded. Never waits."""
        ready = [s for s in self._slots
                 if s.fence is not None and self.device.commands.fence_signalled(s.fence)]
        if not ready:
            return None
        newest = max(ready, key=lambda s: s.frame)
        for s in ready:
            self._retire(s)
        return self._slots.index(newest)

    def frame_of(self, index: int) -> int:
        """The frame buffer `index`'s copy was drawn in."""
        return self._slots[index].frame

    def image(self, index: int) -> Readback:
        """Read buffer `index`'s copy (one that `take` returned)."""
        newest = self._slots[index]
        w, h = newest.size
        words = np.frombuffer(newest.buffer.read(size=newest.nbytes), np.uint32)
        components = newest.nbytes // (4 * w * h)
        image = words.reshape(h, w) if components == 1 else words.reshape(h, w, components)
        return Readback(newest.frame, newest.size, image, newest.tag)

    def _retire(self, slot: _Slot) -> None:
        if slot.fence is not None:
            self.device.release(slot.fence)
            slot.fence = None

    def release(self) -> None:
        for s in self._slots:
            self._retire(s)
            self.device.release(s.buffer)
            s.buffer = None
