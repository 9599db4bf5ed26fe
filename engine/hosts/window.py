"""The window host: the same frame loop in a glfw window, with a fly camera and live controls.

Keys: WASD/QE fly (mouse-look while the left button is held), C back to the scripted camera,
a scene with a navigator (the wall) zooms at the cursor with the wheel and drags with the left
button instead,
+/- raise/lower the budget by 25% (through the governor, which owns it), H toggle the HUD,
M toggle the mip-debug view, P write a snapshot of who holds what (engine-snapshot-PID-N.json
and .html in the current folder), Esc quit. The window shows the renderer's output image (blitted),
so what you see is exactly what the headless run would read back.

A scene with `controls` (the image browser) is given the keys first (by name), double clicks
and the window's title. Drags of its navigator are taken from the pointer's events, each
move as it happened, so a drag of N pixels moves the picture N pixels at any frame rate.
While the last frame's record says `settled` (nothing more changes the picture by itself)
and no input came, the window sleeps in glfw's event wait and draws nothing, or, while the
record says `work_pending` (work off screen that frames drive: the viewer's encoder), one
frame each IDLE_WAIT_S: an idle window costs next to no CPU.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import glfw

from ..app.loop import FrameLoop
from ..app.settings import RunSettings
from ..gl.device import Device
from ..render.camera import FlyCamera
from ..render.scene import Scene

log = logging.getLogger(__name__)

_MOVE_KEYS = {glfw.KEY_W: (1, 0, 0), glfw.KEY_S: (-1, 0, 0), glfw.KEY_D: (0, 1, 0),
              glfw.KEY_A: (0, -1, 0), glfw.KEY_E: (0, 0, 1), glfw.KEY_Q: (0, 0, -1)}
#: The keys a scene's controls are offered, by the names they receive.
KEY_NAMES = {glfw.KEY_RIGHT: "right", glfw.KEY_LEFT: "left", glfw.KEY_UP: "up",
             glfw.KEY_DOWN: "down", glfw.KEY_PAGE_UP: "page_up",
             glfw.KEY_PAGE_DOWN: "page_down", glfw.KEY_HOME: "home",
             glfw.KEY_ENTER: "return", glfw.KEY_KP_ENTER: "return", glfw.KEY_SPACE: "space",
             glfw.KEY_BACKSPACE: "backspace", glfw.KEY_ESCAPE: "escape", glfw.KEY_F: "f",
             glfw.KEY_Q: "q"}
#: Two left clicks within this many seconds (and a few pixels) are a double click.
DOUBLE_CLICK_S = 0.4
#: Longest sleep in the event wait of an idle window (it wakes at once on input).
IDLE_WAIT_S = 0.5
#: Pointer moves ask the scene for the title (the file under the pointer) at most this often.
TITLE_EVERY_S = 0.1


class WindowHost:
    """Input state between glfw callbacks and the frame loop; presents each frame."""

    def __init__(self, device: Device, frames: int) -> None:
        self.device = device
        self.window: Any = device.handle.window
        self.frames = frames
        self.loop: FrameLoop | None = None
        self.fly: FlyCamera | None = None
        self.navigating = False  # the user took the scene's navigator over the script
        self.hud_on = True
        self._mouse: tuple[float, float] | None = None
        self.snapshots = 0  # P key presses: numbers the snapshot files
        self._drag_from: tuple[float, float] | None = None  # the pointer, while dragging
        self._click: tuple[float, float, float] | None = None  # last left press: time, x, y
        self._dirty = True  # input came since the last frame drawn
        self._title = ""
        self._titled_at = 0.0  # glfw time of the last title asked of the scene

    # ------------------------------------------------------------------ Host
    def output_size(self, settings: RunSettings) -> tuple[int, int]:
        return tuple(glfw.get_framebuffer_size(self.window))

    def attach(self, loop: FrameLoop) -> None:
        self.loop = loop
        glfw.set_key_callback(self.window, self._on_key)
        glfw.set_scroll_callback(self.window, self._on_scroll)
        glfw.set_cursor_pos_callback(self.window, self._on_cursor)
        glfw.set_mouse_button_callback(self.window, self._on_button)
        glfw.set_framebuffer_size_callback(self.window, lambda *_: self._touch())
        glfw.set_window_refresh_callback(self.window, lambda *_: self._touch())

    def running(self, frame: int) -> bool:
        return not glfw.window_should_close(self.window) and (self.frames <= 0
                                                               or frame < self.frames)

    def before_frame(self, loop: FrameLoop) -> bool:
        last = loop.frames[-1] if loop.frames else {}
        if not self._dirty and last.get("settled"):
            glfw.wait_events_timeout(IDLE_WAIT_S)  # wakes at once on input
            if not self._dirty and not last.get("work_pending"):
                return False  # nothing changed, nothing to drive: draw nothing
        else:
            glfw.poll_events()
        self._dirty = False
        fb = glfw.get_framebuffer_size(self.window)
        if fb[0] <= 0 or fb[1] <= 0:
            return False  # minimised: nothing to draw into
        assert loop.renderer is not None
        loop.renderer.set_output_size(fb)
        return True

    def after_frame(self, loop: FrameLoop) -> None:
        assert loop.renderer is not None
        loop.renderer.blit_to_screen()
        glfw.swap_buffers(self.window)
        self._retitle()

    def _touch(self) -> None:
        self._dirty = True

    def _cursor_ndc(self) -> tuple[float, float] | None:
        """The pointer in normalised device coordinates; None outside the window."""
        x, y = glfw.get_cursor_pos(self.window)
        w, h = glfw.get_window_size(self.window)
        if not (0 <= x < w and 0 <= y < h):
            return None
        return (2.0 * x / max(1, w) - 1.0, 1.0 - 2.0 * y / max(1, h))

    def _retitle(self) -> None:
        """The scene's title (its controls'), set only when it changed."""
        scene = self.loop.scene if self.loop is not None else None
        if scene is None or scene.controls is None:
            return
        self._titled_at = glfw.get_time()
        title = scene.controls.title(self._cursor_ndc())
        if title != self._title:
            self._title = title
            glfw.set_window_title(self.window, title)

    def hud_visible(self) -> bool:
        return self.hud_on

    # ------------------------------------------------------------------ input
    def _on_key(self, window, key, scancode, action, mods) -> None:
        if action == glfw.RELEASE or self.loop is None:
            return
        self._touch()
        scene = self.loop.scene
        if scene is not None and scene.controls is not None and key in KEY_NAMES:
            answer = scene.controls.key(KEY_NAMES[key], self._cursor_ndc())
            if answer == "quit":
                glfw.set_window_should_close(window, True)
            if answer is not None:
                if scene.navigator is not None:
                    self._take_over(scene)
                return
        if action != glfw.PRESS:
            return
        governor = self.loop.governor
        if key == glfw.KEY_ESCAPE:
            glfw.set_window_should_close(window, True)
        elif key in (glfw.KEY_EQUAL, glfw.KEY_KP_ADD):
            governor.scale_budget(1.25)
        elif key in (glfw.KEY_MINUS, glfw.KEY_KP_SUBTRACT):
            governor.scale_budget(0.75)
        elif key == glfw.KEY_H:
            self.hud_on = not self.hud_on
        elif key == glfw.KEY_M and self.loop.renderer is not None:
            r = self.loop.renderer
            r.view_mode = "lit" if r.view_mode == "mip" else "mip"
        elif key == glfw.KEY_C:
            self.fly = None
            self.navigating = False
        elif key == glfw.KEY_P:
            self.snapshots += 1
            path = self.loop.snapshot(Path(f"engine-snapshot-{os.getpid()}-{self.snapshots}.json"))
            log.info("snapshot written to %s and %s", path, path.with_suffix(".html"))

    def _on_scroll(self, window, xoffset: float, yoffset: float) -> None:
        scene = self.loop.scene if self.loop is not None else None
        if scene is None or scene.navigator is None or not yoffset:
            return
        x, y = glfw.get_cursor_pos(window)
        w, h = glfw.get_window_size(window)
        ndc = (2.0 * x / max(1, w) - 1.0, 1.0 - 2.0 * y / max(1, h))
        self._take_over(scene)
        scene.navigator.zoom(float(yoffset), ndc)
        self._touch()

    def _on_button(self, window, button: int, action: int, mods: int) -> None:
        """Left press starts a drag of the navigator (and, the second within
        DOUBLE_CLICK_S, is a double click for the scene's controls); release ends it."""
        scene = self.loop.scene if self.loop is not None else None
        if scene is None or scene.navigator is None or button != glfw.MOUSE_BUTTON_LEFT:
            return
        x, y = glfw.get_cursor_pos(window)
        if action != glfw.PRESS:
            self._drag_from = None
            return
        self._drag_from = (x, y)
        now = glfw.get_time()
        last, self._click = self._click, (now, x, y)
        if last is not None and now - last[0] <= DOUBLE_CLICK_S and \
                abs(x - last[1]) + abs(y - last[2]) <= 6 and scene.controls is not None:
            ndc = self._cursor_ndc()
            if ndc is not None:
                self._take_over(scene)
                scene.controls.open_at(ndc)
                self._click = None
                self._touch()

    def _on_cursor(self, window, x: float, y: float) -> None:
        """Each pointer move while the left button is held drags the navigator by exactly
        that move (window coordinates scaled to the framebuffer's pixels); any move may
        change the title (the file under the pointer)."""
        scene = self.loop.scene if self.loop is not None else None
        if scene is None or scene.navigator is None:
            return
        if self._drag_from is not None and (x, y) != self._drag_from:
            w, h = glfw.get_window_size(window)
            fw, fh = glfw.get_framebuffer_size(window)
            dx, dy = x - self._drag_from[0], y - self._drag_from[1]
            self._take_over(scene)
            scene.navigator.drag(dx * fw / max(1, w), dy * fh / max(1, h))
            self._drag_from = (x, y)
            self._touch()
        elif glfw.get_time() - self._titled_at >= TITLE_EVERY_S:  # a pick is O(images)
            self._retitle()

    def camera(self, scene: Scene) -> None:
        """Per frame: take over from the scripted path once the user moves."""
        if scene.navigator is not None:
            self._navigate(scene)
            return
        move = [0.0, 0.0, 0.0]
        for key, axes in _MOVE_KEYS.items():
            if glfw.get_key(self.window, key) == glfw.PRESS:
                move = [m + a for m, a in zip(move, axes)]
        looking = glfw.get_mouse_button(self.window, glfw.MOUSE_BUTTON_LEFT) == glfw.PRESS
        if self.fly is None and (any(move) or looking):
            self.fly = FlyCamera.from_camera(scene.camera)
        if self.fly is None:
            return
        x, y = glfw.get_cursor_pos(self.window)
        if looking and self._mouse is not None:
            self.fly.look(x - self._mouse[0], y - self._mouse[1])
        self._mouse = (x, y)
        assert self.loop is not None
        self.fly.move(self.loop.dt, *move)
        self.fly.apply(scene.camera)

    def _navigate(self, scene: Scene) -> None:
        """A scene with a navigator: left-drag moves it (_on_cursor), the wheel zooms
        (_on_scroll); once touched, the navigator poses the camera instead of the scripted
        path."""
        if self.navigating:
            scene.navigator.apply(scene.camera)

    def _take_over(self, scene: Scene) -> None:
        if not self.navigating:
            scene.navigator.follow(scene.camera)  # from where the scripted camera is now
            self.navigating = True
