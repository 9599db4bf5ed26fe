"""lab.peer_gl, the probes that ask a Qt peer's driver what it holds: in a QOpenGLWidget on
Xvfb, GL objects of known sizes (a two-level RGBA8 texture, an R16F texture, a
depth-stencil renderbuffer, a buffer) raise the census by exactly their bytes, and the
canvas framebuffer is its colour texture and depth-stencil renderbuffer at the widget's
size. Skips without PySide6, PyOpenGL, a display or Qt's xcb plugin."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.window,
    pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("PySide6", "OpenGL")),
                       reason="PySide6 or PyOpenGL not installed (pip install -e '.[test]')"),
]


def test_census_and_framebuffer_count_known_objects(xvfb_display: str) -> None:
    env = {**os.environ, "DISPLAY": xvfb_display, "QT_QPA_PLATFORM": "xcb"}
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "peer_gl_child.py")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    if "Could not load the Qt platform plugin" in proc.stderr:
        pytest.skip("Qt's xcb platform plugin cannot load here (missing libxcb-* packages)")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    got = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    before, after = got["before"], got["after"]
    assert after["textures"] - before["textures"] == 64 * 32 * 4 + 32 * 16 * 4 + 40 * 10 * 2
    assert after["renderbuffers"] - before["renderbuffers"] == 16 * 8 * 4
    assert after["buffers"] - before["buffers"] == 1000
    w, h = (round(v * got["ratio"]) for v in got["size"])
    fb = got["framebuffer"]
    assert [(a["size"], a["format"]) for a in fb["attachments"]] == [
        ([w, h], hex(0x8058)), ([w, h], hex(0x88F0))]  # RGBA8 colour, DEPTH24_STENCIL8
    assert fb["bytes"] == w * h * 8
    # the census holds the canvas's own framebuffer too
    assert before["textures"] >= w * h * 4 and before["renderbuffers"] >= w * h * 4
