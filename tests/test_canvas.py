"""The rendercanvas host: the engine drives its frame loop from a canvas's draw callback and
hands each frame to the canvas as a bitmap. Tested headless on the offscreen canvas and on
the Jupyter canvas (jupyter_rfb's remote frame buffer) without a kernel: the browser's side is
played by the test (a resize event, then "send me a frame"), and the PNG the widget would send
over the comm is decoded and held to a headless render of the same scene."""
from __future__ import annotations

import importlib.util
import io

import numpy as np
import pytest
from PIL import Image

from engine.render.imagecompare import compare
from engine.testing import run_headless

SIZE = (160, 120)
FRAMES = 4

needs_rendercanvas = pytest.mark.skipif(importlib.util.find_spec("rendercanvas") is None,
                                        reason="rendercanvas not installed "
                                               "(pip install -e '.[canvas]')")
needs_rfb = pytest.mark.skipif(importlib.util.find_spec("jupyter_rfb") is None,
                               reason="jupyter_rfb not installed (pip install -e '.[canvas]')")


@pytest.fixture
def build():
    from engine.demos.gltf_demo import build
    return build


@pytest.fixture
def reference(device, build):
    """What the engine renders headless at frame FRAMES-1: the picture every host must show."""
    result = run_headless(build, frames=FRAMES, size=SIZE, budget="256MiB", device=device)
    assert result.summary["leaked_objects"] == 0
    return result.image


def _assert_engine_picture(rgba: np.ndarray, reference: np.ndarray) -> None:
    assert rgba.dtype == np.uint8 and rgba.shape == (SIZE[1], SIZE[0], 4)
    assert (rgba[..., 3] == 255).all(), "the engine's frames are opaque"
    verdict = compare(rgba[..., :3], reference, 5, 0.001)
    assert verdict.ok, f"canvas frame vs headless render: {verdict}"


@needs_rendercanvas
def test_offscreen_canvas_draws_the_engine_frames(device, build, reference):
    from rendercanvas.offscreen import RenderCanvas

    from engine.hosts.canvas import CanvasHost

    canvas = RenderCanvas(size=SIZE)
    host = CanvasHost(canvas, build, device=device, continuous=False)
    try:
        for _ in range(FRAMES):
            image = np.asarray(canvas.draw())
        assert host.frame == FRAMES
        _assert_engine_picture(image, reference)
        assert host.last_record is not None and host.last_record["frame"] == FRAMES - 1
        # The host follows the canvas's size: the next frame is drawn at the new one.
        canvas.set_physical_size(96, 64)
        resized = np.asarray(canvas.draw())
        assert resized.shape == (64, 96, 4)
        assert host.frames is not None and host.frames.size == (96, 64)
    finally:
        assert host.close() is None  # the caller's device stays open
        canvas.close()
    assert host.close() is None  # twice is fine


@needs_rendercanvas
def test_canvas_host_with_its_own_device_releases_everything(device, build):
    """By default the host makes (and at close shuts down) a headless device of its own, and
    leaves the thread's current GL context (here the test session's device) as it found it."""
    from rendercanvas.offscreen import RenderCanvas

    from engine.gl.hosts import save_current
    from engine.hosts.canvas import CanvasHost

    before = save_current()
    assert before.api == "egl"  # the session device's context
    canvas = RenderCanvas(size=(64, 48))
    host = CanvasHost(canvas, build, continuous=False)
    assert host.device is not device and save_current() == before
    image = np.asarray(canvas.draw())
    assert save_current() == before
    assert image.shape == (48, 64, 4) and len(np.unique(image.reshape(-1, 4), axis=0)) > 10
    assert host.device.ledger.total > 0  # targets and the scene's texture are ledgered
    assert host.close() == 0  # nothing alive when the device shut down
    assert host.device.closed and host.device.ledger.total == 0
    canvas.close()
    assert save_current() == before
    tex = device.texture((4, 4), 4, bytes(64), label="still-works")  # the session's context
    device.release(tex)


@pytest.mark.slow
@needs_rendercanvas
@needs_rfb
def test_jupyter_remote_frame_buffer_sends_the_engine_picture(device, build, reference):
    from rendercanvas.jupyter import RenderCanvas

    from engine.hosts.canvas import CanvasHost

    canvas = RenderCanvas()  # an ipywidget; without a kernel its comm goes nowhere
    sent: list[tuple[dict, list]] = []
    canvas.send = lambda msg, buffers=None: sent.append((msg, list(buffers or [])))
    canvas.quality = 100  # lossless: jupyter_rfb then sends PNG instead of JPEG
    # The browser reports the cell's size, then asks for frames as it is ready for them.
    canvas.handle_event({"event_type": "resize", "width": SIZE[0], "height": SIZE[1],
                         "pixel_ratio": 1.0})
    host = CanvasHost(canvas, build, device=device, continuous=False)
    try:
        for _ in range(FRAMES):
            assert canvas.get_frame() is None  # rendercanvas sends it itself
        assert host.frame == FRAMES
        frames = [(m, b) for m, b in sent if m.get("type") == "framebufferdata"]
        assert [m["index"] for m, _ in frames] == list(range(1, FRAMES + 1))
        msg, buffers = frames[-1]
        assert msg["mimetype"] == "image/png" and len(buffers) == 1
        decoded = np.asarray(Image.open(io.BytesIO(bytes(buffers[0]))).convert("RGBA"))
        _assert_engine_picture(decoded, reference)
    finally:
        host.close()
        canvas.close()


@needs_rendercanvas
@needs_rfb
def test_a_notebook_canvas_draws_its_first_frame_without_a_browser(device, build):
    """As under nbclient (no browser: no resize event, no request for frames), the host
    draws its first frame at once, at the size the canvas was made with, so the saved
    notebook's snapshot is the picture, not the (1, 1) placeholder."""
    from rendercanvas.jupyter import RenderCanvas

    from engine.hosts.canvas import CanvasHost

    canvas = RenderCanvas(size=SIZE)
    canvas.send = lambda msg, buffers=None: None  # without a kernel its comm goes nowhere
    host = CanvasHost(canvas, build, device=device, continuous=False)
    try:
        assert host.frame == 1 and host.size == SIZE
        shot = np.asarray(canvas.snapshot().data)
        assert shot.shape[:2] == SIZE[::-1] and shot.std() > 10
    finally:
        host.close()
        canvas.close()


def _run_example(args: list[str], env_extra: dict[str, str], tmp_path) -> dict:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, **env_extra, "ENGINE_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "examples/embed_canvas.py", *args], cwd=root,
                          env=env, capture_output=True, text=True, timeout=180)
    if "Could not load the Qt platform plugin" in proc.stderr:
        pytest.skip("Qt's xcb platform plugin cannot load here (missing libxcb-* packages)")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])


@pytest.mark.slow
@needs_rendercanvas
def test_example_offscreen(tmp_path):
    png = tmp_path / "canvas.png"
    out = _run_example(["--backend", "offscreen", "--frames", "3", "--size", "96", "64",
                        "--save", str(png)], {}, tmp_path)
    assert out == {"backend": "offscreen", "frames": 3, "size": [96, 64], "left": 0}
    saved = np.asarray(Image.open(png))
    assert saved.shape == (64, 96, 3) and len(np.unique(saved.reshape(-1, 3), axis=0)) > 10


@pytest.mark.slow
@needs_rendercanvas
@pytest.mark.window
@pytest.mark.skipif(importlib.util.find_spec("PySide6") is None, reason="PySide6 not installed")
def test_example_qt_canvas_window(xvfb_display, tmp_path):
    """The same host in a real Qt window (rendercanvas's PySide6 canvas, bitmap present)."""
    out = _run_example(["--backend", "qt", "--frames", "3", "--size", "96", "64"],
                       {"DISPLAY": xvfb_display, "QT_QPA_PLATFORM": "xcb"}, tmp_path)
    assert out["backend"] == "qt" and out["frames"] >= 3 and out["left"] == 0
    assert out["size"] == [96, 64]
