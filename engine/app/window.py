"""The window host: the same frame loop in a glfw window, with a fly camera and live controls.

Keys: WASD/QE fly (mouse-look while the left button is held), C back to the scripted camera,
a scene with a navigator (the wall) zooms at the cursor with the wheel and drags with the left
button instead,
+/- raise/lower the budget by 25% (through the governor, which owns it), H toggle the HUD,
M toggle the mip-debug view, P write a snapshot of who holds what (engine-snapshot-PID-N.json
and .html in the current folder), Esc quit. The window shows the renderer's output image (blitted),
so what you see is exactly what the headless run would read back.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import glfw

from ..gl.device import Device
from ..render.camera import FlyCamera
from ..render.scene import Scene
from .loop import FrameLoop
from .settings import RunSettings

log = logging.getLogger(__name__)

_MOVE_KEYS = {glfw.KEY_W: (1, 0, 0), glfw.KEY_S: (-1, 0, 0), glfw.KEY_D: (0, 1, 0),
              glfw.KEY_A: (0, -1, 0), glfw.KEY_E: (0, 0, 1), glfw.KEY_Q: (0, 0, -1)}


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

    # ------------------------------------------------------------------ Host
    def output_size(self, settings: RunSettings) -> tuple[int, int]:
        return tuple(glfw.get_framebuffer_size(self.window))

    def attach(self, loop: FrameLoop) -> None:
        self.loop = loop
        glfw.set_key_callback(self.window, self._on_key)
        glfw.set_scroll_callback(self.window, self._on_scroll)

    def running(self, frame: int) -> bool:
        return not glfw.window_should_close(self.window) and (self.frames <= 0
                                                               or frame < self.frames)

    def before_frame(self, loop: FrameLoop) -> bool:
        glfw.poll_events()
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

    def hud_visible(self) -> bool:
        return self.hud_on

    # ------------------------------------------------------------------ input
    def _on_key(self, window, key, scancode, action, mods) -> None:
        if action != glfw.PRESS or self.loop is None:
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
        """A scene with a navigator: left-drag moves it, the wheel zooms (_on_scroll); once
        touched, the navigator poses the camera instead of the scripted path."""
        x, y = glfw.get_cursor_pos(self.window)
        dragging = glfw.get_mouse_button(self.window, glfw.MOUSE_BUTTON_LEFT) == glfw.PRESS
        if dragging and self._mouse is not None and (x, y) != self._mouse:
            self._take_over(scene)
            scene.navigator.drag(x - self._mouse[0], y - self._mouse[1])
        self._mouse = (x, y)
        if self.navigating:
            scene.navigator.apply(scene.camera)

    def _take_over(self, scene: Scene) -> None:
        if not self.navigating:
            scene.navigator.follow(scene.camera)  # from where the scripted camera is now
            self.navigating = True
