"""Making or adopting the GL context: headless EGL, a glfw window, or the host's own.

Whatever the way, the result is a moderngl context plus the loader that resolves raw GL
entry points through the same driver (see raw.py), and the thread that owns it.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import moderngl

from ..errors import ContextError

log = logging.getLogger(__name__)

MIN_GL = 330


@dataclass
class ContextHandle:
    """A moderngl context and how it was obtained."""

    ctx: moderngl.Context
    loader: Callable[[str], int | None]
    mode: str  # "egl", "window", "adopted"
    window: Any = None  # the glfw window in window mode
    owns_context: bool = True


class RenderThread:
    """The thread that owns the context: GL calls from any other thread are errors."""

    def __init__(self) -> None:
        self.ident = threading.get_ident()
        self.closed = False

    @property
    def current(self) -> bool:
        return threading.get_ident() == self.ident

    def require(self, what: str) -> None:
        if not self.current:
            raise ContextError(f"{what} must run on the render thread (GL is single-threaded)")
        if self.closed:
            raise ContextError(f"{what}: the device is shut down")


def has_display() -> bool:
    """True when a windowing system is reachable (X11 or Wayland)."""
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def context_loader(ctx: moderngl.Context) -> Callable[[str], int | None] | None:
    """The function loader of a moderngl context (moderngl keeps its backend as
    mglo._context): glcontext's backends have load(name); a context made on a host's current
    context is wrapped in moderngl's DefaultLoader, whose method is load_opengl_function (its
    addresses are the host's own: checked under Qt against QOpenGLContext.getProcAddress)."""
    backend = getattr(ctx.mglo, "_context", None)
    for name in ("load", "load_opengl_function"):
        fn = getattr(backend, name, None)
        if callable(fn):
            return fn
    return None


@contextmanager
def driver_output_to_stderr() -> Iterator[None]:
    """While a context is made, the driver's own prints go to stderr: Mesa writes override
    warnings ("GL_ARB_direct_state_access cannot be disabled") to stdout, where they would
    break a command's JSON output."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no usable stdout (closed, or replaced by a host)
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def create_headless() -> ContextHandle:
    """A standalone context through EGL: no display needed (llvmpipe or a real GPU).

    EGL hands out exactly the version asked for (NVIDIA gives 3.3 when asked for 3.3), so
    ask for 4.6 and 4.5 first: immutable storage, copy image and KHR_debug are core there."""
    ctx, last_exc = None, None
    for version in (460, 450, MIN_GL):
        try:
            with driver_output_to_stderr():
                ctx = moderngl.create_context(standalone=True, backend="egl", require=version)
            break
        except Exception as exc:  # this version is not offered; try the next lower one
            last_exc = exc
    if ctx is None:
        raise ContextError(f"cannot create a headless EGL context: {last_exc}") from last_exc
    loader = context_loader(ctx)
    if loader is None:
        ctx.release()
        raise ContextError("the EGL backend exposes no function loader")
    return ContextHandle(ctx, loader, "egl")


def open_glfw_window(size: tuple[int, int] = (1280, 720), title: str = "engine",
                     visible: bool = True, vsync: bool = False) -> Any:
    """A glfw window with a core 3.3+ context, made current (drivers give their highest
    compatible): what the engine needs of a host's window. The caller owns the window
    (`glfw.destroy_window`, then `glfw.terminate`); ContextError when none can be made."""
    import glfw

    if not glfw.init():
        raise ContextError("glfw.init() failed (no display?)")
    glfw.window_hint(glfw.CONTEXT_VERSION_MAJOR, 3)
    glfw.window_hint(glfw.CONTEXT_VERSION_MINOR, 3)
    glfw.window_hint(glfw.OPENGL_PROFILE, glfw.OPENGL_CORE_PROFILE)
    glfw.window_hint(glfw.OPENGL_FORWARD_COMPAT, True)
    glfw.window_hint(glfw.VISIBLE, bool(visible))
    win = glfw.create_window(int(size[0]), int(size[1]), title, None, None)
    if not win:
        glfw.terminate()
        raise ContextError("glfw could not create a window with an OpenGL 3.3 core context")
    glfw.make_context_current(win)
    glfw.swap_interval(1 if vsync else 0)
    return win


def create_window(size: tuple[int, int] = (1280, 720), title: str = "engine",
                  visible: bool = True, vsync: bool = False) -> ContextHandle:
    """A glfw window with a core 3.3+ context, owned by the engine."""
    import glfw

    with driver_output_to_stderr():
        win = open_glfw_window(size, title, visible, vsync)
    try:
        with driver_output_to_stderr():
            ctx = moderngl.create_context(require=MIN_GL)
    except Exception as exc:
        glfw.destroy_window(win)
        raise ContextError(f"moderngl cannot use the glfw context: {exc}") from exc
    return ContextHandle(ctx, glfw.get_proc_address, "window", window=win)


def adopt_current(ctx: moderngl.Context | None = None,
                  loader: Callable[[str], int | None] | None = None) -> ContextHandle:
    """Use the context the host application has made current (its glfw window, a
    moderngl-window app, Qt). The host keeps ownership: we never destroy it."""
    if ctx is None:
        try:
            ctx = moderngl.create_context(require=MIN_GL)
        except Exception as exc:
            raise ContextError(f"no current GL context to adopt: {exc}") from exc
    loader = loader or context_loader(ctx)
    if loader is None:
        try:
            import glfw
            if glfw.get_current_context():
                loader = glfw.get_proc_address
        except Exception:  # glfw absent or not initialised: no loader from it
            loader = None
    if loader is None:
        raise ContextError("cannot find a GL function loader for the adopted context; "
                           "pass loader= (e.g. glfw.get_proc_address)")
    return ContextHandle(ctx, loader, "adopted", owns_context=False)
