"""Embedding the engine in a moderngl-window application (`pip install 'vram-budget-renderer[window]'`: moderngl-window).

moderngl-window owns the window, context and loop; the engine adopts its context and renders
a scene into the window each frame, while the app's own objects go through `TrackedContext`:

    python examples/embed_moderngl_window.py --frames 120 [--window glfw|headless|pyglet]

Exits 0 when every GL object was released, 1 otherwise.
"""
from __future__ import annotations

import argparse
import logging
import sys

import moderngl_window as mglw
import numpy as np


from engine.demos.gltf_demo import build
from engine.gl.tracking import TrackedContext
from engine.gl.device import Device
from engine.app.loop import FrameLoop

log = logging.getLogger("embed_moderngl_window")


class EngineApp(mglw.WindowConfig):
    gl_version = (3, 3)
    title = "moderngl-window + engine"
    window_size = (640, 400)
    aspect_ratio = None
    vsync = False
    max_frames = 0  # set from --frames
    leftover = -1  # GL objects alive at shutdown, read by main()

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        loader = None
        if self.wnd.name == "glfw":
            import glfw
            loader = glfw.get_proc_address
        self.device = Device.adopt(self.ctx, loader=loader)
        tracked = TrackedContext(self.ctx, self.device)
        self.clear_tex = tracked.texture((1, 1), 4, np.array([20, 24, 30, 255], np.uint8))
        self.loop = FrameLoop.embedded(self.device, build, size=self.wnd.buffer_size,
                                       budget="256MiB")
        self.frame = 0

    def on_render(self, time: float, frame_time: float) -> None:
        self.loop.step(self.frame)
        self.ctx.copy_framebuffer(self.wnd.fbo, self.loop.renderer.output_fbo)
        self.frame += 1
        if self.max_frames and self.frame >= self.max_frames:
            self.wnd.close()

    def on_close(self) -> None:
        """moderngl-window's shutdown hook: release everything while the context lives."""
        self.loop.release()
        self.clear_tex.release()
        type(self).leftover = len(self.device.shutdown())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=0, help="frames to draw (0: until closed)")
    args, rest = ap.parse_known_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    EngineApp.max_frames = args.frames
    mglw.run_window_config(EngineApp, args=rest)
    log.info("GL object(s) left at shutdown: %d", EngineApp.leftover)
    return 0 if EngineApp.leftover == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
