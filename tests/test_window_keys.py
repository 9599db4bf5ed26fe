"""Window mode's live controls, driven through the window's own glfw key callback.

The window runs in a subprocess (this file run as a script): it makes its own GL context,
which must not become current in the test process where the session's headless device lives.
Key presses go to the callback engine.hosts.window installed with glfw.set_key_callback, as
glfw would deliver them; held movement keys are polled with glfw.get_key, so the script
answers those polls for the keys it holds. What each frame saw comes back as JSON.

Script (a key pressed in frame f's hook acts from frame f+1): '-' at 2, '+' at 4, M at 6 and
8, H at 10 and 20, W held 12-14, D 15-16, S 17-18, A 19, Esc at 24.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# One window subprocess under Xvfb, read by every test here.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SIZE = (160, 120)
FRAMES = 100  # more than the script runs: Esc must end it
ESC_FRAME = 24
MOVES = {**dict.fromkeys((12, 13, 14), "W"), 15: "D", 16: "D", 17: "S", 18: "S", 19: "A"}
PRESSES = {2: "MINUS", 4: "EQUAL", 6: "M", 8: "M", 10: "H", 20: "H", ESC_FRAME: "ESCAPE"}
STEP = 4.0 / 60.0  # FlyCamera.speed x the frame loop's fixed dt


def drive(out: Path, shot: Path, cache: Path) -> None:
    """Run the gallery in a window under the key script; write what each frame saw to `out`."""
    import glfw

    from engine.demos import DEMOS
    from engine.diagnostics import hud
    from engine.app.loop import FrameContext
    from engine.hosts.run import run_scene

    held: set[int] = set()
    poll = glfw.get_key
    glfw.get_key = lambda window, key: glfw.PRESS if key in held else poll(window, key)
    hud_frames: list[int] = []
    draw = hud.Hud.draw

    def counting_draw(self: Any, fbo: Any, size: tuple[int, int], stats: Any,
                      view_mode: str | None = None) -> None:
        hud_frames.append(int(stats["frame"]))
        draw(self, fbo, size, stats, view_mode)

    hud.Hud.draw = counting_draw  # type: ignore[method-assign]
    seen: list[dict[str, Any]] = []

    def script(ctx: FrameContext) -> None:
        cam = ctx.scene.camera
        image = ctx.renderer.read_output()
        seen.append({"frame": ctx.frame, "budget": ctx.record["budget_bytes"],
                     "view_mode": ctx.renderer.view_mode,
                     "position": list(cam.position), "target": list(cam.target),
                     "green": float(np.mean((image[..., 1] > image[..., 0] + 20)
                                            & (image[..., 1] > image[..., 2] + 20)))})
        window = ctx.device.handle.window
        held.clear()
        if ctx.frame in MOVES:
            held.add(getattr(glfw, "KEY_" + MOVES[ctx.frame]))
        if ctx.frame in PRESSES:
            # The window's handler (None unsets it: glfw's API, which the stubs lack)...
            on_key = glfw.set_key_callback(window, None)  # type: ignore[arg-type]
            assert on_key is not None
            glfw.set_key_callback(window, on_key)  # ...put back, and called as glfw would
            on_key(window, getattr(glfw, "KEY_" + PRESSES[ctx.frame]), 0, glfw.PRESS, 0)

    result = run_scene(DEMOS["gallery"].factory, headless=False, frames=FRAMES, size=SIZE,
                       budget="256MiB",
                        screenshot=shot, provider="streaming", on_frame=[script],
                        options={"count": 4, "texture_size": 64, "cache_dir": cache})
    out.write_text(json.dumps({"seen": seen, "hud_frames": hud_frames,
                               "summary": result.summary}))


WindowRun = tuple[dict[str, Any], Path]  # what the frames saw, the screenshot


@pytest.fixture(scope="module")
def window_run(xvfb_display: str, tmp_path_factory: pytest.TempPathFactory
               ) -> WindowRun:
    """One window run of the whole key script, shared by the tests that read it."""
    tmp = tmp_path_factory.mktemp("window-keys")
    out, shot = tmp / "seen.json", tmp / "shot.png"
    env = {**os.environ, "DISPLAY": xvfb_display, "PYTHONPATH": str(ROOT)}
    env.pop("WAYLAND_DISPLAY", None)
    proc = subprocess.run([sys.executable, __file__, str(out), str(shot), str(tmp / "cache")],
                          check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(out.read_text()), shot


def _frame(data: dict[str, Any], n: int) -> dict[str, Any]:
    return data["seen"][n]


@pytest.mark.window
def test_escape_closes_and_the_screenshot_is_written(window_run: WindowRun) -> None:
    from PIL import Image

    data, shot = window_run
    assert [f["frame"] for f in data["seen"]] == list(range(ESC_FRAME + 1))
    assert data["summary"]["frames"] == ESC_FRAME + 1 < FRAMES
    assert data["summary"]["leaked_objects"] == 0
    image = np.asarray(Image.open(shot))
    assert image.shape[:2] == (SIZE[1], SIZE[0]) and image.std() > 5


@pytest.mark.window
def test_plus_and_minus_change_the_budget_by_a_quarter(window_run: WindowRun) -> None:
    data, _ = window_run
    budgets = [f["budget"] for f in data["seen"]]
    assert budgets[0] == budgets[2] == 256 << 20
    assert budgets[3] == int(budgets[2] * 0.75)
    assert budgets[5] == int(budgets[4] * 1.25)
    assert len(set(budgets[5:])) == 1


@pytest.mark.window
def test_m_toggles_the_mip_debug_view(window_run: WindowRun) -> None:
    data, _ = window_run
    modes = [f["view_mode"] for f in data["seen"]]
    assert modes[:7] == ["lit"] * 7 and modes[7:9] == ["mip"] * 2 and set(modes[9:]) == {"lit"}
    # The mip view paints the panels (green where every level is resident): a visibly other
    # picture, not only another flag.
    assert _frame(data, 7)["green"] > _frame(data, 6)["green"] + 0.02


@pytest.mark.window
def test_h_toggles_the_hud(window_run: WindowRun) -> None:
    data, _ = window_run
    # The HUD draws after the script's hook: H pressed in frame 10 already hides frame 10's.
    assert data["hud_frames"] == list(range(10)) + list(range(20, ESC_FRAME + 1))


@pytest.mark.window
def test_wasd_fly_the_camera(window_run: WindowRun) -> None:
    """W/S move along the view direction and D/A across it, speed x dt per frame held; the
    fly camera keeps the view direction it took over with."""
    data, _ = window_run

    def pos(n: int) -> np.ndarray:
        return np.array(_frame(data, n)["position"])

    forward = np.array(_frame(data, 13)["target"]) - pos(13)
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, [0.0, 1.0, 0.0])
    right /= np.linalg.norm(right)
    expected = {"W": forward, "S": -forward, "D": right, "A": -right}
    for n in range(14, 21):
        key = MOVES[n - 1]
        assert pos(n) - pos(n - 1) == pytest.approx(expected[key] * STEP, abs=1e-5), (n, key)
    # Released: the fly camera stays where it was flown, off the scripted path.
    assert pos(ESC_FRAME) == pytest.approx(pos(20), abs=1e-6)


if __name__ == "__main__":
    drive(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
