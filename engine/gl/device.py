"""The device: the engine's one door to GL, composed of parts with one job each.

- `context` (engine.gl.context): the moderngl context, how it was made or adopted, and the
  render thread that owns it;
- `Allocator` (engine.gl.allocator): makes, ledgers, tracks and releases every GL object, fences
  included, under a GL-error guard (GL_OUT_OF_MEMORY -> GLOutOfMemoryError after the half-made
  object is deleted and unledgered);
- `Commands` (engine.gl.commands): uploads, copies, read-backs, texture parameters, fence polls;
- capabilities (engine.gl.capabilities) and the VRAM probe (engine.gl.probe).

`Device` puts them behind one object, with the factory methods every other layer calls. The
moderngl context and the raw entry points are private to engine/gl (`_ctx`, `_raw`): other
layers ask the device for what they need (a state preset, a viewport, a fence, a min LOD), so
a new backend or a recording fake has one surface to implement. The budget is not here: the
governor (engine.memory.governor) owns it.
"""
from __future__ import annotations

import atexit
import ctypes as C
import functools
import logging
import weakref
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import moderngl

from ..errors import ContextError, GLError
from ..formats import PixelFormat
from ..formats import get as get_format
from ..memory.ledger import Category, Ledger
from ..memory.leaks import LeakTracker, TrackedObject
from ..memory.probe import VramReading
from ..memory.sizes import level_bytes, mip_dims, texture_bytes
from . import constants as K
from .allocator import Allocator, ByteLedger, FaultInjection, ObjectTracker
from .bindless import bindless_supported
from .capabilities import Capabilities, detect
from .commands import Commands, Fence
from .current import current_context
from .extensions import extensions
from .context import (
    ContextHandle,
    RenderThread,
    adopt_current,
    create_headless,
    create_window,
    has_display,
)
from .probe import VramProbe
from .profile import DeviceProfile, at_version, decide, describe, software_renderer
from .raw import DEBUGPROC, RawGL
from .swizzle import format_swizzle, set_bound_swizzle
from .textures import GpuTexture

log = logging.getLogger(__name__)
_T = TypeVar("_T")

_MGL_FORMATS = {(4, "f1"): "RGBA8", (1, "f1"): "R8", (2, "f1"): "RG8", (4, "f2"): "RGBA16F",
                (4, "f4"): "RGBA32F", (1, "f4"): "R32F", (2, "f2"): "RG16F"}
_DTYPE_BYTES = {"f1": 1, "u1": 1, "i1": 1, "f2": 2, "u2": 2, "i2": 2, "f4": 4, "u4": 4, "i4": 4}


def mgl_format(components: int, dtype: str) -> PixelFormat | None:
    """The PixelFormat moderngl picks for (components, dtype), where we have one."""
    name = _MGL_FORMATS.get((components, dtype))
    return get_format(name) if name else None


def mgl_texel_bytes(components: int, dtype: str) -> int:
    return components * _DTYPE_BYTES.get(dtype, 4)


@functools.lru_cache(maxsize=4096)
def _storage_bytes(fmt_name: str, width: int, height: int, levels: int, base_level: int,
                   layers: int, faces: int) -> int:
    """`texture_bytes` of a storage texture, remembered: registering 10,000 alike textures
    asked it the same question 10,000 times (a fifth of storage_texture's time)."""
    return texture_bytes(fmt_name, width, height, levels=levels, base_level=base_level,
                         layers=layers, faces=faces)


def _release_at_exit(ref: weakref.ref[Device]) -> None:
    device = ref()
    if device is not None:
        device._at_exit()


class Device(FaultInjection):
    """Context + allocator + commands + capabilities + probe, behind one object."""

    def __init__(self, handle: ContextHandle, *, ledger: ByteLedger | None = None,
                 tracker: ObjectTracker | None = None, capture_stacks: bool = False) -> None:
        self.handle = handle
        self._ctx: moderngl.Context = handle.ctx
        self._thread = RenderThread()
        self._raw = RawGL(handle.loader)
        self.caps: Capabilities = detect(self._ctx, self._raw)
        self.profile: DeviceProfile = self._decide_profile()
        self.ledger = ledger if ledger is not None else Ledger()
        self.tracker = tracker if tracker is not None else LeakTracker(capture_stacks=capture_stacks)
        self._alloc = Allocator(self._raw, self._thread, self.ledger, self.tracker,
                                labels=self.caps.debug_output)
        self._alloc.before_destroy = self._before_destroy
        #: uploads, copies, read-backs, texture parameters and fence polls: callers use it
        #: directly (`device.commands.upload(...)`), the device forwards none of it
        self.commands = Commands(self._raw, self._thread, self._alloc, self.caps.copy_image)
        self.probe = VramProbe(self._raw, set(self.caps.extensions))
        self.debug_messages: list[tuple[int, int, str]] = []
        self._debug_proc = None
        self._install_debug_output()
        self._alloc.drain_errors()
        #: shared programs (`shared_program`, with the context each was made in) and what
        #: callers keep with them (`prepared`)
        self._prepared: dict[Hashable, Any] = {}
        self._kept: list[tuple[int, Any]] = []
        # A weak reference: the exit hook must not keep a dropped device (and its context) alive.
        self._atexit = functools.partial(_release_at_exit, weakref.ref(self))
        atexit.register(self._atexit)

    def _decide_profile(self) -> DeviceProfile:
        caps = self.caps
        ext = extensions(self)
        profile = decide(caps.version_code, caps.glsl_version, caps.extensions, caps.can_sample,
                         entry_points=lambda name: self._raw.has(name) or ext.has(name),
                         buffer_storage=caps.buffer_storage, bindless=bindless_supported(self),
                         sparse=caps.sparse_texture, software=software_renderer(caps.renderer))
        log.info("%s on %s: %s", caps.gl_version, caps.renderer, describe(profile))
        return profile

    # ----------------------------------------------------------------- construction
    @classmethod
    def headless(cls, **kw) -> Device:
        """EGL, no display needed: llvmpipe in CI, the real GPU on a headless server."""
        return cls(create_headless(), **kw)

    @classmethod
    def window(cls, size=(1280, 720), title="engine", visible=True, vsync=False, **kw) -> Device:
        return cls(create_window(size, title, visible, vsync), **kw)

    @classmethod
    def adopt(cls, ctx: moderngl.Context | None = None, loader=None, **kw) -> Device:
        """Embed in a host application: use its current context, never destroy it."""
        return cls(adopt_current(ctx, loader), **kw)

    def lend_context(self) -> moderngl.Context:
        """The context as moderngl's own object, lent to a library that makes GL objects in
        it itself (the inverse of `adopt`; the lab lends it to moderngl-window to measure
        its loaders in the engine's context). What the borrower makes is neither ledgered
        nor tracked unless it registers it (`track_user_object`)."""
        self._thread.require("lend_context")
        return self._ctx

    @classmethod
    def auto(cls, **kw) -> Device:
        """A hidden window when a display exists, else headless EGL."""
        if has_display():
            try:
                return cls.window(visible=False, **kw)
            except ContextError as exc:
                log.info("no window context (%s); falling back to EGL", exc)
        return cls.headless(**kw)

    # ----------------------------------------------------------------- errors
    def check_errors(self, what: str = "GL call") -> None:
        """Raise GLError if GL recorded any error since the last check."""
        self._alloc.check_errors(what)

    def _install_debug_output(self) -> None:
        if not self.caps.debug_output or not self._raw.has("glDebugMessageCallback"):
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
        self._raw.glEnable(K.DEBUG_OUTPUT)
        self._raw.glEnable(K.DEBUG_OUTPUT_SYNCHRONOUS)
        self._raw.glDebugMessageCallback(self._debug_proc, None)
        self._raw.glDebugMessageControl(K.DONT_CARE, K.DONT_CARE, K.DEBUG_SEVERITY_NOTIFICATION,
                                        0, None, 0)
        self._alloc.drain_errors()

    # ----------------------------------------------------------------- threading
    @property
    def on_render_thread(self) -> bool:
        return self._thread.current

    # ----------------------------------------------------------------- moderngl objects
    def _mgl(self, kind: str, category: Category | str, label: str, nbytes: int, make) -> Any:
        return self._alloc.make_moderngl(kind, category, label, nbytes, make)

    def texture(self, size: tuple[int, int], components: int = 4, data: bytes | None = None,
                *, dtype: str = "f1", levels: int = 1, category: Category | str = Category.STATIC,
                label: str = "texture", srgb: bool = False) -> moderngl.Texture:
        """An uncompressed moderngl texture; `levels` > 1 builds that many mip levels (in
        linear light when `srgb`: an SRGB8_ALPHA8 texture, RGBA8 bytes only)."""
        if srgb and (components, dtype) != (4, "f1"):
            raise ValueError(f"texture '{label}': srgb needs 4 components of dtype f1")
        w, h = int(size[0]), int(size[1])
        fmt = mgl_format(components, dtype)
        if fmt is not None:
            nbytes = texture_bytes(fmt, w, h, levels=levels)
        else:
            nbytes = sum(mgl_texel_bytes(components, dtype) * mip_dims(w, h, i)[0]
                         * mip_dims(w, h, i)[1] for i in range(levels))

        def make():
            t = self._ctx.texture((w, h), components, data, dtype=dtype,
                                  internal_format=K.SRGB8_ALPHA8 if srgb else None)
            if levels > 1:
                t.build_mipmaps(0, levels - 1)
            return t
        return self._mgl("texture", category, label, nbytes, make)

    def depth_texture(self, size: tuple[int, int], *, category: Category | str = Category.TARGET,
                      label: str = "depth") -> moderngl.Texture:
        nbytes = level_bytes("DEPTH24", int(size[0]), int(size[1]))
        return self._mgl("texture", category, label, nbytes,
                         lambda: self._ctx.depth_texture(tuple(size)))

    def renderbuffer(self, size: tuple[int, int], components: int = 4, *, samples: int = 0,
                     dtype: str = "f1", depth: bool = False, category: Category | str = Category.TARGET,
                     label: str = "renderbuffer") -> moderngl.Renderbuffer:
        w, h = int(size[0]), int(size[1])
        if depth:
            per = level_bytes("DEPTH24", w, h)
            make = lambda: self._ctx.depth_renderbuffer((w, h), samples=samples)
        else:
            per = mgl_texel_bytes(components, dtype) * w * h
            make = lambda: self._ctx.renderbuffer((w, h), components, samples=samples,
                                                 dtype=dtype)
        return self._mgl("renderbuffer", category, label, per * max(1, samples), make)

    def framebuffer(self, color_attachments=(), depth_attachment=None, *,
                    label: str = "framebuffer") -> moderngl.Framebuffer:
        """Framebuffers own no memory (their attachments are ledgered), but are tracked."""
        return self._mgl("framebuffer", Category.OTHER, label, 0,
                         lambda: self._ctx.framebuffer(color_attachments, depth_attachment))

    def buffer(self, data: bytes | None = None, *, reserve: int = 0, dynamic: bool = False,
               category: Category | str = Category.BUFFER, label: str = "buffer") -> moderngl.Buffer:
        nbytes = len(memoryview(data).cast("B")) if data is not None else int(reserve)
        return self._mgl("buffer", category, label, nbytes,
                         lambda: self._ctx.buffer(data, reserve=reserve, dynamic=dynamic))

    def program(self, *, label: str = "program", **shaders: str) -> moderngl.Program:
        """A program of these sources, each compiled at this context's GLSL version where it
        asks for more (`profile.at_version`)."""
        glsl = self.profile.glsl_version
        sources = {k: at_version(v, glsl) if isinstance(v, str) else v
                   for k, v in shaders.items()}
        return self._mgl("program", Category.OTHER, label, 0,
                         lambda: self._ctx.program(**sources))

    def shared_program(self, *, label: str = "program", **shaders: str) -> moderngl.Program:
        """The program of these sources, compiled once per device (and current context) and
        kept until shutdown; the caller does not release it. A driver compiles a program's
        variants per program object, so renderers and passes made after the first reuse its
        work, as a per-context table of prepared shaders does (a software rasterizer spends
        tenths of a second on each)."""
        return self._shared(("program", *sorted(shaders.items())),
                            lambda: self.program(label=label, **shaders))

    def shared_compute_shader(self, source: str, *, label: str = "compute"
                              ) -> moderngl.ComputeShader:
        """`compute_shader(source)` made once per device (and current context) and kept
        until shutdown, as `shared_program` keeps programs: a pass made per object (a
        feedback target per virtual texture system) compiles it once."""
        return self._shared(("compute", source), lambda: self.compute_shader(source,
                                                                             label=label))

    def _shared(self, key: tuple, build: Callable[[], _T]) -> _T:
        where = current_context()

        def make() -> _T:
            obj = build()
            self._alloc.keep(obj)
            self._kept.append((where, obj))
            return obj
        return self.prepared((key[0], where, *key[1:]), make)

    def prepared(self, key: Hashable, make: Callable[[], _T]) -> _T:
        """What `make()` returns, made once per device for `key` and kept until shutdown: a
        shared program and the state that goes with it (its last uniform values)."""
        try:
            return self._prepared[key]
        except KeyError:
            value = self._prepared[key] = make()
            return value

    def compute_shader(self, source: str, *, label: str = "compute") -> moderngl.ComputeShader:
        """A compute program (GL 4.3); owns no memory but is tracked like a program."""
        if not self.profile.compute:
            raise GLError(f"compute shader '{label}': needs GL 4.3 or ARB_compute_shader, "
                          f"this context is {self.caps.gl_version}")
        return self._mgl("compute_shader", Category.OTHER, label, 0,
                         lambda: self._ctx.compute_shader(source))

    def storage_barrier(self) -> None:
        """Make compute shaders' buffer writes visible to later buffer reads and copies
        (read-backs, buffer-to-texture uploads)."""
        self._ctx.memory_barrier(K.SHADER_STORAGE_BARRIER_BIT | K.BUFFER_UPDATE_BARRIER_BIT
                                 | K.PIXEL_BUFFER_BARRIER_BIT)

    def vertex_array(self, program, content, index_buffer=None, *,
                     label: str = "vertex_array", **kw) -> moderngl.VertexArray:
        return self._mgl("vertex_array", Category.OTHER, label, 0,
                         lambda: self._ctx.vertex_array(program, content, index_buffer, **kw))

    def sampler(self, *, label: str = "sampler", **kw) -> moderngl.Sampler:
        return self._mgl("sampler", Category.OTHER, label, 0, lambda: self._ctx.sampler(**kw))

    # ----------------------------------------------------------------- raw textures
    def storage_texture(self, fmt: PixelFormat | str, width: int, height: int, *,
                        levels: int = 1, base_level: int = 0, layers: int = 1,
                        cube: bool = False, category: Category | str = Category.STATIC,
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
        nbytes = _storage_bytes(f.name, width, height, levels, base_level, layers, faces)
        what = f"{f.name} texture '{label}' {w}x{h}x{levels} levels"
        if levels < 1 or w > self.caps.max_texture_size or h > self.caps.max_texture_size:
            raise GLError(f"{what}: exceeds GL_MAX_TEXTURE_SIZE {self.caps.max_texture_size}"
                          if levels >= 1 else f"{what}: no levels")
        raw = self._raw

        def make() -> int:
            glo = raw.gen_texture()
            raw.glBindTexture(target, glo)
            if target in (K.TEXTURE_2D_ARRAY, K.TEXTURE_CUBE_MAP_ARRAY):
                raw.glTexStorage3D(target, levels, f.gl_internal, w, h, layers * faces)
            else:
                raw.glTexStorage2D(target, levels, f.gl_internal, w, h)
            swizzle = format_swizzle(f)
            if swizzle:  # texture state: set before anyone can take a bindless handle
                set_bound_swizzle(raw, target, swizzle)
            raw.glTexParameteri(target, K.TEXTURE_MAX_LEVEL, levels - 1)
            raw.glTexParameteri(target, K.TEXTURE_MIN_FILTER,
                                K.LINEAR_MIPMAP_LINEAR if levels > 1 else K.LINEAR)
            raw.glTexParameteri(target, K.TEXTURE_MAG_FILTER, K.LINEAR)
            raw.glBindTexture(target, 0)
            return glo

        glo = self._alloc.guarded(what, nbytes, make, raw.delete_texture)
        tex = GpuTexture(glo, target, f, int(width), int(height), base_level, levels, layers,
                         faces, nbytes, label, category, self)
        return self._alloc.register(tex, "texture", category, label, nbytes, glo,
                              lambda: raw.delete_texture(glo))

    # ----------------------------------------------------------------- fences
    def fence(self, label: str = "fence") -> Fence:
        """A sync object after the commands issued so far; flushed so that a zero-timeout
        poll can see it signal. Ledgered (0 bytes) and leak-tracked like any object."""
        raw = self._raw

        def make() -> Fence:
            sync = raw.glFenceSync(K.SYNC_GPU_COMMANDS_COMPLETE, 0)
            if not sync:
                raise GLError(f"glFenceSync '{label}' returned no sync object")
            raw.glFlush()
            return Fence(int(sync), label)

        fence = self._alloc.guarded(f"fence '{label}'", 0, make,
                                    lambda f: raw.glDeleteSync(C.c_void_p(f.sync)))
        return self._alloc.register(fence, "fence", Category.OTHER, label, 0, 0,
                                    lambda: raw.glDeleteSync(C.c_void_p(fence.sync)))

    # ----------------------------------------------------------------- pipeline state
    def set_state(self, *, depth_test: bool = False, blend: bool = False,
                  cull: bool = False, additive: bool = False) -> None:
        """A pass sets the whole fixed-function state it needs; none inherits another's.
        Blending, when on, is straight alpha over (SRC_ALPHA, ONE_MINUS_SRC_ALPHA), or with
        `additive` a plain sum (ONE, ONE: channels composited by adding their colours)."""
        blend = blend or additive
        flags = (moderngl.DEPTH_TEST if depth_test else 0) | (moderngl.BLEND if blend else 0) \
            | (moderngl.CULL_FACE if cull else 0)
        self._ctx.enable_only(flags or moderngl.NOTHING)
        if additive:
            self._ctx.blend_func = moderngl.ONE, moderngl.ONE
        elif blend:
            self._ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA

    def set_viewport(self, viewport: tuple[int, int, int, int]) -> None:
        self._ctx.viewport = tuple(int(v) for v in viewport)

    def copy_framebuffer(self, dst: Any, src: Any) -> None:
        """Blit `src` into `dst` (a framebuffer, or None for the window's own)."""
        self._ctx.copy_framebuffer(self._ctx.screen if dst is None else dst, src)

    @property
    def max_samples(self) -> int:
        return int(self._ctx.max_samples)

    def finish(self) -> None:
        """Wait for the GPU: honest frame times and deterministic read-backs. Through the
        raw entry point, which leaves the GIL to other threads while it waits (moderngl's
        keeps it: on a software rasterizer, for the whole rasterization)."""
        self._raw.glFinish()

    def default_framebuffer(self) -> Any:
        """The window's framebuffer, or GL name 0 wrapped (headless: binding it is valid)."""
        return self._ctx.screen if self._ctx.screen is not None else \
            self._ctx.detect_framebuffer(0)

    # ----------------------------------------------------------------- release
    def reaccount(self, obj: Any, nbytes: int) -> None:
        """Change the ledgered size of a live object whose memory changes in place
        (sparse textures committing or decommitting pages)."""
        self._alloc.reaccount(obj, nbytes)
        if isinstance(obj, GpuTexture):
            obj.nbytes = int(nbytes)

    def release(self, obj: Any) -> None:
        """Delete a GL object the engine made. Safe from any thread: off the render thread
        the release is queued and done at the next `flush_releases()` (every frame)."""
        if self._alloc.release(obj, closed=self._thread.closed) and isinstance(obj, GpuTexture) \
                and self._thread.current:
            obj.released = True

    def release_records(self, records: Sequence[TrackedObject]) -> None:
        """Release the objects behind tracker records, newest first (shutdown, and the pytest
        plugin's clean-up after a test that left objects alive). On an adopted context the
        host has already released, they are forgotten without a GL call: there is no context
        to call into, and its objects went with it."""
        gone = type(getattr(self._ctx, "mglo", None)).__name__ == "InvalidObject"
        for rec in reversed(list(records)):
            obj = self._alloc.object_of(rec)
            if obj is not None and gone:
                self._alloc.release(obj, closed=True)
            elif obj is not None:
                self.release(obj)

    def _before_destroy(self, alloc, obj: Any) -> None:
        if alloc.kind == "framebuffer" and self._ctx.fbo is obj:
            # moderngl rebinds its last bound framebuffer after making a new one; if that one
            # was deleted, every later framebuffer creation would fail.
            self.default_framebuffer().use()

    def flush_releases(self) -> int:
        """Do the releases other threads queued; forget objects users released directly."""
        return self._alloc.flush(closed=self._thread.closed)

    def live_objects(self) -> list[TrackedObject]:
        return self._alloc.live()

    def live_allocations(self) -> list[tuple[Allocation, TrackedObject, Any]]:
        """Every live object the device made, with its ledger entry and tracker record
        (engine.diagnostics.snapshot lists who holds what from these)."""
        return self._alloc.entries()

    @contextmanager
    def leak_check(self) -> Iterator[LeakTracker]:
        """Objects made inside the block and alive at its end raise LeakError naming each."""
        with self._alloc.leak_check() as t:
            yield t

    def track_user_object(self, handle: Any, kind: str, nbytes: int, label: str,
                          category: Category | str = Category.USER, *, glo: int = 0) -> Any:
        """Record a moderngl object the user made (see engine.gl.tracking.TrackedContext):
        `handle` has `alive()` and `release()`; the object is not labelled (a label is GL
        state the user's code can read back)."""
        return self._alloc.register(handle, kind, category, label, nbytes, glo,
                                    handle.release, handle.alive, label_object=False)

    # ----------------------------------------------------------------- memory views
    def vram(self) -> VramReading:
        self._thread.require("vram probe")
        reading = self.probe.read()
        self._alloc.drain_errors()
        return reading

    def end_frame(self, frame: int):
        """Per-frame bookkeeping: queued releases, then a ledger history sample."""
        self.flush_releases()
        return self.ledger.end_frame(frame)

    # ----------------------------------------------------------------- shutdown
    def shutdown(self) -> list[TrackedObject]:
        """Report (log) and release every object still alive; then drop the context if we
        made it. Returns what was left, so callers and tests can assert on it."""
        if self._thread.closed:
            return []
        if not self._thread.current:
            raise ContextError("shutdown must run on the render thread")
        self._prepared.clear()
        now = current_context()
        for where, prog in reversed(self._kept):
            # deleted in the context it was made in; one made in another context (not current
            # now) is forgotten: a GL name deleted here could be another object's
            self._alloc.release(prog, closed=where != now)
        self._kept.clear()
        left = self.live_objects()
        if left:
            log.warning("%d GL object(s) still alive at shutdown:\n%s", len(left),
                        "\n".join("  " + r.describe() for r in left))
        self.release_records(left)
        gone = type(getattr(self._ctx, "mglo", None)).__name__ == "InvalidObject"
        if not gone and self._raw.has("glDebugMessageCallback") and self._debug_proc is not None:
            self._raw.glDebugMessageCallback(DEBUGPROC(), None)
        self._thread.closed = True
        atexit.unregister(self._atexit)
        if self.handle.owns_context:
            self._ctx.release()
            if self.handle.window is not None:
                import glfw
                glfw.destroy_window(self.handle.window)
        return left

    def _at_exit(self) -> None:
        """At interpreter exit, release what is left if we still can (same thread)."""
        if not self._thread.closed and self._thread.current:
            try:
                self.shutdown()
            except Exception as exc:  # interpreter teardown: report, never raise
                log.debug("device shutdown at exit failed: %s", exc)

    @property
    def closed(self) -> bool:
        return self._thread.closed

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
