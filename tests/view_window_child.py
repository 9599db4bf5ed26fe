"""One `engine view` window run driven by synthetic glfw callbacks (tests/test_view_window.py),
in a process of its own: a glfw window in a process that already made a headless EGL
device is not safe.

    python tests/view_window_child.py FOLDER OUT.json

writes what the window showed and did: titles after key presses, the drag in pixels, the
wheel's zoom factor, the image a double click opened, the frames drawn and the last
frame's `settled`, the idle window's CPU (a fraction of a core over its waits), and the
run's leaked objects and picture contrast.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import glfw

from engine.hosts import window
from engine.hosts.run import run_scene
from engine.view.wall import ImageWall
from view_helpers import screen_of

SIZE = (320, 180)


def callbacks(win) -> dict:
    """The window's own glfw callbacks (set back at once: glfw hands out the previous)."""
    out = {}
    for name in ("key", "mouse_button", "cursor_pos", "scroll"):
        setter = getattr(glfw, f"set_{name}_callback")
        out[name] = setter(win, None)
        setter(win, out[name])
    return out


def idle_meter() -> list[tuple[float, float]]:
    """(CPU, wall) seconds at each of the idle window's event waits: between the first and
    the last, the window did nothing but wait (the idle CPU)."""
    marks: list[tuple[float, float]] = []
    wait = glfw.wait_events_timeout

    def timed(timeout: float) -> None:
        marks.append((time.process_time(), time.perf_counter()))
        wait(timeout)

    window.glfw.wait_events_timeout = timed
    return marks


def main(folder: str, out: str) -> int:
    window.IDLE_WAIT_S = 0.02  # iterations of an idle window pass quickly
    marks = idle_meter()
    wall = ImageWall([folder], detail=False, workers=1, progress=False)
    wall.make_thumbnails()  # the idle window: nothing left to make
    nav = wall.navigator
    seen: dict[str, object] = {}

    def drive(ctx) -> None:
        win = glfw.get_current_context()
        cb = callbacks(win)
        key, button = cb["key"], cb["mouse_button"]
        n = ctx.frame
        if n in (1, 2):
            if n == 2:
                seen["opened"] = glfw.get_window_title(win)
            key(win, glfw.KEY_RIGHT, 0, glfw.PRESS, 0)
        elif n == 3:
            seen["stepped"] = glfw.get_window_title(win)
            key(win, glfw.KEY_HOME, 0, glfw.PRESS, 0)
        elif n == 4:
            seen["home"] = [wall.browser.current, nav.fitted is not None]
            glfw.set_cursor_pos(win, 100, 90)
            before = nav.x
            button(win, glfw.MOUSE_BUTTON_LEFT, glfw.PRESS, 0)
            for k in range(1, 21):  # 200 px in 20 moves within one frame
                cb["cursor_pos"](win, 100 + 10 * k, 90)
            button(win, glfw.MOUSE_BUTTON_LEFT, glfw.RELEASE, 0)
            seen["drag"] = (before - nav.x) / (2 * nav._half_h() / nav.pixels_high)
            key(win, glfw.KEY_F, 0, glfw.PRESS, 0)  # fit all again
            glfw.set_cursor_pos(win, *screen_of(nav, wall.items[1].rect, SIZE, 0.5, 0.5))
            far = nav.distance
            cb["scroll"](win, 0.0, 2.0)  # the wheel: two steps in, about the pointer
            seen["wheel"] = far / nav.distance
            for action in (glfw.PRESS, glfw.RELEASE, glfw.PRESS, glfw.RELEASE):
                button(win, glfw.MOUSE_BUTTON_LEFT, action, 0)  # a double click
            seen["double"] = wall.browser.current

    # the frame clock (deterministic) at a long dt: levels fade in within a few frames
    result = run_scene(wall, headless=False, frames=60, size=SIZE, dt=0.25,
                       deterministic=True, provider="streaming", budget="64MiB",
                       on_frame=[*wall.hooks(), drive])
    (cpu0, wall0), (cpu1, wall1) = marks[0], marks[-1]
    seen.update(idle_s=wall1 - wall0, idle_cpu=(cpu1 - cpu0) / max(1e-9, wall1 - wall0))
    seen.update(leaked=result.summary["leaked_objects"], drawn=len(result.frames),
                settled=bool(result.frames[-1]["settled"]),
                contrast=float(result.image.std()))
    Path(out).write_text(json.dumps(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
