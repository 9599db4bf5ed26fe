"""GL glue for host applications that own the context and the framebuffer (Qt's
QOpenGLWidget, and any toolkit that hands out "draw into this FBO" callbacks).

Why here: outside engine/gl nothing touches moderngl or raw GL, yet a host embedding needs two
GL things the Device does not offer: adopting a context that is current through GLX *or* EGL
(Qt on X11 uses GLX, on Wayland EGL; moderngl's default detection tries only the first), and
drawing the engine's output into a framebuffer the host owns and names by its GL id (Qt's
`defaultFramebufferObject()`, which changes when the widget is resized).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import moderngl

from ..errors import ContextError
from .context import MIN_GL
from .device import Device

log = logging.getLogger(__name__)


def current_context_loader(ctx: moderngl.Context) -> Callable[[str], int | None] | None:
    """The function loader of a moderngl context made on the host's current context.

    moderngl 5.13 wraps such a context in a `DefaultLoader` whose method is
    `load_opengl_function`, not glcontext's `load` that engine.gl.context looks for; its
    addresses are the host's own (checked under Qt: equal to QOpenGLContext.getProcAddress)."""
    backend = getattr(ctx.mglo, "_context", None)
    for name in ("load", "load_opengl_function"):
        fn = getattr(backend, name, None)
        if callable(fn):
            return fn
    return None


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
        found = loader or current_context_loader(ctx)
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


def present_to(device: Device, source: moderngl.Framebuffer, glo: int) -> None:
    """Copy the engine's output framebuffer into the host's framebuffer `glo` and leave that
    one bound, with a viewport covering it: Qt composes whatever its FBO holds after paintGL
    and expects to find its FBO bound. Sizes should match (resize the output with the
    widget); where they differ only the overlapping corner is copied."""
    target = host_framebuffer(device, glo)
    device.copy_framebuffer(target, source)
    target.use()


@contextmanager
def made_current(device: Device) -> Iterator[Device]:
    """Make the device's own context current for a block, then restore the host's.

    A canvas host draws with its own EGL device from a GUI toolkit's callback; if that
    toolkit (or another widget) made its own GL context current in between, the engine's
    calls would land in the wrong context. For a headless (EGL) device this makes it current
    and restores what was current before; adopted contexts are the host's and are left as
    they are."""
    if not (device.handle.owns_context and device.handle.mode == "egl" and not device.closed):
        yield device
        return
    ctx = device._ctx
    ctx.__enter__()
    try:
        yield device
    finally:
        if not device.closed:  # a shutdown inside the block has released the context
            ctx.__exit__(None, None, None)
