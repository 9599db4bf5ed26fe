"""The virtual-texture feedback image reduced on the GPU to a short list of unique keys.

Why: reading the whole feedback image back and reducing it on the CPU costs time that grows
with the screen (the pixels), while what the streamer needs grows with the tiles it shows (a
few hundred keys at 4K). A compute pass (shaders/vt_feedback_reduce.comp.glsl: a hash table
in a storage buffer, atomicCompSwap to claim a slot, atomicAdd for the pixel count, then a
compaction behind an atomic counter) turns the image into (key, pixels) entries; the list is
copied into a buffer of the feedback's readback ring under the same fence as the image copy,
and the CPU reads only the list's header and its entries, never waiting.

A frame the table cannot hold (more unique keys than slots, a probe run too long, a key
outside the layout) is not dropped: its header counts the spilled pixels, and the caller
reduces that frame's image, which the ring copied as before, on the CPU. Drivers without
compute (GL below 4.3) get no reducer and always take the CPU path.

Memory: the table, the list and one list copy per readback buffer, each 2 bytes a feedback
pixel (`BYTES_PER_PIXEL`: 16-byte entries, one per 8 pixels), ledgered through the Device
and priced with the feedback target (render/vt_feedback.py `feedback_specs`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ..memory.ledger import Category
from .device import Device
from .shaders import load as load_shader
from .types import Buffer

log = logging.getLogger(__name__)

#: Bytes of each of the reducer's buffers per feedback pixel (what RG8 costs: the format
#: its buffers are priced as).
BYTES_PER_PIXEL = 2
#: A table slot and a list entry: four uint32 words.
ENTRY_BYTES = 16
_GROUP = 64  # local_size_x of the shader
_MAX_GROUPS = 65535  # the least GL_MAX_COMPUTE_WORK_GROUP_COUNT GL 4.3 guarantees


def entries(size: tuple[int, int]) -> int:
    """Table slots (and list entries, the header being one) for a feedback of `size`."""
    return int(size[0]) * int(size[1]) * BYTES_PER_PIXEL // ENTRY_BYTES


@dataclass(frozen=True)
class FeedbackReadback:
    """One finished feedback frame: the GPU's list of unique keys (`words`: low word, high
    word per key, in no order; `pixels` per key) or, where it has none (no compute, or the
    frame spilled), the whole image of (h, w, 2) words."""

    frame: int
    image: np.ndarray | None = None
    words: np.ndarray | None = None
    pixels: np.ndarray | None = None


class FeedbackReducer:
    """The compute pass and its buffers for one feedback target with a ring of `ring`
    readback buffers."""

    def __init__(self, device: Device, ring: int, label: str = "vt.feedback") -> None:
        self.device = device
        self.label = label
        self._prog = device.shared_compute_shader(
            load_shader("vt_feedback_reduce.comp.glsl"), label="vt.feedback.reduce")
        self._ring = int(ring)
        self._table: Buffer | None = None
        self._list: Buffer | None = None
        self._copies: list[Buffer | None] = [None] * self._ring
        #: which copies hold a list of the current buffers (one made before a resize
        #: does not: its frame is read from its image instead)
        self._listed = [False] * self._ring
        self.size = (0, 0)
        self.spilled_frames = 0
        self._said_spill = False

    @property
    def nbytes(self) -> int:
        """Bytes of the table, the list and the list copies."""
        return sum(b.size for b in (self._table, self._list, *self._copies) if b is not None)

    def reserve(self, size: tuple[int, int]) -> None:
        """Every buffer at exactly `size`'s bytes now (the old ones go first)."""
        size = (int(size[0]), int(size[1]))
        if size == self.size and self._table is not None:
            return
        self._release_buffers()
        self.size = (0, 0)
        nbytes = size[0] * size[1] * BYTES_PER_PIXEL
        made: list[Buffer] = []
        if entries(size) >= 2:  # else no room for a header and an entry: the CPU path
            try:  # all or none: a failed allocation releases the ones made before it
                for name in ("table", "list", *(f"list.readback{i}" for i in range(self._ring))):
                    made.append(self._buffer(nbytes, name))
            except BaseException:
                for buf in made:
                    self.device.release(buf)
                raise
            made[0].write(bytes(nbytes))  # empty; each frame's compaction empties it again
            self._table, self._list, *self._copies = made
        self.size = size

    def _buffer(self, nbytes: int, name: str) -> Buffer:
        return self.device.buffer(reserve=nbytes, dynamic=True, category=Category.STAGING,
                                  label=f"{self.label}.{name}")

    def dispatch(self, image, size: tuple[int, int], index: int) -> None:
        """Reduce `image` (the RG32UI feedback texture, drawn at `size`) into the list and
        copy the list into readback buffer `index`; issued before the ring's fence."""
        self.reserve(size)
        if self._table is None:
            return
        n_slots = entries(self.size)
        self._list.write(bytes(ENTRY_BYTES))  # header: count, spilled
        self._table.bind_to_storage_buffer(0)
        self._list.bind_to_storage_buffer(1)
        image.bind_to_image(0, read=True, write=False)
        prog = self._prog
        prog["u_slots"].value = n_slots
        prog["u_entries"].value = n_slots - 1
        prog["u_size"].value = self.size
        for phase, count in ((0, self.size[0] * self.size[1]), (1, n_slots)):
            prog["u_phase"].value = phase
            groups = -(-count // _GROUP)
            gx = min(groups, _MAX_GROUPS)
            prog.run(gx, -(-groups // gx))
            self.device.storage_barrier()
        self.device._ctx.copy_buffer(self._copies[index], self._list)
        self._listed[index] = True

    def read(self, index: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The list in readback buffer `index` (its fence signalled) as (words (n, 2),
        pixels (n,)), or None when that frame spilled or was listed in buffers a resize
        has since replaced (reduce its image instead)."""
        if not self._listed[index]:
            return None
        self._listed[index] = False
        buf = self._copies[index]
        count, spilled = (int(v) for v in np.frombuffer(buf.read(size=8), np.uint32))
        if spilled or count > entries(self.size) - 1:
            self.spilled_frames += 1
            if not self._said_spill:
                self._said_spill = True
                log.info("%s: %d keys and %d spilled pixels beyond the GPU list of %d; such "
                         "frames are reduced on the CPU", self.label, count, spilled,
                         entries(self.size) - 1)
            return None
        if count == 0:
            return np.zeros((0, 2), np.uint32), np.zeros(0, np.int64)
        rows = np.frombuffer(buf.read(size=count * ENTRY_BYTES, offset=ENTRY_BYTES),
                             np.uint32).reshape(count, 4)
        return rows[:, :2], rows[:, 2].astype(np.int64)

    def _release_buffers(self) -> None:
        for buf in (self._table, self._list, *self._copies):
            self.device.release(buf)
        self._table = self._list = None
        self._copies = [None] * self._ring
        self._listed = [False] * self._ring

    def release(self) -> None:
        self._release_buffers()  # the program is the device's (kept until shutdown)
