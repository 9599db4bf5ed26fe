"""How a streamed texture's resident range changes on the GPU: the two executors.

`ReallocBackend` (portable): immutable storage of exactly the resident levels. Growing or
shrinking makes the new storage, copies the kept levels on the GPU (glCopyImageSubData),
uploads the new level, then releases the old; both exist meanwhile and both are ledgered.
`SparseBackend` (ARB_sparse_texture, e.g. NVIDIA): one texture with the whole chain's
address space; levels are committed and decommitted in place, no copy, no transient.
Both expose the exact bytes of every resident range, which the policy plans with.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from ...errors import GLError
from ...gl.device import Device
from ...gl.sparse import SparseLayout, commit, sparse_texture
from ...gl.staging import StagingRing
from ...gl.textures import GpuTexture
from ...memory.sizes import texture_bytes
from ...textures import TextureFile
from ...memory.ledger import Category
from .staging import StagingNeed, segment_bytes

log = logging.getLogger(__name__)

CATEGORY = Category.STREAMED
#: segments of the staging ring: one per frame in flight
SEGMENTS = 3


@dataclass(eq=False)
class Streamed:
    """One registered texture: its file (header only) and its current GPU object."""

    key: str
    tf: TextureFile
    tex: GpuTexture | None = None
    layout: SparseLayout | None = None
    base: int = 0  # finest resident chain level
    failed: bool = False


class Uploader:
    """Level uploads through the staging ring when it has one with room, else from client
    memory. The ring's size follows the uploads (`resize`, by the rule of staging.py)."""

    def __init__(self, device: Device, max_segment: int) -> None:
        self.device = device
        self.ring: StagingRing | None = None
        self.ring_ok = False
        #: the most a segment may grow to; 0 where the driver has no persistent mapping
        self.max_segment = max_segment if device.caps.buffer_storage else 0
        self.frame_bytes = 0  # uploaded since begin_frame
        self.idle_frames = 0  # frames in a row that uploaded nothing

    def begin_frame(self) -> None:
        self.ring_ok = self.ring.begin_frame() if self.ring is not None else False
        self.frame_bytes = 0

    @property
    def ring_bytes(self) -> int:
        return self.ring.size if self.ring is not None else 0

    def resize(self, waiting: int, pool_room: int) -> None:
        """Fit the ring to this frame's uploads, the bytes still waiting for theirs and the
        pool's free room (`pool_room`: the pool less what the streamer holds). The old ring
        goes before the new one is made, so the two never add up."""
        self.idle_frames = 0 if self.frame_bytes else self.idle_frames + 1
        if not self.max_segment:
            return
        current = self.ring.segment_bytes if self.ring is not None else 0
        need = StagingNeed(self.frame_bytes, waiting, self.ring_bytes + pool_room,
                           self.idle_frames)
        segment = segment_bytes(current, need, SEGMENTS, self.max_segment)
        if segment == current:
            return
        log.debug("staging ring segment %d -> %d bytes", current, segment)
        self.release_ring()
        if segment:
            self.ring = StagingRing(self.device, segment, SEGMENTS, label="streamer-staging")

    def release_ring(self) -> None:
        if self.ring is not None:
            self.ring.release()
            self.ring = None
        self.ring_ok = False

    def end_frame(self) -> None:
        if self.ring is not None:
            self.ring.end_frame()

    def level(self, tex: GpuTexture, item: Streamed, level: int, data: bytes) -> None:
        """Upload a whole level (every layer and face, KTX2 order) into `tex`."""
        images = item.tf.layers * item.tf.faces
        step = len(data) // images
        for i in range(images):
            chunk = memoryview(data)[i * step:(i + 1) * step]
            layer, face = divmod(i, item.tf.faces)
            self._send(tex, level, chunk, layer, face, None)

    def levels(self, tex: GpuTexture, item: Streamed, levels: list[tuple[int, bytes]]
               ) -> None:
        """Upload several whole levels: through the ring level by level while a frame has
        it, else all from client memory in one batched device call (registration)."""
        if self.ring_ok:
            for level, data in levels:
                self.level(tex, item, level, data)
        else:
            self.device.commands.upload_levels(tex, levels)

    def rows(self, tex: GpuTexture, level: int, band: memoryview, y0: int, y1: int) -> None:
        """Upload texel rows [y0, y1) of a single-image level (a chunk of a big level)."""
        self._send(tex, level, band, 0, 0, (y0, y1))

    def _send(self, tex: GpuTexture, level: int, data: memoryview, layer: int, face: int,
              rows: tuple[int, int] | None) -> None:
        self.frame_bytes += data.nbytes
        offset = self.ring.write(data) if self.ring_ok else None
        if offset is None:
            self.device.commands.upload(tex, level, data, layer, face, rows)
        else:
            self.device.commands.upload_from_buffer(tex, level, self.ring.glo, offset, data.nbytes,
                                           layer, face, rows)


class ReallocBackend:
    name = "realloc"
    realloc = True

    def __init__(self, device: Device) -> None:
        self.device = device

    @staticmethod
    def tail_base(tf: TextureFile, tail: int) -> int:
        return tail

    def storage_bytes(self, tf: TextureFile, base: int) -> int:
        return texture_bytes(tf.pixel_format, tf.width, tf.height, levels=len(tf.levels) - base,
                             base_level=base, layers=tf.layers, faces=tf.faces)

    def _allocate(self, item: Streamed, base: int) -> GpuTexture:
        tf = item.tf
        return self.device.storage_texture(tf.pixel_format, tf.width, tf.height,
                                           levels=len(tf.levels) - base, base_level=base,
                                           layers=tf.layers, cube=tf.is_cube, category=CATEGORY,
                                           label=f"{item.key}@{base}")

    def create(self, item: Streamed, base: int, read, up: Uploader) -> None:
        tex = self._allocate(item, base)
        try:
            up.levels(tex, item, [(lvl, read(lvl)) for lvl in range(base, len(item.tf.levels))])
        except BaseException:
            self.device.release(tex)
            raise
        item.tex, item.base = tex, base

    def change(self, item: Streamed, new_base: int, data: bytes | None, up: Uploader) -> None:
        """Grow by one level (data = that level) or shrink to new_base (data None)."""
        if data is not None:
            load_whole(self, item, new_base, data, up)
            return
        old = item.tex
        new = self._allocate(item, new_base)
        try:
            self.device.commands.copy_levels(old, new, range(new_base, len(item.tf.levels)))
        except BaseException:
            self.device.release(new)
            raise
        self.device.release(old)
        item.tex, item.base = new, new_base

    def shrink_through_host(self, item: Streamed, new_base: int,
                            up: Uploader) -> GLError | None:
        """Shrink to new_base without old and new storage at once: the kept levels are read
        back, the old storage released, the new one made and filled. For a frame whose
        memory has no room for even a tail-sized copy; it stalls on the read-back. The
        coarsest level alone (a block or two) is made first, in memory the old storage gave
        back: where the new storage then cannot be made (a GL out-of-memory) the texture
        keeps it (`item.base`) and shows its average colour, and the error is returned.
        Only if GL cannot make even that block is the error raised with no storage left
        (the streamer then binds nothing for it: it samples black)."""
        old = item.tex
        last = len(item.tf.levels) - 1
        kept = {lvl: self.device.commands.read_level(old, lvl)
                for lvl in range(new_base, last + 1)}
        self.device.release(old)
        item.tex = None
        self.create(item, last, kept.__getitem__, up)
        if new_base == last:
            return None
        coarsest = item.tex
        try:
            self.create(item, new_base, kept.__getitem__, up)
        except GLError as exc:
            return exc
        self.device.release(coarsest)
        return None

    # A load in three steps, so a big level can be uploaded in bands over several frames:
    # the new storage exists (and is ledgered) from begin_load to finish/abort.
    def begin_load(self, item: Streamed, new_base: int) -> GpuTexture:
        new = self._allocate(item, new_base)
        try:
            self.device.commands.copy_levels(item.tex, new, range(item.base, len(item.tf.levels)))
        except BaseException:
            self.device.release(new)
            raise
        return new

    def finish_load(self, item: Streamed, new_base: int, target: GpuTexture) -> None:
        self.device.release(item.tex)
        item.tex, item.base = target, new_base

    def abort_load(self, item: Streamed, new_base: int, target: GpuTexture) -> None:
        self.device.release(target)

    def release(self, item: Streamed) -> None:
        self.device.release(item.tex)
        item.tex = None


class SparseBackend:
    name = "sparse"
    realloc = False

    def __init__(self, device: Device) -> None:
        self.device = device
        self._layouts: dict[tuple, SparseLayout] = {}

    #: Below this full-chain size a texture streams by reallocation without asking the
    #: driver for its page geometry (the tail-share test below would refuse it anyway).
    MIN_BYTES = 1 << 20
    #: Sparse memory comes in 64 KiB pages and the driver's mip tail is committed whole, so a
    #: texture streams sparsely only when that committed tail costs at most this share of its
    #: full chain; otherwise by reallocation, whose tail is the exact level sizes. Measured on
    #: the H200: 5,000 256^2 BC1 textures held 312 MiB of tails vs 13 MiB, and the 10,000 x
    #: 1024^2 BC7 wall held 625 MiB of tails (one page each, 4.7% of a chain) of the 664 MiB
    #: its flight ever wanted, so no budget could bind on the levels the screen asks for.
    #: 2048^2 BC7 (1.2%) and larger stay sparse.
    MAX_TAIL_SHARE = 1 / 32

    def supports(self, tf: TextureFile) -> bool:
        full = sum(lv.nbytes for lv in tf.levels)
        if not (tf.layers == 1 and tf.faces == 1 and tf.depth == 1 and full >= self.MIN_BYTES):
            return False
        return self._layout(tf).tail_bytes <= full * self.MAX_TAIL_SHARE

    def _layout(self, tf: TextureFile) -> SparseLayout:
        key = (tf.format, tf.width, tf.height, len(tf.levels))
        if key not in self._layouts:  # page geometry needs a texture; make one and drop it
            tex, lay = sparse_texture(self.device, tf.pixel_format, tf.width, tf.height,
                                      len(tf.levels), label="sparse-probe")
            self.device.release(tex)
            self._layouts[key] = lay
        return self._layouts[key]

    def tail_base(self, tf: TextureFile, tail: int) -> int:
        """The driver's sparse mip tail is committed as one unit, so it is always resident."""
        return min(tail, self._layout(tf).num_sparse_levels)

    def storage_bytes(self, tf: TextureFile, base: int) -> int:
        return self._layout(tf).bytes_from(base)

    def create(self, item: Streamed, base: int, read, up: Uploader) -> None:
        tf = item.tf
        tex, lay = sparse_texture(self.device, tf.pixel_format, tf.width, tf.height,
                                  len(tf.levels), label=item.key)
        item.tex, item.layout, item.base = tex, lay, len(tf.levels)
        try:
            for lvl in range(len(tf.levels) - 1, base - 1, -1):
                self._commit(item, lvl, True)
                up.level(tex, item, lvl, read(lvl))
                item.base = lvl
        except BaseException:
            self.device.release(tex)
            item.tex = None
            raise
        self._set_base(item)

    def _commit(self, item: Streamed, level: int, on: bool) -> None:
        lay = item.layout
        if level >= lay.num_sparse_levels and (not on or item.base <= lay.num_sparse_levels):
            return  # the tail is one unit: committed once, never decommitted
        commit(self.device, item.tex, lay, level, on)
        base = level if on else level + 1
        self.device.reaccount(item.tex, lay.bytes_from(min(base, lay.num_sparse_levels)))

    def _set_base(self, item: Streamed) -> None:
        # Sampling must never touch uncommitted pages: clamp the sampled range.
        self.device.commands.set_base_level(item.tex, item.base)

    def change(self, item: Streamed, new_base: int, data: bytes | None, up: Uploader) -> None:
        if data is not None:
            load_whole(self, item, new_base, data, up)
            return
        for lvl in range(item.base, new_base):
            self._commit(item, lvl, False)
        item.base = new_base
        self._set_base(item)

    def begin_load(self, item: Streamed, new_base: int) -> GpuTexture:
        self._commit(item, new_base, True)  # not sampled until finish_load lowers the base
        return item.tex

    def finish_load(self, item: Streamed, new_base: int, target: GpuTexture) -> None:
        item.base = new_base
        self._set_base(item)

    def abort_load(self, item: Streamed, new_base: int, target: GpuTexture) -> None:
        self._commit(item, new_base, False)

    def release(self, item: Streamed) -> None:
        self.device.release(item.tex)
        item.tex = None


def load_whole(backend, item: Streamed, new_base: int, data: bytes, up: Uploader) -> None:
    """A one-frame load: begin, upload the whole level, finish (abort on any failure)."""
    target = backend.begin_load(item, new_base)
    try:
        up.level(target, item, new_base, data)
    except BaseException:
        backend.abort_load(item, new_base, target)
        raise
    backend.finish_load(item, new_base, target)
