"""GL executor of virtual texturing: the page cache, the page-table texture, tile uploads,
the feedback target with its asynchronous readback, and the small draw helpers of the
standalone virtual-texture path (quads, colour targets).

Why a module of its own: the policy, page table and I/O (engine/streaming/virtual) are pure
and know no GL; everything here is a thin side effect of their decisions, made through the
Device so every object is ledgered (category `VT_CATEGORY`, the streaming pool), labelled and
leak-tracked.

The cache is one texture of `slots_x * slots_y` slots of SLOT_TEXELS^2 texels in the textures'
own BCn format, one level, GL_LINEAR: a tile goes up with one glCompressedTexSubImage2D into
its slot. The page table is an R32UI texture (2048 words a row) rather than an SSBO so the
sampling include works in GLSL 3.30 shaders like the forward pass; only the spans of rows a
frame changed are written.
"""
from __future__ import annotations

import ctypes as C
import logging
import math
from functools import partial

import moderngl
import numpy as np

from ..formats import PixelFormat
from ..memory.ledger import Category
from . import constants as K
from .device import Device
from .feedback_reduce import FeedbackReadback, FeedbackReducer
from .readback import ReadbackRing
from .shaders import load as load_shader
from .textures import GpuTexture

log = logging.getLogger(__name__)

#: Ledger category of the page cache and the page table: the streaming pool (the governor's
#: allowance for streamed texture memory pays for both).
VT_CATEGORY = Category.STREAMED
#: readback buffers of a feedback target: one copy in flight while the next is made (a
#: frame loop that waits for the GPU each frame only ever uses one; a third was never read)
FEEDBACK_READBACKS = 2
__all__ = ["ColorTarget", "FeedbackTarget", "LodProxy", "PageCache", "PageTableTexture", "QuadBatch",
           "bind_vt", "cache_grid", "load_shader", "set_uniform", "set_wrap"]


def _raw(device: Device):
    """The device's raw entry points (private to engine/gl)."""
    return device._raw


def cache_grid(slots: int, slot_texels: int, max_texture_size: int) -> tuple[int, int]:
    """The most nearly square grid of at most `slots` slots that fits the size limit."""
    if slots < 1:
        return 0, 0
    most = max(1, max_texture_size // slot_texels)
    sx = min(most, max(1, math.isqrt(slots)))
    sy = min(most, slots // sx)
    return sx, sy


class PageCache:
    """The physical page cache: one texture of slots, filled a tile at a time."""

    def __init__(self, device: Device, fmt: PixelFormat, slots_x: int, slots_y: int,
                 slot_texels: int, label: str = "vt.cache") -> None:
        self.device = device
        self.fmt = fmt
        self.slots_x, self.slots_y = int(slots_x), int(slots_y)
        self.slot_texels = int(slot_texels)
        self.tex: GpuTexture = device.storage_texture(
            fmt, self.slots_x * self.slot_texels, self.slots_y * self.slot_texels, levels=1,
            category=VT_CATEGORY, label=label)
        raw = _raw(device)
        raw.glBindTexture(self.tex.target, self.tex.glo)
        for pname in (K.TEXTURE_WRAP_S, K.TEXTURE_WRAP_T):
            raw.glTexParameteri(self.tex.target, pname, K.CLAMP_TO_EDGE)
        raw.glBindTexture(self.tex.target, 0)
        self.uploaded_bytes = 0
        self.uploads = 0

    @property
    def slots(self) -> int:
        return self.slots_x * self.slots_y

    @property
    def nbytes(self) -> int:
        return self.tex.nbytes

    @property
    def size(self) -> tuple[int, int]:
        return self.slots_x * self.slot_texels, self.slots_y * self.slot_texels

    def _bytes(self, size: int) -> int:
        """Bytes of a size x size square of the cache format."""
        f = self.fmt
        return (size // f.block_w) * (size // f.block_h) * f.block_bytes

    def _sub_image(self, raw, x: int, y: int, size: int, nbytes: int, pixels) -> None:
        """One square's write into the bound cache texture (`pixels`: client bytes, or an
        offset into the bound unpack buffer)."""
        f, target = self.fmt, self.tex.target
        if f.compressed:
            raw.glCompressedTexSubImage2D(target, 0, x, y, size, size, f.gl_internal, nbytes,
                                          pixels)
        else:
            raw.glTexSubImage2D(target, 0, x, y, size, size, f.gl_format, f.gl_type, pixels)
        self.uploaded_bytes += nbytes
        self.uploads += 1

    def upload_tile(self, slot: int, data: bytes | memoryview) -> None:
        """Write one slot's bytes (SLOT_TEXELS^2 texels of the cache format)."""
        self.upload_tiles([(slot, data)])

    def upload_tiles(self, items: list[tuple[int, bytes | memoryview]]) -> None:
        """Write several slots with one bind: every ctypes call releases and retakes the
        GIL, and with I/O threads running Python the retake can wait, so a frame's tiles
        share the bind and pixel-store calls."""
        if not items:
            return
        n = self.slot_texels
        want = self._bytes(n)
        raw = _raw(self.device)
        target = self.tex.target
        raw.glBindTexture(target, self.tex.glo)
        raw.glPixelStorei(K.UNPACK_ALIGNMENT, 1)
        try:
            for slot, data in items:
                if not 0 <= slot < self.slots:
                    raise ValueError(f"slot {slot} outside the cache's {self.slots}")
                buf = memoryview(data).cast("B")
                if buf.nbytes != want:
                    raise ValueError(f"a {self.fmt.name} slot is {want} bytes, got "
                                     f"{buf.nbytes}")
                cbuf = buf.obj if isinstance(buf.obj, bytes) else bytes(buf)
                self._sub_image(raw, *self.slot_origin(slot), n, want, cbuf)
        finally:
            raw.glPixelStorei(K.UNPACK_ALIGNMENT, 4)
            raw.glBindTexture(target, 0)

    def upload_tile_from_buffer(self, slot: int, buffer_glo: int, offset: int) -> None:
        """Write one slot from a buffer's bytes at `offset` (a compute encoder's output), on
        the GPU: no trip through the CPU."""
        if not 0 <= slot < self.slots:
            raise ValueError(f"slot {slot} outside the cache's {self.slots}")
        n = self.slot_texels
        raw, target = _raw(self.device), self.tex.target
        raw.glBindBuffer(K.PIXEL_UNPACK_BUFFER, buffer_glo)
        raw.glBindTexture(target, self.tex.glo)
        try:
            self._sub_image(raw, *self.slot_origin(slot), n, self._bytes(n),
                            C.c_void_p(offset))
        finally:
            raw.glBindTexture(target, 0)
            raw.glBindBuffer(K.PIXEL_UNPACK_BUFFER, 0)

    def upload_region(self, x: int, y: int, size: int, data: bytes) -> None:
        """Write a size x size texel square at (x, y) (block-aligned): a tail cell."""
        f = self.fmt
        want = self._bytes(size)
        if len(data) != want or x % f.block_w or y % f.block_h:
            raise ValueError(f"region {size}^2 at ({x}, {y}) needs {want} aligned bytes")
        raw = _raw(self.device)
        raw.glBindTexture(self.tex.target, self.tex.glo)
        raw.glPixelStorei(K.UNPACK_ALIGNMENT, 1)
        try:
            self._sub_image(raw, x, y, size, want, bytes(data))
        finally:
            raw.glPixelStorei(K.UNPACK_ALIGNMENT, 4)
            raw.glBindTexture(self.tex.target, 0)

    def copy_slots(self, src: "PageCache", moves: list[tuple[int, int]]) -> None:
        """Copy slots of `src` into this cache on the GPU (glCopyImageSubData, GL 4.3 or
        ARB_copy_image): `moves` are (source slot, slot here). What lets the cache grow
        and shrink without re-reading the tiles it keeps."""
        self.copy_regions(src, [(src.slot_origin(a), self.slot_origin(b), self.slot_texels)
                                for a, b in moves])

    def copy_regions(self, src: "PageCache",
                     regions: list[tuple[tuple[int, int], tuple[int, int], int]]) -> None:
        """Copy square texel regions of `src` here: ((x, y) there, (x, y) here, size)
        each (the packed cells of small levels, several to a slot)."""
        self.device.commands.copy_squares(src.tex, self.tex, regions)

    def slot_origin(self, slot: int) -> tuple[int, int]:
        return (slot % self.slots_x) * self.slot_texels, (slot // self.slots_x) * self.slot_texels

    def use(self, unit: int) -> None:
        self.tex.use(unit)

    def release(self) -> None:
        self.device.release(self.tex)


class PageTableTexture:
    """The page table on the GPU: an R32UI texture of `width`-word rows."""

    def __init__(self, device: Device, width: int, rows: int,
                 label: str = "vt.table") -> None:
        self.device = device
        self.width, self.rows = int(width), int(rows)
        self.tex = device.texture((self.width, self.rows), 1, dtype="u4",
                                  category=VT_CATEGORY, label=label)
        self.tex.filter = (moderngl.NEAREST, moderngl.NEAREST)
        self.uploaded_words = 0

    @property
    def nbytes(self) -> int:
        return self.width * self.rows * 4

    def write(self, words: np.ndarray, rects: list[tuple[int, int, int, int]]) -> None:
        """Upload rectangles (first row, rows, first column, columns) of the CPU table:
        the words a frame changed, never the whole table."""
        for r0, n, c0, w in rects:
            n = min(n, self.rows - r0)
            if n <= 0 or w <= 0:
                continue
            rows = np.zeros((n, self.width), np.uint32)
            src = words[r0 * self.width:(r0 + n) * self.width]
            rows.ravel()[:src.size] = src
            block = np.ascontiguousarray(rows[:, c0:c0 + w])
            self.tex.write(block.tobytes(), viewport=(c0, r0, w, n), alignment=4)
            self.uploaded_words += block.size

    def use(self, unit: int) -> None:
        self.tex.use(unit)

    def release(self) -> None:
        self.device.release(self.tex)


class LodProxy:
    """A 1x1 mipmapped texture shaders ask for textureQueryLod only: the driver's own
    level-of-detail rule for any texture size (see shaders/vt_sample.glsl)."""

    def __init__(self, device: Device, label: str = "vt.lod_proxy") -> None:
        self.device = device
        self.tex = device.texture((1, 1), 1, b"\0", category=VT_CATEGORY, label=label)
        self.tex.filter = (moderngl.LINEAR_MIPMAP_LINEAR, moderngl.LINEAR)

    @property
    def nbytes(self) -> int:
        return 1

    def use(self, unit: int) -> None:
        self.tex.use(unit)

    def release(self) -> None:
        self.device.release(self.tex)


def set_uniform(program: moderngl.Program, name: str, value) -> None:
    """Set a uniform if the program has it (compilers drop unused ones)."""
    if name in program:
        program[name].value = value


def bind_vt(program: moderngl.Program, cache: PageCache, table: PageTableTexture,
            proxy: LodProxy, cache_unit: int, table_unit: int, proxy_unit: int,
            tail_bases: tuple[int, int, int, int] = (0, 0, 0, 0), tail_block: int = 4) -> None:
    """Bind the cache, table and LOD proxy to texture units; point the samplers at them.
    `tail_bases`: first cache slot of each size class of packed small levels; `tail_block`:
    the format's block width (a class-k cell holds block << k texels and a border)."""
    set_uniform(program, "u_vt_tail_base", tuple(int(b) for b in tail_bases))
    set_uniform(program, "u_vt_tail_block", int(tail_block))
    cache.use(cache_unit)
    table.use(table_unit)
    proxy.use(proxy_unit)
    set_uniform(program, "u_vt_cache", cache_unit)
    set_uniform(program, "u_vt_table", table_unit)
    set_uniform(program, "u_vt_lod_proxy", proxy_unit)
    set_uniform(program, "u_vt_slots_x", cache.slots_x)
    w, h = cache.size
    set_uniform(program, "u_vt_cache_texels", (float(w), float(h)))


# ---------------------------------------------------------------------------- feedback
class FeedbackTarget:
    """An RG32UI target the feedback pass draws into (a 64-bit tile key a pixel: low word,
    high word), read back through a `ReadbackRing` as (h, w, 2) uint32:
    `begin` binds and clears it, the caller draws, `end` starts the copy, and a later
    `poll` returns the newest finished image without ever waiting (None when none is).

    Where the feedback is reduced on the GPU (`reduce`; by default the device profile's
    `feedback_reduce`), `end` also runs the reduction (`FeedbackReducer`) and
    `poll_feedback` returns that frame's list of unique keys, reading its image only when
    the list spilled."""

    def __init__(self, device: Device, ring: int = FEEDBACK_READBACKS,
                 label: str = "vt.feedback", reduce: bool | None = None) -> None:
        self.device = device
        self.label = label
        self.size = (0, 0)
        self._ring = ReadbackRing(device, ring, label)
        on_gpu = device.profile.feedback_reduce == "gpu" if reduce is None else reduce
        self.reducer = FeedbackReducer(device, ring, label) if on_gpu else None
        self._color = None
        self._fbo = None
        self.skipped = 0
        self.latest_frame = -1

    def _ensure(self, size: tuple[int, int]) -> moderngl.Framebuffer:
        if self._fbo is not None and size == self.size:
            return self._fbo
        self._release_target()
        self._color = self.device.texture(size, 2, dtype="u4", category=Category.TARGET,
                                          label=self.label)
        self._fbo = self.device.framebuffer([self._color], self._make_depth(size),
                                            label=f"{self.label}.fbo")
        self.size = size
        return self._fbo

    def _make_depth(self, size: tuple[int, int]) -> moderngl.Renderbuffer | None:
        return None  # the standalone quads need no depth

    def _release_target(self) -> None:
        for obj in (self._fbo, self._color):
            self.device.release(obj)
        self._fbo = self._color = None

    def reserve(self, size: tuple[int, int]) -> None:
        """Make the target and every readback buffer at exactly `size` (the old ones go
        first), so drawing at that size allocates nothing."""
        w, h = int(size[0]), int(size[1])
        self._ensure((w, h))
        self._ring.reserve(w * h * 4 * 2)
        if self.reducer is not None:
            self.reducer.reserve((w, h))

    @property
    def nbytes(self) -> int:
        """Bytes of the target, its readback buffers and the GPU reduction's."""
        w, h = self.size
        return (w * h * 8 if self._color is not None else 0) + self._ring.nbytes + \
            (self.reducer.nbytes if self.reducer is not None else 0)

    def begin(self, size: tuple[int, int]) -> bool:
        """Bind and clear the target at `size`; False when every readback is still in
        flight (skip this frame's pass)."""
        if not self._ring.has_free():
            self.skipped += 1
            return False
        fbo = self._ensure((int(size[0]), int(size[1])))
        fbo.use()
        fbo.clear(0.0, 0.0, 0.0, 0.0)
        prepare_2d_draw(self.device)
        return True

    def end(self, frame: int) -> None:
        also = None if self.reducer is None else \
            partial(self.reducer.dispatch, self._color, self.size)
        self._ring.start(self._fbo, self.size, 2, frame, also=also)

    def poll(self) -> np.ndarray | None:
        """The newest finished image (read whole, whatever the reducer did)."""
        got = self._ring.poll()
        if got is None:
            return None
        self.latest_frame = got.frame
        return got.image

    def poll_feedback(self) -> FeedbackReadback | None:
        """The newest finished frame: its GPU list of unique keys where there is one, else
        its image (no reducer, or the list spilled). Never waits."""
        index = self._ring.take()
        if index is None:
            return None
        self.latest_frame = frame = self._ring.frame_of(index)
        listed = self.reducer.read(index) if self.reducer is not None else None
        if listed is not None:
            return FeedbackReadback(frame, words=listed[0], pixels=listed[1])
        return FeedbackReadback(frame, image=self._ring.image(index).image)

    def in_flight(self) -> int:
        return self._ring.in_flight()

    def release(self) -> None:
        self._ring.release()
        self._release_target()
        if self.reducer is not None:
            self.reducer.release()


# ---------------------------------------------------------------------------- draw helpers
def prepare_2d_draw(device: Device) -> None:
    """No depth test, no blending, no culling: the standalone path draws flat quads."""
    device.set_state(depth_test=False, blend=False, cull=False)


def set_wrap(device: Device, tex: GpuTexture, repeat: bool) -> None:
    """GL_REPEAT or GL_CLAMP_TO_EDGE on both axes of a raw texture (the reference path)."""
    raw = _raw(device)
    raw.glBindTexture(tex.target, tex.glo)
    for pname in (K.TEXTURE_WRAP_S, K.TEXTURE_WRAP_T):
        raw.glTexParameteri(tex.target, pname, K.REPEAT if repeat else K.CLAMP_TO_EDGE)
    raw.glBindTexture(tex.target, 0)


class ColorTarget:
    """An RGBA8 colour target to draw into and read back (top row first)."""

    def __init__(self, device: Device, size: tuple[int, int], label: str = "vt.color") -> None:
        self.device = device
        self.size = (int(size[0]), int(size[1]))
        self.tex = device.texture(self.size, 4, category=Category.TARGET, label=label)
        self.fbo = device.framebuffer([self.tex], label=f"{label}.fbo")

    def begin(self, clear=(0.0, 0.0, 0.0, 1.0)) -> None:
        self.fbo.use()
        self.fbo.clear(*clear)
        prepare_2d_draw(self.device)

    def read(self) -> np.ndarray:
        w, h = self.size
        data = self.fbo.read(components=4, alignment=1)
        return np.frombuffer(data, np.uint8).reshape(h, w, 4)[::-1].copy()

    def release(self) -> None:
        self.device.release(self.fbo)
        self.device.release(self.tex)


class QuadBatch:
    """Quads (two triangles each) in one vertex buffer: position xyz, uv, texture id; drawn
    whole or quad by quad with any of the virtual-texture programs."""

    FORMAT = "3f 2f 1f"
    ATTRIBUTES = ("in_position", "in_uv", "in_vt")

    def __init__(self, device: Device, vertices: np.ndarray, label: str = "vt.quads") -> None:
        self.device = device
        v = np.ascontiguousarray(vertices, np.float32)
        if v.ndim != 2 or v.shape[1] != 6 or v.shape[0] % 6:
            raise ValueError("quad vertices are (6 * quads, 6) floats: xyz, uv, vt")
        self.quads = v.shape[0] // 6
        self.vbo = device.buffer(v.tobytes(), category=Category.BUFFER, label=label)
        self.label = label
        self._vaos: dict[int, moderngl.VertexArray] = {}

    def draw(self, program: moderngl.Program, first_quad: int = 0,
             quads: int | None = None) -> None:
        vao = self._vaos.get(id(program))
        if vao is None:
            vao = self.device.vertex_array(program, [(self.vbo, self.FORMAT, *self.ATTRIBUTES)],
                                           label=f"{self.label}.vao", skip_errors=True)
            self._vaos[id(program)] = vao
        n = self.quads - first_quad if quads is None else quads
        vao.render(moderngl.TRIANGLES, vertices=6 * n, first=6 * first_quad)

    def release(self) -> None:
        for vao in self._vaos.values():
            self.device.release(vao)
        self._vaos.clear()
        self.device.release(self.vbo)


class DepthFeedbackTarget(FeedbackTarget):
    """A FeedbackTarget with a depth buffer: a scene's feedback pass must be depth-tested,
    or a panel behind a wall asks for tiles and overwrites the key of the one in front
    (the standalone quads are one flat wall and need none). `begin` leaves depth testing
    on; the depth buffer is counted with the target (category `target`)."""

    def __init__(self, device: Device, ring: int = FEEDBACK_READBACKS,
                 label: str = "vt.feedback", reduce: bool | None = None) -> None:
        super().__init__(device, ring, label, reduce)
        self._depth = None

    def _make_depth(self, size: tuple[int, int]) -> moderngl.Renderbuffer:
        self._depth = self.device.renderbuffer(size, depth=True, category=Category.TARGET,
                                               label=f"{self.label}.depth")
        return self._depth

    @property
    def nbytes(self) -> int:
        w, h = self.size
        return super().nbytes + (w * h * 4 if self._depth is not None else 0)

    def _release_target(self) -> None:
        super()._release_target()
        if getattr(self, "_depth", None) is not None:
            self.device.release(self._depth)
            self._depth = None

    def begin(self, size: tuple[int, int]) -> bool:
        if not super().begin(size):
            return False
        self._fbo.clear(0.0, 0.0, 0.0, 0.0, depth=1.0)
        self.device.set_state(depth_test=True)
        return True
