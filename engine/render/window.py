"""Window mode: the same frame loop in a glfw window, with a fly camera and live controls.

Keys: WASD/QE fly (mouse-look while the left button is held), C back to the scripted camera,
+/- raise/lower the budget by 25%, H toggle the HUD, M toggle the mip-debug view, Esc quit.
The window shows the renderer's output image (blitted), so what you see is exactly what the
headless run would read back.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import glfw

from ..gl.device import Device
from ..memory.budget import Budget
from .camera import FlyCamera
from .runner import (
    FrameHook,
    FrameLoop,
    RunResult,
    SceneFactory,
    _hud_hook,
    conclude_run,
)
from .scene import Scene

log = logging.getLogger(__name__)

_MOVE_KEYS = {glfw.KEY_W: (1, 0, 0), glfw.KEY_S: (-1, 0, 0), glfw.KEY_D: (0, 1, 0),
              glfw.KEY_A: (0, -1, 0), glfw.KEY_E: (0, 0, 1), glfw.KEY_Q: (0, 0, -1)}


class _Controls:
    """Input state between glfw callbacks and the frame loop."""

    def __init__(self, device: Device, loop: FrameLoop, window: Any) -> None:
        self.device, self.loop, self.window = device, loop, window
        self.fly: FlyCamera | None = None
        self.hud_on = True
        self._mouse: tuple[float, float] | None = None
        glfw.set_key_callback(window, self._on_key)

    def _on_key(self, window, key, scancode, action, mods) -> None:
        if action != glfw.PRESS:
            return
        budget = self.device.budget
        if key == glfw.KEY_ESCAPE:
            glfw.set_window_should_close(window, True)
        elif key in (glfw.KEY_EQUAL, glfw.KEY_KP_ADD):
            budget.set(int(budget.bytes * 1.25))
        elif key in (glfw.KEY_MINUS, glfw.KEY_KP_SUBTRACT):
            budget.set(int(budget.bytes * 0.75))
        elif key == glfw.KEY_H:
            self.hud_on = not self.hud_on
        elif key == glfw.KEY_M and self.loop.renderer is not None:
            r = self.loop.renderer
            r.view_mode = "lit" if r.view_mode == "mip" else "mip"
        elif key == glfw.KEY_C:
            self.fly = None

    def camera(self, scene: Scene) -> None:
        """Per frame: take over from the scripted path once the user moves."""
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
        self.fly.move(self.loop.dt, *move)
        self.fly.apply(scene.camera)


def run_window(scene_factory: SceneFactory, *, frames: int = 0,
               size: tuple[int, int] = (1280, 720), budget: str | int | Budget = "80%",
               screenshot: Path | str | None = None, report: Path | str | None = None,
               provider: str = "static", scale: float = 1.0, upscale: str = "bilinear",
               view_mode: str = "lit", hud: bool = True, react: bool = True, on_frame: Iterable[FrameHook] = (),
               options: Mapping[str, Any] | None = None, dt: float = 1.0 / 60.0) -> RunResult:
    """Run the scene in a window until Esc/close, or for `frames` frames when > 0."""
    dev = Device.window(size, "engine demo", visible=True, budget=budget)
    try:
        mark = dev.tracker.mark()
        hooks = list(on_frame)
        hud_parts = _hud_hook(dev) if hud else None
        controls: _Controls | None = None
        if hud_parts:
            draw_hud, _ = hud_parts
            hooks.append(lambda ctx: controls is not None and controls.hud_on and draw_hud(ctx))
        window = dev.handle.window
        loop = FrameLoop(dev, scene_factory, size=glfw.get_framebuffer_size(window),
                         provider=provider, scale=scale, upscale=upscale,
                         view_mode=view_mode, react=react,
                         on_frame=hooks, options=options, dt=dt)
        image = None
        try:
            controls = _Controls(dev, loop, window)
            frame = 0
            while not glfw.window_should_close(window) and (frames <= 0 or frame < frames):
                glfw.poll_events()
                assert loop.renderer is not None
                fb = glfw.get_framebuffer_size(window)
                if fb[0] > 0 and fb[1] > 0:
                    loop.renderer.set_output_size(fb)
                    loop.step(frame, controls.camera)
                    loop.renderer.blit_to_screen()
                    glfw.swap_buffers(window)
                frame += 1
            image = loop.renderer.read_output() if loop.renderer is not None else None
        finally:
            loop.release()
            if hud_parts:
                hud_parts[1]()
        return conclude_run(dev, loop, mark, image, screenshot, report)
    finally:
        dev.shutdown()
