"""GL glue for host applications that own the context and the framebuffer (Qt's
QOpenGLWidget, and any toolkit that hands out "draw into this FBO" callbacks).

Why here: outside engine/gl nothing touches moderngl or raw GL, yet a host embedding needs
GL things the Device does not offer: adopting a context that is current through GLX *or* EGL
(Qt on X11 uses GLX, on Wayland EGL; moderngl's default detection tries only the first) with
a function loader moderngl hides, drawing the engine's output into a framebuffer the host owns
and names by its GL id (Qt's `defaultFramebufferObject()`, re-created on every resize), and,
for hosts that draw with a device of their own (canvases), leaving the thread's current
context as the caller had it.
"""
from __future__ import annotations

import ctypes
import functools
import logging
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import moderngl

from ..errors import ContextError
from .context import MIN_GL, context_loader
from .device import Device

log = logging.getLogger(__name__)


def adopt_current_context(*, loader: Callable[[str], int | None] | None = None,
                          **kw: Any) -> Device:
    """A Device on the GL context the host has made current, found through GLX, else EGL.
    The host keeps ownership: `device.shutdown()` releases the engine's objects only."""
    errors = []
    for backend in (None, "egl"):
        try:
            ctx = (moderngl.create_context(require=MIN_GL) if backend is None else
                   moderngl.create_context(require=MIN_GL, backend=backend))
        except Exception as exc:  # not current through this window system: try the next
            errors.append(f"{backend or 'default'}: {exc}")
            continue
        found = loader or context_loader(ctx)
        if found is None:
            errors.append(f"{backend or 'default'}: no function loader")
            continue
        return Device.adopt(ctx, loader=found, **kw)
    raise ContextError("no current GL context to adopt (" + "; ".join(errors) + ")")


def host_framebuffer(device: Device, glo: int) -> moderngl.Framebuffer:
    """Wrap a framebuffer the host owns (by GL name) for drawing. Not ledgered or tracked,
    and never to be released: deleting it would delete the host's framebuffer."""
    device._thread.require("host_framebuffer")
    return device._ctx.detect_framebuffer(int(glo))


def framebuffer_size(device: Device, glo: int) -> tuple[int, int]:
    """The size of the host's framebuffer `glo` (its colour attachment), in pixels."""
    return tuple(host_framebuffer(device, glo).size)  # type: ignore[return-value]


_BIND_FRAMEBUFFER: weakref.WeakKeyDictionary[Device, Callable[[int, int], None]] = \
    weakref.WeakKeyDictionary()
_GL_FRAMEBUFFER = 0x8D40


def _bind_framebuffer(device: Device, glo: int) -> None:
    """glBindFramebuffer through the device's own loader, behind moderngl's back on purpose
    (see present_to)."""
    fn = _BIND_FRAMEBUFFER.get(device)
    if fn is None:
        addr = device.handle.loader("glBindFramebuffer")
        if not addr:
            raise ContextError("the adopted context exports no glBindFramebuffer")
        fn = ctypes.CFUNCTYPE(None, ctypes.c_uint, ctypes.c_uint)(addr)
        _BIND_FRAMEBUFFER[device] = fn
    fn(_GL_FRAMEBUFFER, int(glo))


def present_to(device: Device, source: moderngl.Framebuffer, glo: int) -> None:
    """Copy the engine's output framebuffer into the host's framebuffer `glo` and leave that
    one bound: Qt composes whatever its FBO holds after paintGL.

    The host's framebuffer is bound with a raw call, not through moderngl, so moderngl never
    takes it for "the framebuffer to rebind after making a new one": Qt deletes and re-creates
    its FBO on resize, and rebinding a deleted name fails every later framebuffer creation
    with GL_INVALID_OPERATION (found by resizing a QOpenGLWidget). Sizes should match
    (resize the output with the widget); where they differ only the overlapping corner is
    copied."""
    target = host_framebuffer(device, glo)
    device.copy_framebuffer(target, source)
    _bind_framebuffer(device, glo)


@dataclass(frozen=True)
class CurrentContext:
    """Which context (EGL or GLX) the calling thread had current, to put it back later."""

    api: str  # "egl", "glx" or "none"
    handles: tuple[int, ...] = ()


_EGL_DRAW, _EGL_READ = 0x3059, 0x305A


_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "eglGetCurrentContext": (ctypes.c_void_p, []),
    "eglGetCurrentDisplay": (ctypes.c_void_p, []),
    "eglGetCurrentSurface": (ctypes.c_void_p, [ctypes.c_int32]),
    "eglMakeCurrent": (ctypes.c_uint, [ctypes.c_void_p] * 4),
    "glXGetCurrentContext": (ctypes.c_void_p, []),
    "glXGetCurrentDisplay": (ctypes.c_void_p, []),
    "glXGetCurrentDrawable": (ctypes.c_ulong, []),
    "glXMakeCurrent": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p]),
}


@functools.cache
def _lib(name: str) -> ctypes.CDLL | None:
    """libEGL / libGL with the few context calls typed (pointers must not be truncated)."""
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    for fn, (restype, argtypes) in _SIGNATURES.items():
        if hasattr(lib, fn):
            getattr(lib, fn).restype = restype
            getattr(lib, fn).argtypes = argtypes
    return lib


def save_current() -> CurrentContext:
    """What the thread has current now (EGL first, then GLX; the two share one slot)."""
    egl = _lib("libEGL.so.1")
    if egl is not None and hasattr(egl, "eglGetCurrentContext"):
        ctx = egl.eglGetCurrentContext()
        if ctx:
            return CurrentContext("egl", (egl.eglGetCurrentDisplay(),
                                          egl.eglGetCurrentSurface(_EGL_DRAW),
                                          egl.eglGetCurrentSurface(_EGL_READ), ctx))
    glx = _lib("libGL.so.1")
    if glx is not None and hasattr(glx, "glXGetCurrentContext"):
        ctx = glx.glXGetCurrentContext()
        if ctx:
            return CurrentContext("glx", (glx.glXGetCurrentDisplay(),
                                          glx.glXGetCurrentDrawable(), ctx))
    return CurrentContext("none")


def restore_current(saved: CurrentContext) -> None:
    """Make `saved` current again. Nothing was current: leave whatever is current now (a
    context the engine made current harms nobody who makes their own current first)."""
    try:
        if saved.api == "egl":
            dpy, draw, read, ctx = saved.handles
            _lib("libEGL.so.1").eglMakeCurrent(dpy, draw, read, ctx)
        elif saved.api == "glx":
            dpy, drawable, ctx = saved.handles
            _lib("libGL.so.1").glXMakeCurrent(dpy, drawable, ctx)
    except Exception as exc:  # a diagnostic convenience: never fail the caller's frame
        log.warning("could not restore the previously current GL context: %s", exc)


def headless_device(**kw: Any) -> Device:
    """A headless EGL device for a host that may have its own context current (a canvas in a
    GUI app, a test process with a shared device): making the new context leaves the
    caller's current, as it found it."""
    saved = save_current()
    device = Device.headless(**kw)
    restore_current(saved)
    return device


@contextmanager
def made_current(device: Device) -> Iterator[Device]:
    """Make the device's own context current for a block, then restore the caller's.

    A canvas host draws with its own EGL device from a GUI toolkit's callback; if that
    toolkit (or another widget, or another device) made its own GL context current in
    between, the engine's calls would land in the wrong context, and the other's would land
    in ours afterwards. For a headless (EGL) device this makes it current and puts back what
    was current before, also when the block shut the device down; adopted contexts are the
    host's and are left as they are."""
    if not (device.handle.owns_context and device.handle.mode == "egl" and not device.closed):
        yield device
        return
    saved = save_current()
    device._ctx.__enter__()
    try:
        yield device
    finally:
        restore_current(saved)
