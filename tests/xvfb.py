"""A private X display for window tests: the one in DISPLAY, else an Xvfb started here.

Import the fixture into a test module (`from xvfb import xvfb_display`). It is module-scoped:
starting Xvfb costs about a second, and the window tests of one module can share a display.
"""
from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

XVFB = Path("/usr/bin/Xvfb")


def _free_display() -> int | None:
    """A display number with neither a lock file nor a socket (another server's)."""
    for n in range(90, 200):
        if not Path(f"/tmp/.X{n}-lock").exists() and not Path(f"/tmp/.X11-unix/X{n}").exists():
            return n
    return None


@pytest.fixture(scope="module")
def xvfb_display() -> Iterator[str]:
    """The DISPLAY value to hand to window subprocesses; skips when there is no way to get one."""
    if os.environ.get("DISPLAY"):
        yield os.environ["DISPLAY"]
        return
    if not XVFB.exists():
        pytest.skip("no DISPLAY and no Xvfb")
    n = _free_display()
    if n is None:
        pytest.skip("no free X display number")
    proc = subprocess.Popen([str(XVFB), f":{n}", "-screen", "0", "640x480x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not Path(f"/tmp/.X11-unix/X{n}").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.skip("Xvfb did not start")
            time.sleep(0.05)
        yield f":{n}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
