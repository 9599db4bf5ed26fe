"""`python -m engine demo ...` end to end, headless and (under Xvfb) in a window.

Each run is a subprocess: a demo makes its own GL context, which must not become current in
the test process where the session's shared device lives."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _demo(args: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", "demo", *args], check=False, cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def demo_env(tmp_path_factory) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["ENGINE_CACHE"] = str(tmp_path_factory.mktemp("engine-cache"))
    env["PYTHONPATH"] = str(ROOT)
    return env


SMALL = ["--count", "4", "--texture-size", "64", "--size", "96x64"]


@pytest.mark.slow
def test_demo_gallery_headless_report(demo_env, tmp_path):
    report, shot = tmp_path / "r.json", tmp_path / "s.png"
    proc = _demo(["gallery", "--frames", "4", *SMALL, "--report", str(report),
                  "--screenshot", str(shot)], demo_env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(report.read_text())
    assert data["summary"]["frames"] == 4 and data["summary"]["leaked_objects"] == 0
    assert shot.stat().st_size > 0


@pytest.mark.slow
def test_demo_stress_mode_keeps_budget_and_leaks_nothing(demo_env, tmp_path):
    """--stress: slow reads (2-40 ms each) and random budget steps, the streamer still keeps
    every frame within its budget and releases everything."""
    report = tmp_path / "stress.json"
    proc = _demo(["gallery", "--stress", "--frames", "90", *SMALL, "--report", str(report)],
                 demo_env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(report.read_text())
    frames = data["frames"]
    assert data["summary"]["leaked_objects"] == 0
    assert len({f["budget_bytes"] for f in frames}) > 1  # the budget really moved
    assert all(f["total_bytes"] <= f["budget_bytes"] for f in frames)


@pytest.mark.slow
def test_demo_unknown_name(demo_env):
    proc = _demo(["nope", "--headless"], demo_env)
    assert proc.returncode == 2 and "gallery" in proc.stderr


@pytest.mark.slow
@pytest.mark.window
def test_demo_in_a_window_takes_a_screenshot(demo_env, xvfb_display, tmp_path):
    from PIL import Image

    env = {**demo_env, "DISPLAY": xvfb_display}
    shot, report = tmp_path / "w.png", tmp_path / "w.json"
    proc = _demo(["gallery", "--frames", "5", *SMALL, "--screenshot", str(shot),
                  "--report", str(report)], env)
    assert proc.returncode == 0, proc.stderr
    image = np.asarray(Image.open(shot))
    assert image.shape[:2] == (64, 96) and image.std() > 5  # a picture, not a cleared screen
    assert json.loads(report.read_text())["summary"]["leaked_objects"] == 0
