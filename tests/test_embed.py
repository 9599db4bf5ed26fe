"""The embedding examples run for a few frames and exit cleanly (0 = nothing leaked).

Window examples need an X display: an existing DISPLAY, else an Xvfb this module starts on
a free display number, else they skip."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
XVFB = "/usr/bin/Xvfb"


@pytest.fixture(scope="module")
def display():
    if os.environ.get("DISPLAY"):
        yield os.environ["DISPLAY"]
        return
    if not Path(XVFB).exists():
        pytest.skip("no DISPLAY and no Xvfb")
    for n in range(90, 120):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            break
    else:
        pytest.skip("no free X display number")
    proc = subprocess.Popen([XVFB, f":{n}", "-screen", "0", "800x600x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not Path(f"/tmp/.X11-unix/X{n}").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.skip("Xvfb did not start")
        time.sleep(0.05)
    yield f":{n}"
    proc.terminate()
    proc.wait(5)


def _run(args: list[str], env_extra: dict[str, str], tmp_path: Path) -> None:
    env = {**os.environ, **env_extra, "ENGINE_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


def test_embed_glfw(display, tmp_path):
    _run(["examples/embed_glfw.py", "--frames", "5"], {"DISPLAY": display}, tmp_path)


needs_mglw = pytest.mark.skipif(importlib.util.find_spec("moderngl_window") is None,
                                reason="moderngl-window not installed")


@needs_mglw
def test_embed_moderngl_window_glfw(display, tmp_path):
    _run(["examples/embed_moderngl_window.py", "--frames", "5", "--window", "glfw"],
         {"DISPLAY": display}, tmp_path)


@needs_mglw
def test_embed_moderngl_window_headless_egl(tmp_path):
    _run(["examples/embed_moderngl_window.py", "--frames", "5", "--window", "headless",
          "--backend", "egl"], {}, tmp_path)


