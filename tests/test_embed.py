"""The embedding examples run for a few frames and exit cleanly (0 = nothing leaked).

Window examples need an X display: an existing DISPLAY, else the Xvfb conftest starts on
a free display number, else they skip."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], env_extra: dict[str, str], tmp_path: Path) -> None:
    env = {**os.environ, **env_extra, "ENGINE_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


@pytest.mark.slow
def test_embed_glfw(xvfb_display, tmp_path):
    _run(["examples/embed_glfw.py", "--frames", "5"], {"DISPLAY": xvfb_display}, tmp_path)


needs_mglw = pytest.mark.skipif(importlib.util.find_spec("moderngl_window") is None,
                                reason="moderngl-window not installed")


@pytest.mark.slow
@needs_mglw
def test_embed_moderngl_window_glfw(xvfb_display, tmp_path):
    _run(["examples/embed_moderngl_window.py", "--frames", "5", "--window", "glfw"],
         {"DISPLAY": xvfb_display}, tmp_path)


@pytest.mark.slow
@needs_mglw
def test_embed_moderngl_window_headless_egl(tmp_path):
    _run(["examples/embed_moderngl_window.py", "--frames", "5", "--window", "headless",
          "--backend", "egl"], {}, tmp_path)


