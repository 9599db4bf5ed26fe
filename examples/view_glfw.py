"""A photo browser in an application's own glfw window: `engine.ImageWall` as the scene,
the app's own mouse handling driving the wall's navigator, a click printing the image and
pixel under the cursor.

    python examples/view_glfw.py photos/ --budget 256MiB

Exits 0 when every GL object was released, 1 otherwise.
"""
from __future__ import annotations

import argparse
import logging
import sys

import glfw
import moderngl

import engine
from engine.app.loop import FrameLoop
from engine.errors import ContextError
from engine.gl.context import open_glfw_window
from engine.gl.device import Device

log = logging.getLogger("view_glfw")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="folders, globs or image files")
    ap.add_argument("--frames", type=int, default=0, help="frames to draw (0: until closed)")
    ap.add_argument("--budget", default="256MiB")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    wall = engine.ImageWall(args.paths)  # thumbnails made (or read from the cache) here
    try:  # the app's own window (any 3.3 core context does; engine.gl has a helper)
        win = open_glfw_window((1280, 720), "my photo browser")
    except ContextError as exc:
        raise SystemExit(str(exc)) from None
    device = Device.adopt(moderngl.create_context(require=330), loader=glfw.get_proc_address)
    loop = FrameLoop.embedded(device, wall, size=glfw.get_framebuffer_size(win),
                              budget=args.budget, provider="streaming", on_frame=wall.hooks())
    last = [None]

    def ndc() -> tuple[float, float]:
        x, y = glfw.get_cursor_pos(win)
        w, h = glfw.get_window_size(win)
        return 2 * x / max(1, w) - 1, 1 - 2 * y / max(1, h)

    def on_scroll(_w, _dx, dy) -> None:
        wall.navigator.zoom(dy, ndc())

    def on_button(_w, button, action, _mods) -> None:
        if button == glfw.MOUSE_BUTTON_LEFT and action == glfw.PRESS:
            print(wall.pick(ndc()))  # Pick(index, path, x, y) or None
        if button == glfw.MOUSE_BUTTON_RIGHT and action == glfw.PRESS:
            wall.fit_all()

    glfw.set_scroll_callback(win, on_scroll)
    glfw.set_mouse_button_callback(win, on_button)
    frame = 0
    try:
        while not glfw.window_should_close(win) and (args.frames <= 0 or frame < args.frames):
            glfw.poll_events()
            x, y = glfw.get_cursor_pos(win)
            if glfw.get_mouse_button(win, glfw.MOUSE_BUTTON_LEFT) == glfw.PRESS and last[0]:
                wall.navigator.drag(x - last[0][0], y - last[0][1])
            last[0] = (x, y)
            loop.renderer.set_output_size(glfw.get_framebuffer_size(win))
            loop.step(frame)
            loop.renderer.blit_to_screen()
            glfw.swap_buffers(win)
            frame += 1
    finally:
        loop.release()
        left = device.shutdown()
        glfw.destroy_window(win)
        glfw.terminate()
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
