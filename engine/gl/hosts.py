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
import logging
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import moderngl

from ..errors import ContextError
from .context import MIN_GL, context_loader
from .current import restore_current, save_current
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
