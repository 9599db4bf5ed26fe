"""A ScienceView in the photo walls' hosts: the viewer keys without a window, a
rendercanvas canvas (the Jupyter host) drawing it, and `engine view data.zarr` in a glfw
window under Xvfb (keys, wheel and drag through the window's own callbacks)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("zarr")

from science_helpers import pyramid, sample, write_ome_zarr  # noqa: E402

from engine.science.controls import PAN_FRACTION, ZOOM_STEP, ScienceControls  # noqa: E402
from engine.science.plan import Viewport, fit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class _Camera:
    """The camera part of a ScienceView, as plain numbers."""

    def __init__(self) -> None:
        self.size = (200, 100)
        self.vp = Viewport(200, 100, 50.0, 50.0, 2.0)

    def fit(self) -> None:
        self.vp = fit(200, 100, (400, 400))

    def zoom(self, factor, at=None) -> None:
        wx, wy = self.vp.world(*at)
        s = self.vp.scale / factor
        self.vp = Viewport(200, 100, wx - (at[0] - 100) * s, wy - (at[1] - 50) * s, s)

    def pan(self, dx, dy) -> None:
        self.vp = Viewport(200, 100, self.vp.cx - dx * self.vp.scale,
                           self.vp.cy - dy * self.vp.scale, self.vp.scale)


def test_keys_wheel_and_drag_move_the_view_as_the_wall_does():
    cam = _Camera()
    c = ScienceControls(cam)
    assert c.key("right") == "handled"
    assert cam.vp.cx == pytest.approx(50 + 200 * PAN_FRACTION * 2.0)
    c.key("down")
    assert cam.vp.cy == pytest.approx(50 + 100 * PAN_FRACTION * 2.0)
    c.wheel(2, (0, 0))  # the point under the cursor stays put
    assert cam.vp.scale == pytest.approx(2.0 / ZOOM_STEP ** 2)
    assert cam.vp.world(0, 0) == pytest.approx((130 - 200, 90 - 100))
    c.drag(10, 0)
    assert cam.vp.world(10, 0) == pytest.approx((130 - 200, 90 - 100))
    assert c.key("f") == "handled" and cam.vp == fit(200, 100, (400, 400))
    assert c.key("home") == "handled"
    assert c.key("q") == c.key("escape") == "quit"
    assert c.key("return") is None


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    data = pyramid(sample(np.random.default_rng(5), "uint16", (2, 256, 320)), 2)
    return write_ome_zarr(tmp_path_factory.mktemp("hosts") / "h.zarr", data, 3), data


def test_a_canvas_host_draws_the_view_and_refuses_scene_settings(dev, image):
    pytest.importorskip("rendercanvas")
    from rendercanvas.offscreen import RenderCanvas

    from engine.errors import UsageError
    from engine.hosts import CanvasHost
    from engine.hosts.science import ScienceFrames, ScienceScene
    from engine.science.display import ChannelDisplay
    from engine.science.view import ScienceView

    path, data = image
    displays = [ChannelDisplay(0, 65535, colormap="green"), ChannelDisplay(0, 65535)]
    scene = ScienceScene(str(path), displays)
    with dev.leak_check():
        canvas = RenderCanvas(size=(96, 64))
        host = CanvasHost(canvas, scene, device=dev, budget=16 << 20, continuous=False)
        try:
            for _ in range(40):  # until the picture is complete
                canvas.draw()
                if host.last_record["settled"]:
                    break
                host.frames.view.reader.wait_idle(1.0)
            assert isinstance(host.frames, ScienceFrames) and host.last_record["settled"]
            got = host.last_image
            ref = ScienceView(str(path), dev, size=(96, 64), budget=16 << 20,
                              displays=displays)
            try:
                ref.settle(20)
                assert np.array_equal(got[..., :3], ref.picture())
            finally:
                ref.release()
            host.frames.set_visible(False)  # hidden: the value cache goes back
            assert host.frames.view.cache is None
        finally:
            host.close()
        with pytest.raises(UsageError, match="budget= only"):
            ScienceFrames(dev, scene, (32, 32), share=object())


@pytest.mark.window
@pytest.mark.slow
def test_engine_view_opens_a_zarr_in_a_window(xvfb_display, tmp_path):
    """Right pans the picture, the wheel zooms by the wall's step, a 30-px drag moves the
    view 30 screen pixels, q closes the window; nothing leaks."""
    out = tmp_path / "seen.json"
    env = {k: v for k, v in os.environ.items() if k != "WAYLAND_DISPLAY"}
    env.update(DISPLAY=xvfb_display, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests'}")
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "science_window_child.py"),
                           str(tmp_path), str(out)], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(out.read_text())
    assert seen["rc"] == 0 and seen["summary"]["window"]
    assert seen["summary"]["leaked_objects"] == 0
    assert seen["summary"]["turns"] < 400  # q ended it
    cx, cy, scale = seen["start"]
    assert seen["right"] == pytest.approx([cx + 160 * 0.2 * scale, cy, scale])
    assert not np.array_equal(np.array(seen["before"]), np.array(seen["after"]))
    assert seen["wheel"] == pytest.approx(scale / 1.2 ** 2)
    # the wheel at the centre keeps cx; the drag moves it 30 screen pixels
    assert seen["drag"][0] == pytest.approx(seen["right"][0] - 30 * seen["wheel"])


def test_image_view_of_a_scientific_image_is_a_science_scene(dev, image, tmp_path):
    """`engine.ImageView(path)` of an OME-Zarr (or a URL, a slide, a source object) is the
    scene hosts drive a ScienceView with; a picture stays a picture; bad options are refused
    when it is made, as `engine view` refuses them."""
    import engine
    from engine.errors import UsageError
    from engine.hosts.frames import frames_for
    from engine.hosts.science import ScienceFrames, ScienceScene
    from engine.science.gpu import EncodedValueCache
    from engine.science.readers import open_image_source

    path, _ = image
    scene = engine.ImageView(path, encoding="bc4")
    assert isinstance(scene, ScienceScene) and scene.source == str(path)
    assert frames_for(scene) is ScienceFrames
    with dev.leak_check():
        frames = frames_for(scene)(dev, scene, (64, 48), budget=16 << 20)
        try:
            frames.render()
            assert isinstance(frames.view.cache, EncodedValueCache)
        finally:
            frames.release()
    source = open_image_source(str(path))
    try:
        assert isinstance(engine.ImageView(source), ScienceScene)
    finally:
        source.close()
    assert isinstance(engine.ImageView("https://example.org/x.ome.zarr"), ScienceScene)
    with pytest.raises(UsageError, match="encoding 'bc7'"):
        engine.ImageView(path, encoding="bc7")
    with pytest.raises(UsageError, match=r"not \['chunk'\]"):
        engine.ImageView(path, chunk=256)
    from PIL import Image
    Image.new("RGB", (8, 8)).save(tmp_path / "p.png")
    picture = engine.ImageView(tmp_path / "p.png", workers=1, detail=False, progress=False,
                               cache_dir=tmp_path / "cache")
    assert type(picture) is engine.ImageView and len(picture.items) == 1
