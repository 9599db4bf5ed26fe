"""The engine on any rendercanvas canvas: Qt, wx, Jupyter (jupyter_rfb's remote frame buffer)
and offscreen (`pip install 'vram-budget-renderer[canvas]'`).

rendercanvas is pygfx's canvas abstraction: one draw-callback API over many GUI toolkits. Its
canvases present either through wgpu ("screen") or by taking an RGBA image ("bitmap"); the
engine is OpenGL, so it uses the bitmap way: the engine renders offscreen on its own EGL
device and hands each frame's pixels to the canvas. That costs a read-back per frame (about
4 bytes per pixel over the bus), which is what a notebook's remote frame buffer needs anyway
(it sends compressed images to the browser). glfw canvases only present through wgpu; for a
glfw window use the engine's own (`Device.window`, `engine demo`) or examples/embed_glfw.py.

    from rendercanvas.offscreen import RenderCanvas      # or .pyside6, .wx, .jupyter
    canvas = RenderCanvas(size=(640, 400))
    host = CanvasHost(canvas, build_scene, budget="256MiB")
    image = canvas.draw()                                  # offscreen: one frame, (H, W, 4)
    host.close()                                           # releases every GL object

Several canvases (the widgets of a notebook) may draw with one device, one GL context instead
of one each: pass `device=first.device` to the others, and `share=ShareSettings(views)` (a
`ViewShares`) to split one budget between them; each view plans with its own bytes (the
ledger's owners, engine.memory.ledger). A device a host made is shut down when the last host
drawing with it closes, in whatever order they close.
"""
from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..gl.device import Device
from ..gl.hosts import headless_device, made_current
from .frames import HostFrames, SceneFactory, frames_for

log = logging.getLogger(__name__)

#: The open hosts drawing with each device a host made: such a device is shut down when the
#: last of them closes, so hosts that share it may close in any order.
_USERS: weakref.WeakKeyDictionary[Device, set[CanvasHost]] = weakref.WeakKeyDictionary()


class CanvasHost:
    """Drives the engine's frame loop from a canvas's draw callback.

    Each draw renders the next engine frame at the canvas's physical size and sets it as the
    canvas's bitmap. `continuous` asks the canvas for another draw after each one (an
    animation; the canvas's scheduler paces it), until `max_frames` frames (0: no limit).
    `device`: draw with this device; by default a headless EGL device is made, and shut
    down by the `close()` of the last host drawing with it (another host may draw with it:
    `device=first.device`). A device the caller made stays open."""

    def __init__(self, canvas: Any, scene_factory: SceneFactory, *,
                 device: Device | None = None, budget: Any = "256MiB",
                 continuous: bool = True, max_frames: int = 0,
                 options: Mapping[str, Any] | None = None, **loop_kw: Any) -> None:
        self.canvas = canvas
        self.scene_factory = scene_factory
        self.continuous = continuous
        self.max_frames = int(max_frames)
        self._loop_kw = dict(loop_kw, budget=budget, options=dict(options or {}))
        self.device = headless_device() if device is None else device
        if device is None:
            _USERS[self.device] = set()
        self._users = _USERS.get(self.device)  # None: the caller's device
        if self._users is not None:
            self._users.add(self)
        self.frames: HostFrames | None = None
        self.last_image: np.ndarray | None = None
        self.last_record: dict[str, Any] | None = None
        #: GL objects alive when this host's close shut its device down (0: nothing leaked);
        #: None when the device stays open (the caller's, or other hosts still draw with it)
        self.left: int | None = None
        self.drawn = 0  # engine frames drawn (kept after close)
        self.size: tuple[int, int] | None = None  # of the last frame
        self._closed = False
        try:
            self.context = canvas.get_context("bitmap")
            canvas.add_event_handler(self._on_close, "close")
            canvas.request_draw(self._draw)
            if max(canvas.get_physical_size()) <= 1 < max(self._size()):
                # a notebook canvas no browser has shown yet (nbclient, a saved notebook):
                # it asks for no draw until one does, so its first frame is drawn now, at
                # the size it was made with (a canvas of no known size waits for its own)
                canvas.force_draw()
        except BaseException:
            self.close()
            raise

    @property
    def frame(self) -> int:
        """How many engine frames have been drawn (also after close)."""
        return self.drawn

    def _size(self) -> tuple[int, int]:
        """The canvas's physical size; while it reports none (1x1: a jupyter_rfb canvas
        before a browser sends its size), the CSS size it was made with."""
        size = tuple(int(v) for v in self.canvas.get_physical_size())
        if max(size) > 1:
            return size  # type: ignore[return-value]
        css = [str(getattr(self.canvas, f"css_{k}", "")) for k in ("width", "height")]
        if all(v.endswith("px") for v in css):
            return tuple(max(1, round(float(v[:-2]))) for v in css)  # type: ignore[return-value]
        return size  # type: ignore[return-value]

    def _draw(self) -> None:
        if self._closed:
            return
        size = self._size()
        # A host may have made its own GL context current since the last draw.
        with made_current(self.device):
            if self.frames is None:
                self.frames = frames_for(self.scene_factory)(
                    self.device, self.scene_factory, size, **self._loop_kw)
            self.last_record = self.frames.render(size)
            image = self.frames.image()
        self.drawn += 1
        self.size = self.frames.size
        self.context.set_bitmap(image)
        self.last_image = image
        if self.continuous and (self.max_frames <= 0 or self.frame < self.max_frames):
            self.canvas.request_draw()

    def set_visible(self, visible: bool) -> None:
        """The canvas is shown or hidden (a notebook cell scrolled away, a tab switched):
        with `share=` (engine.memory.shares) a hidden view drops to its floor; showing it
        asks for a draw."""
        if self._closed or self.frames is None:
            return
        with made_current(self.device):
            self.frames.set_visible(visible)
        if visible:
            self.canvas.request_draw()

    def _on_close(self, event: Any = None) -> None:
        self.close()

    def close(self) -> int | None:
        """Release the engine's objects, and the device a host made when no other host draws
        with it. Returns the count of GL objects that were still alive at its shutdown (0:
        nothing leaked), or None when the device stays open. Safe to call twice."""
        if self._closed:
            return self.left
        self._closed = True
        with made_current(self.device):
            if self.frames is not None:
                self.frames.release()
                self.frames = None
            if self._users is not None:
                self._users.discard(self)
                if not self._users:
                    self.left = len(self.device.shutdown())
        return self.left
