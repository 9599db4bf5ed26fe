"""Embedding the engine in a host application that owns its own glfw window and context.

The host makes the window and the moderngl context, keeps drawing its own things (here a
frame border, with objects made through `TrackedContext` so they count in the same ledger and
leak checks), and lets the engine render a scene into its window each frame:

    python examples/embed_glfw.py --frames 120        # 0 = until the window is closed

Exits 0 when every GL object (the engine's and the host's) was released, 1 otherwise.
"""
from __future__ import annotations

import argparse
import logging
import sys

import glfw
import moderngl
import numpy as np


from engine.demos.gltf_demo import build
from engine.errors import ContextError
from engine.gl.context import open_glfw_window
from engine.gl.tracking import TrackedContext
from engine.gl.device import Device
from engine.app.loop import FrameLoop

log = logging.getLogger("embed_glfw")

BORDER_VS = """#version 330 core
in vec2 in_pos;
void main() { gl_Position = vec4(in_pos, 0.0, 1.0); }"""
BORDER_FS = """#version 330 core
out vec4 f_color;
void main() { f_color = vec4(0.9, 0.6, 0.1, 1.0); }"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=0, help="frames to draw (0: until closed)")
    ap.add_argument("--size", type=int, nargs=2, default=(640, 400))
    ap.add_argument("--budget", default="256MiB")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    try:  # the host's own window (any 3.3 core context does; engine.gl has a helper)
        win = open_glfw_window(tuple(args.size), "host app + engine")
    except ContextError as exc:
        raise SystemExit(str(exc)) from None
    host_ctx = moderngl.create_context(require=330)
    device = Device.adopt(host_ctx, loader=glfw.get_proc_address)
    ctx = TrackedContext(host_ctx, device)  # the host's own objects, now ledgered too
    prog = ctx.program(vertex_shader=BORDER_VS, fragment_shader=BORDER_FS)
    edge = np.array([-1, -1, 1, -1, 1, 1, -1, 1], np.float32) * 0.995
    vbo = ctx.buffer(edge.tobytes())
    vao = ctx.vertex_array(prog, [(vbo, "2f", "in_pos")])
    fb_size = glfw.get_framebuffer_size(win)
    loop = FrameLoop.embedded(device, build, size=fb_size, budget=args.budget)
    frame = 0
    try:
        while not glfw.window_should_close(win) and (args.frames <= 0 or frame < args.frames):
            loop.step(frame)  # the engine renders into its output image
            loop.renderer.blit_to_screen()  # ... which the host puts in its window
            host_ctx.screen.use()
            host_ctx.viewport = (0, 0, *fb_size)
            vao.render(moderngl.LINE_LOOP)  # the host keeps drawing its own things on top
            glfw.swap_buffers(win)
            glfw.poll_events()
            frame += 1
    finally:
        loop.release()
        for obj in (vao, vbo, prog):
            obj.release()  # released directly, as host code does; the device notices
        left = device.shutdown()  # adopted: the host's context survives
        glfw.destroy_window(win)
        glfw.terminate()
    log.info("%d frames, %d GL object(s) left at shutdown", frame, len(left))
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
