"""The Qt embedding: examples/embed_qt.py runs a PySide6 QOpenGLWidget under Xvfb, the engine
adopts Qt's context and draws into the widget's framebuffer; the test grabs that framebuffer
and holds it to a headless render of the same scene, again after resizing the widget (Qt
re-creates its FBO; the next frame is rendered at the new size), and checks nothing leaked.

The window runs in a subprocess (a window context must not become current in the test
process, which shares one headless device). Skips without PySide6, without a display or
Xvfb, or when Qt's xcb platform plugin cannot load (Debian: libxcb-cursor0, libxcb-icccm4,
libxcb-keysyms1)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine.render.imagecompare import compare
from engine.testing import run_headless

ROOT = Path(__file__).resolve().parents[1]
SIZE = (160, 120)
RESIZED = (200, 100)
FRAMES = 5

pytestmark = [
    pytest.mark.slow,
    pytest.mark.window,
    pytest.mark.skipif(importlib.util.find_spec("PySide6") is None,
                       reason="PySide6 not installed (pip install -e '.[qt]')"),
]


def _run_qt(display: str, tmp_path: Path) -> tuple[dict, Path]:
    grab = tmp_path / "qt_grab.png"
    env = {**os.environ, "DISPLAY": display, "ENGINE_CACHE": str(tmp_path / "cache"),
           "QT_QPA_PLATFORM": "xcb"}
    proc = subprocess.run([sys.executable, "examples/embed_qt.py", "--frames", str(FRAMES),
                           "--size", *map(str, SIZE), "--grab", str(grab),
                           "--resize", *map(str, RESIZED)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    if "Could not load the Qt platform plugin" in proc.stderr:
        pytest.skip("Qt's xcb platform plugin cannot load here (missing libxcb-* packages)")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1]
    return json.loads(line), grab


def _engine_picture(path: Path, size: tuple[int, int]) -> np.ndarray:
    shown = np.asarray(Image.open(path).convert("RGB"))
    assert shown.shape == (size[1], size[0], 3)
    # Not blank: the textured box covers part of the frame, the clear colour the rest.
    colours = len(np.unique(shown.reshape(-1, 3), axis=0))
    assert colours > 50, f"only {colours} colours in the widget's framebuffer"
    return shown


def test_qt_widget_shows_the_engine_picture_and_leaks_nothing(xvfb_display, tmp_path, device):
    from engine.demos.gltf_demo import build

    result, grab = _run_qt(xvfb_display, tmp_path)
    assert result["platform"] == "xcb" and result["error"] is None
    # FRAMES frames, then one more when the widget was resized
    assert result["frames"] == FRAMES + 1 and result["output_size"] == list(RESIZED)
    assert result["left"] == 0, "GL objects alive when the widget closed"
    assert result["ledger_bytes_after"] == 0
    assert result["grab_saved"] and result["grab_size"] == list(SIZE)

    assert result["resized_saved"] and result["resized_size"] == list(RESIZED)

    for path, size, frames in ((grab, SIZE, FRAMES),
                               (grab.with_name(grab.stem + ".resized.png"), RESIZED,
                                FRAMES + 1)):
        shown = _engine_picture(path, size)
        ref = run_headless(build, frames=frames, size=size, budget="256MiB", device=device)
        assert ref.summary["leaked_objects"] == 0
        verdict = compare(shown, ref.image, 5, 0.001)
        assert verdict.ok, f"Qt widget at {size} vs headless render of frame {frames - 1}: " \
                           f"{verdict}"
