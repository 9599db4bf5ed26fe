"""`engine view data.zarr` in a window, driven by synthetic glfw callbacks
(tests/test_science_hosts.py), in a process of its own: a glfw window in a process that
already made a headless EGL device is not safe.

    python tests/science_window_child.py FOLDER OUT.json

writes the pictures' change after Right, the view's moves after the wheel and a drag,
the turns the window ran before q closed it, and the command's summary.
"""
from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import glfw
import numpy as np

from engine.cli import main as cli
from engine.hosts import science
from science_helpers import pyramid, sample, write_ome_zarr

SIZE = "160x120"
LIMIT = 400  # turns: q must end the run long before


def main(folder: str, out: str) -> int:
    data = pyramid(sample(np.random.default_rng(3), "uint16", (2, 384, 512)), 2)
    path = write_ome_zarr(Path(folder) / "w.zarr", data, 2)
    seen: dict[str, object] = {}
    state = {"phase": 0, "since": 0}

    def drive(turn: int, view) -> None:
        win = glfw.get_current_context()
        if view.reader.pending or turn - state["since"] < 3:
            return  # let the picture settle first
        vp = view.viewport
        key = glfw.set_key_callback(win, None)
        glfw.set_key_callback(win, key)
        if state["phase"] == 0:
            seen["before"] = view.picture().tolist()
            seen["start"] = [vp.cx, vp.cy, vp.scale]
            key(win, glfw.KEY_RIGHT, 0, glfw.PRESS, 0)
        elif state["phase"] == 1:
            seen["after"] = view.picture().tolist()
            seen["right"] = [vp.cx, vp.cy, vp.scale]
            scroll = glfw.set_scroll_callback(win, None)
            glfw.set_scroll_callback(win, scroll)
            glfw.set_cursor_pos(win, 80, 60)
            scroll(win, 0.0, 2.0)
            seen["wheel"] = view.viewport.scale
            button = glfw.set_mouse_button_callback(win, None)
            glfw.set_mouse_button_callback(win, button)
            cursor = glfw.set_cursor_pos_callback(win, None)
            glfw.set_cursor_pos_callback(win, cursor)
            button(win, glfw.MOUSE_BUTTON_LEFT, glfw.PRESS, 0)
            cursor(win, 110, 60)  # 30 px right
            button(win, glfw.MOUSE_BUTTON_LEFT, glfw.RELEASE, 0)
            seen["drag"] = [view.viewport.cx, view.viewport.scale]
            key(win, glfw.KEY_Q, 0, glfw.PRESS, 0)
        state["phase"] += 1
        state["since"] = turn
        seen["turn"] = turn

    real = science.run_window
    science.run_window = lambda make, **kw: real(make, on_frame=drive, **kw)
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        rc = cli(["view", str(path), "--size", SIZE, "--frames", str(LIMIT),
                  "--contrast", "0:65535"])
    seen["rc"] = rc
    seen["summary"] = json.loads(text.getvalue())
    Path(out).write_text(json.dumps(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
