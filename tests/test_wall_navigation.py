"""The wall in a window: the mouse wheel zooms at the cursor and a left-drag moves the wall,
through the window's own glfw callbacks (a subprocess owns the window, as in
test_window_keys.py). Script: wheel +3 steps at frame 3 (cursor at the centre), a left-drag of
40 px to the right over frames 6-8 (press, two pointer moves, release: the window takes drags
from these events, not from the pointer sampled per frame); what the camera did comes back as
JSON."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def drive(out: Path, cache: Path) -> None:
    import glfw

    from engine.app.loop import FrameContext
    from engine.hosts.run import run_scene
    from engine.demos import DEMOS

    cursor = [48.0, 32.0]  # the centre of the 96x64 window
    real_pos = glfw.get_cursor_pos
    glfw.get_cursor_pos = lambda window: tuple(cursor)
    seen: list[list[float]] = []

    def handler(window, setter):
        """The window's own glfw callback (put back at once), to call as glfw would."""
        own = setter(window, None)
        setter(window, own)
        return own

    def script(ctx: FrameContext) -> None:
        seen.append([float(v) for v in ctx.scene.camera.position])
        window = ctx.device.handle.window
        if ctx.frame == 3:
            handler(window, glfw.set_scroll_callback)(window, 0.0, 3.0)
        button = handler(window, glfw.set_mouse_button_callback)
        if ctx.frame == 6:
            button(window, glfw.MOUSE_BUTTON_LEFT, glfw.PRESS, 0)
        if 7 <= ctx.frame <= 8:
            cursor[0] += 20.0
            handler(window, glfw.set_cursor_pos_callback)(window, *cursor)
        if ctx.frame == 8:
            button(window, glfw.MOUSE_BUTTON_LEFT, glfw.RELEASE, 0)

    result = run_scene(DEMOS["wall"].factory, headless=False, frames=12, size=(96, 64),
                       budget="256MiB", provider="streaming", on_frame=[script],
                       options={"count": 12, "texture_size": 64, "cache_dir": cache,
                                "frames": 400})
    glfw.get_cursor_pos = real_pos
    out.write_text(json.dumps({"seen": seen, "leaked": result.summary["leaked_objects"]}))


@pytest.mark.slow
@pytest.mark.window
def test_wheel_zooms_and_drag_moves_the_wall(xvfb_display: str, tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    env = {**os.environ, "DISPLAY": xvfb_display, "PYTHONPATH": str(ROOT)}
    env.pop("WAYLAND_DISPLAY", None)
    proc = subprocess.run([sys.executable, __file__, str(out), str(tmp_path / "cache")],
                          check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    data = json.loads(out.read_text())
    cams = data["seen"]
    assert data["leaked"] == 0
    # the wheel (3 steps in, at the centre) brought the camera 1.2^3 closer, x and y kept
    assert cams[4][2] == pytest.approx(cams[3][2] / 1.2 ** 3, rel=1e-4)
    assert cams[4][:2] == pytest.approx(cams[3][:2], abs=1e-6)
    # dragging right moves the wall right: the camera goes left; the distance holds
    assert cams[9][0] < cams[6][0] and cams[9][2] == pytest.approx(cams[6][2])
    # once taken over, the scripted flight no longer moves the camera
    assert cams[11] == cams[10]


if __name__ == "__main__":
    drive(Path(sys.argv[1]), Path(sys.argv[2]))
