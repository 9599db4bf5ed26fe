"""Which GL context the calling thread has current: saved, put back, and named.

A canvas host's draws must land in its device's own context while a GUI toolkit, another
widget or another device may have made its own current, and a device's shared programs
belong to the context they were compiled in; these read the thread's current EGL or GLX
context through the platform libraries.
"""
from __future__ import annotations

import ctypes
import functools
import logging
from dataclasses import dataclass
from typing import Any

from .ctypes_table import FunctionTable, library_loader

log = logging.getLogger(__name__)


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
def _lib(name: str) -> FunctionTable | None:
    """libEGL / libGL's few context calls, typed (pointers must not be truncated)."""
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    return FunctionTable(_SIGNATURES, library_loader(lib))


def save_current() -> CurrentContext:
    """What the thread has current now (EGL first, then GLX; the two share one slot)."""
    egl = _lib("libEGL.so.1")
    if egl is not None and egl.has("eglGetCurrentContext"):
        ctx = egl.eglGetCurrentContext()
        if ctx:
            return CurrentContext("egl", (egl.eglGetCurrentDisplay(),
                                          egl.eglGetCurrentSurface(_EGL_DRAW),
                                          egl.eglGetCurrentSurface(_EGL_READ), ctx))
    glx = _lib("libGL.so.1")
    if glx is not None and glx.has("glXGetCurrentContext"):
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


def current_context() -> int:
    """The thread's current context handle (EGL or GLX), 0 when none is current."""
    saved = save_current()
    return int(saved.handles[-1]) if saved.handles else 0
