"""A `ScienceView` in the hosts photo walls use: its own glfw window (`engine view
data.zarr`), a Qt `EngineWidget` and a rendercanvas `CanvasHost` (Jupyter).

Why beside the scene hosts, not inside their frame loop: a ScienceView draws its own 2D
picture into its own target under its own governor; it has no scene, renderer or texture
provider for `FrameLoop` to drive. So the widget and the canvas host drive it through
`ScienceFrames`, which has `HostFrames`'s shape (they pick it through
`engine.hosts.frames.frames_for`), and the window is the same keys as the photo wall's
(engine.hosts.window's key names, engine.science.controls' meanings) over a small loop that
draws only when the view's picture changed.

    from engine.hosts.science import ScienceScene
    widget = EngineWidget(ScienceScene("cells.ome.zarr"), budget="256MiB")   # Qt
    host = CanvasHost(canvas, ScienceScene("cells.ome.zarr"))                # Jupyter
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..errors import UsageError
from ..gl.device import Device
from ..science.controls import ScienceControls
from ..science.display import ChannelDisplay
from ..science.source import ChunkedSource
from ..science.view import ScienceView, check_reading

log = logging.getLogger(__name__)

#: the window's wait for input while tiles are still being read (seconds): short, so that
#: arrived tiles show soon, and the window still sleeps between them
LOADING_WAIT_S = 0.01


class ScienceFrames:
    """`HostFrames`'s shape over a ScienceView: `render(size)`, `image()`, `output_fbo`,
    `set_visible`, `release`. The hosts' `budget=` is the view's budget; loop settings
    of a scene (share=, provider=, ...) do not apply and are refused."""

    def __init__(self, device: Device, scene: ScienceScene, size: tuple[int, int], *,
                 budget: Any = "256MiB", options: Mapping[str, Any] | None = None,
                 **loop_kw: Any) -> None:
        if loop_kw or options:
            raise UsageError(f"a scientific image view takes budget= only, not "
                             f"{sorted({**loop_kw, **(options or {})})}")
        self.device = device
        self.frame = 0
        self.view = ScienceView(scene.source, device, size=_valid(size), budget=budget,
                                displays=scene.displays, sampling=scene.sampling,
                                encoding=scene.encoding)

    @property
    def loop(self) -> ScienceFrames:
        """Hosts reach the governor as `frames.loop.governor` (HostFrames's shape)."""
        return self

    @property
    def governor(self) -> Any:
        return self.view.governor

    @property
    def size(self) -> tuple[int, int]:
        return self.view.size

    @property
    def output_fbo(self) -> Any:
        return self.view.target.fbo

    def render(self, size: tuple[int, int] | None = None) -> dict[str, Any]:
        """The next frame at the host's size; its FrameStats as a record, with `settled`
        when the picture is complete."""
        if size is not None:
            self.view.resize(_valid(size))
        stats = self.view.frame()
        self.frame += 1
        return {"frame": self.frame - 1, **asdict(stats),
                "settled": not (stats.missing or stats.pending)}

    def set_visible(self, visible: bool) -> None:
        """A hidden view gives its value cache back at once."""
        if not visible:
            self.view.trim()

    def image(self) -> np.ndarray:
        """The last picture as (H, W, 4) RGBA uint8, top row first, opaque."""
        rgba = self.view.target.read()
        rgba[..., 3] = 255
        return rgba

    def release(self) -> None:
        self.view.release()


@dataclass(frozen=True)
class ScienceScene:
    """What a host shows: a source (a path, a URL or a ChunkedSource), its channels'
    looks (None: the coarsest level's percentiles), and how values are read and kept
    (ScienceView's `sampling` and `encoding`). Hosts drive it with ScienceFrames."""

    source: str | ChunkedSource
    displays: Sequence[ChannelDisplay] | None = None
    sampling: str = "nearest"
    encoding: str = "exact"

    host_frames = ScienceFrames

    def __post_init__(self) -> None:
        """Refused when made, as `engine view` refuses them, not when a host first draws."""
        check_reading(self.sampling, self.encoding)


def _valid(size: tuple[int, int]) -> tuple[int, int]:
    return max(1, int(size[0])), max(1, int(size[1]))


class _WindowInput:
    """glfw callbacks to the view's controls; `dirty` when input came since the last
    frame, `expose` when the window needs its picture again."""

    def __init__(self, glfw: Any, window: Any, view: ScienceView) -> None:
        from .window import KEY_NAMES

        self.glfw, self.window, self.view = glfw, window, view
        self.controls = ScienceControls(view)
        self.names = KEY_NAMES
        self.dirty = self.expose = True
        self._drag_from: tuple[float, float] | None = None
        glfw.set_key_callback(window, self._on_key)
        glfw.set_scroll_callback(window, self._on_scroll)
        glfw.set_mouse_button_callback(window, self._on_button)
        glfw.set_cursor_pos_callback(window, self._on_cursor)
        glfw.set_window_refresh_callback(window, self._on_expose)
        glfw.set_framebuffer_size_callback(window, self._on_expose)

    def _pixels(self, x: float, y: float) -> tuple[float, float]:
        """Window coordinates in framebuffer pixels (HiDPI screens have more)."""
        w, h = self.glfw.get_window_size(self.window)
        fw, fh = self.glfw.get_framebuffer_size(self.window)
        return x * fw / max(1, w), y * fh / max(1, h)

    def _on_expose(self, *_: Any) -> None:
        self.dirty = self.expose = True

    def _on_key(self, window: Any, key: int, scancode: int, action: int, mods: int) -> None:
        glfw = self.glfw
        if action == glfw.RELEASE:
            return
        self.dirty = True
        if key in self.names and self.controls.key(self.names[key]) == "quit":
            glfw.set_window_should_close(window, True)
        elif action == glfw.PRESS and key in (glfw.KEY_EQUAL, glfw.KEY_KP_ADD):
            self.view.governor.scale_budget(1.25)  # the photo wall's +/-
        elif action == glfw.PRESS and key in (glfw.KEY_MINUS, glfw.KEY_KP_SUBTRACT):
            self.view.governor.scale_budget(0.75)

    def _on_scroll(self, window: Any, xoffset: float, yoffset: float) -> None:
        if yoffset:
            self.controls.wheel(float(yoffset),
                                self._pixels(*self.glfw.get_cursor_pos(window)))
            self.dirty = True

    def _on_button(self, window: Any, button: int, action: int, mods: int) -> None:
        if button == self.glfw.MOUSE_BUTTON_LEFT:
            self._drag_from = (self.glfw.get_cursor_pos(window)
                               if action == self.glfw.PRESS else None)

    def _on_cursor(self, window: Any, x: float, y: float) -> None:
        if self._drag_from is not None and (x, y) != self._drag_from:
            x0, y0 = self._pixels(*self._drag_from)
            x1, y1 = self._pixels(x, y)
            self.controls.drag(x1 - x0, y1 - y0)
            self._drag_from = (x, y)
            self.dirty = True


def run_window(make_view: Callable[[Device], ScienceView], *, size: tuple[int, int],
               title: str, frames: int = 0, screenshot: str | os.PathLike | None = None,
               on_frame: Callable[[int, ScienceView], None] | None = None) -> dict[str, Any]:
    """Show the view `make_view(device)` makes in a glfw window until closed (q, Esc, the
    window's close) or `frames` loop turns (0: no limit); `on_frame(turn, view)` after
    each; the last picture saved to `screenshot`. A settled window sleeps in glfw's event
    wait and draws nothing. ContextError when no window can open. Returns what the run did
    (turns, frames drawn, peak bytes, objects leaked)."""
    import glfw

    from .window import IDLE_WAIT_S

    device = Device.window(size, title, visible=True)
    turns = drawn = peak = 0
    try:
        with device.leak_check():
            view = make_view(device)
            try:
                window = device.handle.window
                inputs = _WindowInput(glfw, window, view)
                stats = None
                while not glfw.window_should_close(window) and (frames <= 0 or turns < frames):
                    if stats is not None and not inputs.dirty and not stats.drawn:
                        glfw.wait_events_timeout(LOADING_WAIT_S if stats.pending
                                                 else IDLE_WAIT_S)
                    else:
                        glfw.poll_events()
                    inputs.dirty = False
                    fb = glfw.get_framebuffer_size(window)
                    if min(fb) > 0:
                        view.resize(fb)
                        stats = view.frame()
                        peak = max(peak, device.ledger.total)
                        if stats.drawn or inputs.expose:
                            device.copy_framebuffer(None, view.target.fbo)
                            glfw.swap_buffers(window)
                            inputs.expose = False
                            drawn += stats.drawn
                    if on_frame is not None:
                        on_frame(turns, view)
                    turns += 1
                budget = view.governor.budget_bytes
                if screenshot is not None:
                    from PIL import Image
                    Image.fromarray(view.picture()).save(screenshot)
            finally:
                view.release()
    finally:
        left = len(device.shutdown())
    return {"turns": turns, "frames_drawn": drawn, "peak_bytes": peak,
            "budget_bytes": budget, "leaked_objects": left}
