"""Environments for the tests that run the engine in a child process."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def headless_env(tmp_path: Path) -> dict[str, str]:
    """This process's environment without a display (the child renders headless through
    EGL), with its own texture cache under `tmp_path` and the checkout importable."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["ENGINE_CACHE"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = str(ROOT)
    return env
