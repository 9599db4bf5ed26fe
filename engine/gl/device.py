"""The device: the one place that talks to GL.

It owns the moderngl context, the raw entry points moderngl lacks, the driver's
capabilities, the memory ledger, the VRAM probe and the leak tracker. Every GL object the
engine makes goes through a factory here, which (a) records it in the ledger with its exact
byte size and category, (b) records it with the leak tracker, (c) labels it for KHR_debug
tools, and (d) turns GL_OUT_OF_MEMORY into GLOutOfMemoryError after deleting the half-made
object, so nothing of a failed allocation stays allocated, ledgered or tracked.
"""
from __future__ import annotations

import atexit
import ctypes as C
import functools
import logging
import queue
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import moderngl

from ..diagnostics.leaks import LeakTracker, TrackedObject, moderngl_alive
from ..errors import ContextError, GLError, GLOutOfMemoryError
from ..formats import PixelFormat
from ..formats import get as get_format
from ..memory.budget import Budget
from ..memory.ledger import Allocation, Ledger
from ..memory.probe import VramProbe, VramReading
from ..memory.sizes import level_bytes, mip_dims, texture_bytes
from . import constants as K
from .capabilities import Capabilities, detect
from .context import (
    ContextHandle,
    adopt_current,
    create_headless,
    create_window,
    has_display,
)
from .raw import DEBUGPROC, RawGL
from .textures import GpuTexture

log = logging.getLogger(__name__)

_MGL_FORMATS = {(4, "f1"): "RGBA8", (1, "f1"): "R8", (2, "f1"): "RG8", (4, "f2"): "RGBA16F",
                (4, "f4"): "RGBA32F", (1, "f4"): "R32F", (2, "f2"): "RG16F"}
_DTYPE_BYTES = {"f1": 1, "u1": 1, "i1": 1, "f2": 2, "u2": 2, "i2": 2, "f4": 4, "u4": 4, "i4": 4}
_LABEL_KIND = {"texture": K.LABEL_TEXTURE, "renderbuffer": K.LABEL_RENDERBUFFER,
               "framebuffer": K.LABEL_FRAMEBUFFER, "buffer": K.LABEL_BUFFER,
               "program": K.LABEL_PROGRAM, "vertex_array": K.LABEL_VERTEX_ARRAY,
               "sampler": K.LABEL_SAMPLER}


def mgl_format(components: int, dtype: str) -> PixelFormat | None:
    """The PixelFormat moderngl picks for (components, dtype), where we have one."""
    name = _MGL_FORMATS.get((components, dtype))
    return get_format(name) if name else None


def mgl_texel_bytes(components: int, dtype: str) -> int:
    return components * _DTYPE_BYTES.get(dtype, 4)


def _release_at_exit(ref: weakref.ref[Device]) -> None:
    device = ref()
    if device is not None:
        device._at_exit()


@dataclass(eq=False)
class _Entry:
    obj: Any
    alloc: Allocation
    rec: TrackedObject
    destroy: Callable[[], None]


class Device:
    """GL context + raw entry points + capabilities + ledger + probe + leak tracker."""

    def __init__(self, handle: ContextHandle, budget: Budget | str | int | None = None, *,
                 capture_stacks: bool = False) -> None:
        self.handle = handle
        self.ctx: moderngl.Context = handle.ctx
        self.render_thread = threading.get_ident()
        self.raw = RawGL(handle.loader)
        self.caps: Capabilities = detect(self.ctx, self.raw)
        self.ledger = Ledger()
        self.tracker = LeakTracker(capture_stacks=capture_stacks)
        self.probe = VramProbe(self.raw, set(self.caps.extensions))
        first = self.probe.read()
        if isinstance(budget, Budget):
            self.budget = budget
            if self.budget.vram_total is None and first.total_bytes:
                self.budget.vram_total = first.total_bytes
                self.budget.set(self.budget.spec)
        else:
            self.budget = Budget(budget if budget is not None else "80%",
                                 vram_total=first.total_bytes)
        self._entries: dict[int, _Entry] = {}  # tracker serial -> entry
        self._by_obj: dict[int, int] = {}  # id(obj) -> serial
        self._pending: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self.debug_messages: list[tuple[int, int, str]] = []
        self._debug_proc = None
        self._install_debug_output()
        self._drain_errors()
        # A weak reference: the exit hook must not keep a dropped device (and its context) alive.
        self._atexit = functools.partial(_release_at_exit, weakref.ref(self))
        atexit.register(self._atexit)

    # ----------------------------------------------------------------- construction
    @classmethod
    def headless(cls, budget=None, **kw) -> Device:
        """EGL, no display needed: llvmpipe in CI, the real GPU on a headless server."""
        return cls(create_headless(), budget, **kw)

    @classmethod
    def window(cls, size=(1280, 720), title="engine", visible=True, budget=None, vsync=False,
               **kw) -> Device:
        return cls(create_window(size, title, visible, vsync), budget, **kw)

    @classmethod
    def adopt(cls, ctx: moderngl.Context | None = None, loader=None, budget=None,
              **kw) -> Device:
        """Embed in a host application: use its current context, never destroy it."""
        return cls(adopt_current(ctx, loader), budget, **kw)

    @classmethod
    def auto(cls, budget=None, **kw) -> Device:
        """A hidden window when a display exists, else headless EGL."""
        if has_display():
            try:
                return cls.window(visible=False, budget=budget, **kw)
            except ContextError as exc:
                log.info("no window context (%s); falling back to EGL", exc)
        return cls.headless(budget, **kw)

    # ----------------------------------------------------------------- errors
    def _drain_errors(self) -> list[int]:
        codes = []
        for _ in range(64):  # a lost context can return errors forever; don't hang
            code = self.raw.glGetError()
            if code == K.NO_ERROR:
                break
            codes.append(code)
        return codes

    def check_errors(self, what: str = "GL call") -> None:
        """Raise GLError if GL recorded any error since the last check."""
        codes = self._drain_errors()
        if codes:
            names = ", ".join(K.ERROR_NAMES.get(c, hex(c)) for c in codes)
            raise GLError(f"{what}: {names}", tuple(codes))

    def _install_debug_output(self) -> None:
        if not self.caps.debug_output or not self.raw.has("glDebugMessageCallback"):
            return

        def on_message(source, type_, id_, severity, length, message, user):
            try:
                text = C.string_at(message, length).decode("utf-8", "replace") if length > 0 \
                    else (message or b"").decode("utf-8", "replace")
            except Exception:  # never let an exception cross into the driver
                return
            level = {K.DEBUG_SEVERITY_HIGH: logging.ERROR, K.DEBUG_SEVERITY_MEDIUM:
                     logging.WARNING, K.DEBUG_SEVERITY_LOW: logging.INFO}.get(severity,
                                                                               logging.DEBUG)
            if level >= logging.WARNING:
                self.debug_messages.append((type_, severity, text))
                del self.debug_messages[:-100]
            log.log(level, "GL debug: %s", text)

        self._debug_proc = DEBUGPROC(on_message)
        self.raw.glEnable(K.DEBUG_OUTPUT)
        self.raw.glEnable(K.DEBUG_OUTPUT_SYNCHRONOUS)
        self.raw.glDebugMessageCallback(self._debug_proc, None)
        self.raw.glDebugMessageControl(K.DONT_CARE, K.DONT_CARE, K.DEBUG_SEVERITY_NOTIFICATION,
                                       0, None, 0)
        self._drain_errors()

    # ----------------------------------------------------------------- threading
    @property
    def on_render_thread(self) -> bool:
        return threading.get_ident() == self.render_thread

    def _require_render_thread(self, what: str) -> None:
        if not self.on_render_thread:
            raise ContextError(f"{what} must run on the render thread (GL is single-threaded)")
        if self._closed:
            raise ContextError(f"{what}: the device is shut down")

    # ----------------------------------------------------------------- registration
    def _label(self, kind: str, glo: int, label: str) -> None:
        if self.caps.debug_output and glo and kind in _LABEL_KIND:
            data = label.encode("utf-8")[:255]
            self.raw.glObjectLabel(_LABEL_KIND[kind], glo, len(data), data)

    def _register(self, obj: Any, kind: str, category: str, label: str, nbytes: int, glo: int,
                  destroy: Callable[[], None], alive: Callable[[], bool] | None = None) -> Any:
        self._label(kind, glo, label)
        alloc = self.ledger.add(kind, category, label, nbytes, glo)
        rec = self.tracker.track(kind, label, nbytes, glo, obj, alive)
        self._entries[rec.serial] = _Entry(obj, alloc, rec, destroy)
        self._by_obj[id(obj)] = rec.serial
        return obj

    def _guarded(self, what: str, nbytes: int, make: Callable[[], Any],
                 destroy: Callable[[Any], None]) -> Any:
        """Run an allocation; on any GL error delete what it made and raise a typed error."""
        self._require_render_thread(what)
        self._drain_errors()
        try:
            obj = make()
        except moderngl.Error as exc:
            codes = self._drain_errors()
            if K.OUT_OF_MEMORY in codes or "memory" in str(exc).lower():
                raise GLOutOfMemoryError(what, nbytes) from exc
            raise GLError(f"{what}: {exc}", tuple(codes)) from exc
        codes = self._drain_errors()
        if codes:
            destroy(obj)
            self._drain_errors()
            if K.OUT_OF_MEMORY in codes:
                raise GLOutOfMemoryError(what, nbytes)
            names = ", ".join(K.ERROR_NAMES.get(c, hex(c)) for c in codes)
            raise GLError(f"{what}: {names}", tuple(codes))
        return obj

    # ----------------------------------------------------------------- moderngl objects
    def _mgl(self, kind: str, category: str, label: str, nbytes: int,
             make: Callable[[], Any]) -> Any:
        obj = self._guarded(f"{kind} '{label}'", nbytes, make, lambda o: o.release())
        return self._register(obj, kind, category, label, nbytes, getattr(obj, "glo", 0),
                              obj.release,
                              moderngl_alive(obj))

    def texture(self, size: tuple[int, int], components: int = 4, data: bytes | None = None,
                *, dtype: str = "f1", levels: int = 1, category: str = "texture.static",
                label: str = "texture") -> moderngl.Texture:
        """An uncompressed moderngl texture; `levels` > 1 builds that many mip levels."""
        w, h = int(size[0]), int(size[1])
        fmt = mgl_format(components, dtype)
        if fmt is not None:
            nbytes = texture_bytes(fmt, w, h, levels=levels)
        else:
            nbytes = sum(mgl_texel_bytes(components, dtype) * mip_dims(w, h, i)[0]
                         * mip_dims(w, h, i)[1] for i in range(levels))

        def make():
            t = self.ctx.texture((w, h), components, data, dtype=dtype)
            if levels > 1:
                t.build_mipmaps(0, levels - 1)
            return t
        return self._mgl("texture", category, label, nbytes, make)

    def depth_texture(self, size: tuple[int, int], *, category: str = "target",
                      label: str = "depth") -> moderngl.Texture:
        nbytes = level_bytes("DEPTH24", int(size[0]), int(size[1]))
        return self._mgl("texture", category, label, nbytes,
                         lambda: self.ctx.depth_texture(tuple(size)))

    def renderbuffer(self, size: tuple[int, int], components: int = 4, *, samples: int = 0,
                     dtype: str = "f1", depth: bool = False, category: str = "target",
                     label: str = "renderbuffer") -> moderngl.Renderbuffer:
        w, h = int(size[0]), int(size[1])
        if depth:
            per = level_bytes("DEPTH24", w, h)
            make = lambda: self.ctx.depth_renderbuffer((w, h), samples=samples)
        else:
            per = mgl_texel_bytes(components, dtype) * w * h
            make = lambda: self.ctx.renderbuffer((w, h), components, samples=samples,
                                                 dtype=dtype)
        return self._mgl("renderbuffer", category, label, per * max(1, samples), make)

    def framebuffer(self, color_attachments=(), depth_attachment=None, *,
                    label: str = "framebuffer") -> moderngl.Framebuffer:
        """Framebuffers own no memory (their attachments are ledgered), but are tracked."""
        return self._mgl("framebuffer", "other", label, 0,
                         lambda: self.ctx.framebuffer(color_attachments, depth_attachment))

    def buffer(self, data: bytes | None = None, *, reserve: int = 0, dynamic: bool = False,
               category: str = "buffer", label: str = "buffer") -> moderngl.Buffer:
        nbytes = len(memoryview(data).cast("B")) if data is not None else int(reserve)
        return self._mgl("buffer", category, label, nbytes,
                         lambda: self.ctx.buffer(data, reserve=reserve, dynamic=dynamic))

    def program(self, *, label: str = "program", **shaders: str) -> moderngl.Program:
        return self._mgl("program", "other", label, 0, lambda: self.ctx.program(**shaders))

    def vertex_array(self, program, content, index_buffer=None, *,
                     label: str = "vertex_array", **kw) -> moderngl.VertexArray:
        return self._mgl("vertex_array", "other", label, 0,
                         lambda: self.ctx.vertex_array(program, content, index_buffer, **kw))

    def sampler(self, *, label: str = "sampler", **kw) -> moderngl.Sampler:
        return self._mgl("sampler", "other", label, 0, lambda: self.ctx.sampler(**kw))

    # ----------------------------------------------------------------- raw textures
    def storage_texture(self, fmt: PixelFormat | str, width: int, height: int, *,
                        levels: int = 1, base_level: int = 0, layers: int = 1,
                        cube: bool = False, category: str = "texture.static",
                        label: str = "texture") -> GpuTexture:
        """Immutable storage for chain levels base_level..base_level+levels-1 of a
        width x height chain (any format, compressed included). Contents undefined."""
        f = get_format(fmt) if isinstance(fmt, str) else fmt
        faces = 6 if cube else 1
        if layers > 1 and cube:
            target = K.TEXTURE_CUBE_MAP_ARRAY
        elif layers > 1:
            target = K.TEXTURE_2D_ARRAY
        elif cube:
            target = K.TEXTURE_CUBE_MAP
        else:
            target = K.TEXTURE_2D
        if cube and width != height:
            raise ValueError(f"cube map '{label}' must be square, got {width}x{height}")
        w, h = mip_dims(width, height, base_level)
        nbytes = texture_bytes(f, width, height, levels=levels, base_level=base_level,
                               layers=layers, faces=faces)
        what = f"{f.name} texture '{label}' {w}x{h}x{levels} levels"
        if levels < 1 or w > self.caps.max_texture_size or h > self.caps.max_texture_size:
            raise GLError(f"{what}: exceeds GL_MAX_TEXTURE_SIZE {self.caps.max_texture_size}"
                          if levels >= 1 else f"{what}: no levels")
        raw = self.raw

        def make() -> int:
            glo = raw.gen_texture()
            raw.glBindTexture(target, glo)
            if target in (K.TEXTURE_2D_ARRAY, K.TEXTURE_CUBE_MAP_ARRAY):
                raw.glTexStorage3D(target, levels, f.gl_internal, w, h, layers * faces)
            else:
                raw.glTexStorage2D(target, levels, f.gl_internal, w, h)
            raw.glTexParameteri(target, K.TEXTURE_MAX_LEVEL, levels - 1)
            raw.glTexParameteri(target, K.TEXTURE_MIN_FILTER,
                                K.LINEAR_MIPMAP_LINEAR if levels > 1 else K.LINEAR)
            raw.glTexParameteri(target, K.TEXTURE_MAG_FILTER, K.LINEAR)
            raw.glBindTexture(target, 0)
            return glo

        glo = self._guarded(what, nbytes, make, raw.delete_texture)
        tex = GpuTexture(glo, target, f, int(width), int(height), base_level, levels, layers,
                         faces, nbytes, label, category, self)
        return self._register(tex, "texture", category, label, nbytes, glo,
                              lambda: raw.delete_texture(glo))

    def upload(self, tex: GpuTexture, chain_level: int, data: bytes | memoryview,
               layer: int = 0, face: int = 0, rows: tuple[int, int] | None = None) -> None:
        """Fill one chain level of one layer/face, or only texel rows [y0, y1) of it (a
        multiple of the block height, or up to the bottom edge). `data` is exactly those
        bytes; compressed data is stored row of blocks after row of blocks, so a band of
        rows is one contiguous slice of the level."""
        buf = memoryview(data).cast("B")
        cbuf = (C.c_ubyte * buf.nbytes).from_buffer_copy(buf) if buf.readonly else \
            (C.c_ubyte * buf.nbytes).from_buffer(buf)
        self._tex_sub_image(tex, chain_level, layer, face, buf.nbytes, cbuf, rows)

    def upload_from_buffer(self, tex: GpuTexture, chain_level: int, buffer_glo: int,
                           offset: int, nbytes: int, layer: int = 0, face: int = 0,
                           rows: tuple[int, int] | None = None) -> None:
        """Fill one level (or rows of it) from a pixel unpack buffer (the streamer's staging
        ring): the driver copies asynchronously instead of from client memory in the call."""
        self.raw.glBindBuffer(K.PIXEL_UNPACK_BUFFER, buffer_glo)
        try:
            self._tex_sub_image(tex, chain_level, layer, face, nbytes, C.c_void_p(offset),
                                rows)
        finally:
            self.raw.glBindBuffer(K.PIXEL_UNPACK_BUFFER, 0)

    def _tex_sub_image(self, tex: GpuTexture, chain_level: int, layer: int, face: int,
                       nbytes: int, pointer, rows: tuple[int, int] | None = None) -> None:
        self._require_render_thread("upload")
        lvl = tex.storage_level(chain_level)
        w, h = mip_dims(tex.chain_width, tex.chain_height, chain_level)
        f = tex.fmt
        y0, y1 = rows if rows is not None else (0, h)
        if not (0 <= y0 < y1 <= h and y0 % f.block_h == 0
                and (y1 == h or y1 % f.block_h == 0)):
            raise ValueError(f"{tex.label}: rows {y0}..{y1} of a {h}-row level are not whole "
                             f"blocks")
        expected = level_bytes(f, w, y1 - y0)
        if nbytes != expected:
            raise ValueError(f"{tex.label}: level {chain_level} rows {y0}..{y1} need "
                             f"{expected} bytes, got {nbytes}")
        raw, hh = self.raw, y1 - y0
        raw.glBindTexture(tex.target, tex.glo)
        raw.glPixelStorei(K.UNPACK_ALIGNMENT, 1)
        if tex.target in (K.TEXTURE_2D_ARRAY, K.TEXTURE_CUBE_MAP_ARRAY):
            z = layer * tex.faces + face
            if f.compressed:
                raw.glCompressedTexSubImage3D(tex.target, lvl, 0, y0, z, w, hh, 1,
                                              f.gl_internal, expected, pointer)
            else:
                raw.glTexSubImage3D(tex.target, lvl, 0, y0, z, w, hh, 1, f.gl_format,
                                    f.gl_type, pointer)
        else:
            target = K.TEXTURE_CUBE_MAP_POSITIVE_X + face if tex.faces == 6 else tex.target
            if f.compressed:
                raw.glCompressedTexSubImage2D(target, lvl, 0, y0, w, hh, f.gl_internal,
                                              expected, pointer)
            else:
                raw.glTexSubImage2D(target, lvl, 0, y0, w, hh, f.gl_format, f.gl_type,
                                    pointer)
        raw.glPixelStorei(K.UNPACK_ALIGNMENT, 4)
        raw.glBindTexture(tex.target, 0)
        self.check_errors(f"upload of level {chain_level} to '{tex.label}'")

    def generate_mipmaps(self, tex: GpuTexture) -> None:
        """Fill every stored level below the first from it with the driver's filter
        (glGenerateMipmap): what naive loaders do, kept for the peers benchmark."""
        self._require_render_thread("generate_mipmaps")
        self.raw.glBindTexture(tex.target, tex.glo)
        self.raw.glGenerateMipmap(tex.target)
        self.raw.glBindTexture(tex.target, 0)
        self.check_errors(f"mipmap generation of '{tex.label}'")

    def copy_levels(self, src: GpuTexture, dst: GpuTexture, chain_levels: Sequence[int]) -> None:
        """GPU-side copy of whole levels (all layers/faces) between two textures holding
        overlapping ranges of the same chain: the streamer's grow/shrink keeps old levels."""
        self._require_render_thread("copy_levels")
        if not self.caps.copy_image:
            raise GLError("glCopyImageSubData is not available (needs GL 4.3 / ARB_copy_image)")
        for lvl in chain_levels:
            w, h = mip_dims(src.chain_width, src.chain_height, lvl)
            self.raw.glCopyImageSubData(src.glo, src.target, src.storage_level(lvl), 0, 0, 0,
                                        dst.glo, dst.target, dst.storage_level(lvl), 0, 0, 0,
                                        w, h, src.layers * src.faces)
        self.check_errors(f"copy of levels {list(chain_levels)} '{src.label}' -> '{dst.label}'")

    def read_level(self, tex: GpuTexture, chain_level: int, face: int = 0,
                   rgba8: bool = False) -> bytes:
        """What the GPU holds for one level (every layer and face of an array; one face of
        a cube map), for tests and round trips. With `rgba8` the driver decodes it to
        RGBA8 (for compressed formats: the driver's own decoder, what sampling sees)."""
        self._require_render_thread("read_level")
        lvl = tex.storage_level(chain_level)
        w, h = mip_dims(tex.chain_width, tex.chain_height, chain_level)
        layered = tex.target in (K.TEXTURE_2D_ARRAY, K.TEXTURE_CUBE_MAP_ARRAY)
        per = w * h * 4 if rgba8 else level_bytes(tex.fmt, w, h)
        n = per * (tex.layers * tex.faces if layered else 1)
        out = (C.c_ubyte * n)()
        target = K.TEXTURE_CUBE_MAP_POSITIVE_X + face if tex.target == K.TEXTURE_CUBE_MAP \
            else tex.target
        self.raw.glBindTexture(tex.target, tex.glo)
        self.raw.glPixelStorei(K.PACK_ALIGNMENT, 1)
        if rgba8:
            self.raw.glGetTexImage(target, lvl, K.GL_RGBA, K.UNSIGNED_BYTE, out)
        elif tex.fmt.compressed:
            self.raw.glGetCompressedTexImage(target, lvl, out)
        else:
            self.raw.glGetTexImage(target, lvl, tex.fmt.gl_format, tex.fmt.gl_type, out)
        self.raw.glPixelStorei(K.PACK_ALIGNMENT, 4)
        self.raw.glBindTexture(tex.target, 0)
        self.check_errors(f"read back of level {chain_level} of '{tex.label}'")
        return bytes(out)

    def driver_level_size(self, tex: GpuTexture, chain_level: int) -> int:
        """GL_TEXTURE_COMPRESSED_IMAGE_SIZE of one level as the driver reports it."""
        self._require_render_thread("driver_level_size")
        target = K.TEXTURE_CUBE_MAP_POSITIVE_X if tex.target == K.TEXTURE_CUBE_MAP else tex.target
        self.raw.glBindTexture(tex.target, tex.glo)
        n = self.raw.tex_level_int(target, tex.storage_level(chain_level),
                                   K.TEXTURE_COMPRESSED_IMAGE_SIZE)
        self.raw.glBindTexture(tex.target, 0)
        self.check_errors("GL_TEXTURE_COMPRESSED_IMAGE_SIZE query")
        return n

    def tex_parameter_f(self, tex: GpuTexture, pname: int, value: float) -> None:
        self._require_render_thread("tex_parameter")
        self.raw.glBindTexture(tex.target, tex.glo)
        self.raw.glTexParameterf(tex.target, pname, value)
        self.raw.glBindTexture(tex.target, 0)

    def reaccount(self, obj: Any, nbytes: int) -> None:
        """Change the ledgered size of a live object whose memory changes in place
        (sparse textures committing or decommitting pages)."""
        serial = self._by_obj[id(obj)]
        entry = self._entries[serial]
        old = entry.alloc
        self.ledger.remove(old)
        entry.alloc = self.ledger.add(old.kind, old.category, old.label, nbytes, old.glo)
        entry.rec.nbytes = int(nbytes)
        if isinstance(obj, GpuTexture):
            obj.nbytes = int(nbytes)

    # ----------------------------------------------------------------- release
    def release(self, obj: Any) -> None:
        """Delete a GL object the engine made. Safe from any thread: off the render thread
        the release is queued and done at the next `flush_releases()` (every frame)."""
        if obj is None:
            return
        if not self.on_render_thread:
            self._pending.put(obj)
            return
        serial = self._by_obj.pop(id(obj), None)
        if serial is None:
            return  # already released, or not ours
        entry = self._entries.pop(serial)
        self.ledger.remove(entry.alloc)
        self.tracker.untrack(entry.rec)
        if isinstance(obj, GpuTexture):
            obj.released = True
        if not self._closed:
            if entry.alloc.kind == "framebuffer" and self.ctx.fbo is obj:
                # moderngl rebinds its last bound framebuffer after making a new one; if
                # that one was deleted, every later framebuffer creation would fail.
                self._default_framebuffer().use()
            entry.destroy()

    def _default_framebuffer(self) -> moderngl.Framebuffer:
        """The window's framebuffer, or GL name 0 wrapped (headless: binding it is valid)."""
        return self.ctx.screen if self.ctx.screen is not None else \
            self.ctx.detect_framebuffer(0)

    def flush_releases(self) -> int:
        """Do the releases other threads queued; forget objects users released directly."""
        n = 0
        while True:
            try:
                obj = self._pending.get_nowait()
            except queue.Empty:
                break
            self.release(obj)
            n += 1
        for rec in self.tracker.sweep():
            entry = self._entries.pop(rec.serial, None)
            if entry is not None:
                self._by_obj.pop(id(entry.obj), None)
                self.ledger.remove(entry.alloc)
        return n

    def live_objects(self) -> list[TrackedObject]:
        self.flush_releases()
        return self.tracker.live()

    @contextmanager
    def leak_check(self) -> Iterator[LeakTracker]:
        """Objects made inside the block and alive at its end raise LeakError naming each."""
        with self.tracker.check(before_end=self.flush_releases) as t:
            yield t

    # ----------------------------------------------------------------- tracking user contexts
    def track_user_object(self, obj: Any, kind: str, nbytes: int, label: str,
                          category: str = "user") -> Any:
        """Record a moderngl object the user made (see diagnostics.tracking.TrackedContext)."""
        return self._register(obj, kind, category, label, nbytes, getattr(obj, "glo", 0),
                              obj.release, moderngl_alive(obj))

    # ----------------------------------------------------------------- memory views
    def vram(self) -> VramReading:
        self._require_render_thread("vram probe")
        reading = self.probe.read()
        self._drain_errors()
        return reading

    def end_frame(self, frame: int):
        """Per-frame bookkeeping: queued releases, then a ledger history sample."""
        self.flush_releases()
        return self.ledger.end_frame(frame)

    def memory_summary(self) -> dict:
        from ..memory.summary import summary_dict
        return summary_dict(self)

    # ----------------------------------------------------------------- shutdown
    def shutdown(self) -> list[TrackedObject]:
        """Report (log) and release every object still alive; then drop the context if we
        made it. Returns what was left, so callers and tests can assert on it."""
        if self._closed:
            return []
        if not self.on_render_thread:
            raise ContextError("shutdown must run on the render thread")
        left = self.live_objects()
        if left:
            log.warning("%d GL object(s) still alive at shutdown:\n%s", len(left),
                        "\n".join("  " + r.describe() for r in left))
        for rec in reversed(left):
            entry = self._entries.get(rec.serial)
            if entry is not None:
                self.release(entry.obj)
        if self.raw.has("glDebugMessageCallback") and self._debug_proc is not None:
            self.raw.glDebugMessageCallback(DEBUGPROC(), None)
        self._closed = True
        atexit.unregister(self._atexit)
        if self.handle.owns_context:
            self.ctx.release()
            if self.handle.window is not None:
                import glfw
                glfw.destroy_window(self.handle.window)
        return left

    def _at_exit(self) -> None:
        """At interpreter exit, release what is left if we still can (same thread)."""
        if not self._closed and self.on_render_thread:
            try:
                self.shutdown()
            except Exception as exc:  # interpreter teardown: report, never raise
                log.debug("device shutdown at exit failed: %s", exc)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
