"""What the commands that run a scene (`engine demo`, `engine view`) share: whether a window
can open, a run in a window that falls back to headless when none can, and the lines they
say about the files it wrote.

One place, so the commands cannot drift apart in how they treat a missing display.
"""
from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..app.loop import FrameHook, RunResult, SceneFactory
from ..errors import ContextError
from .run import progress_hook, run_scene

log = logging.getLogger(__name__)
progress = logging.getLogger("engine.progress")

#: Seconds between "frame N/M" lines while a run renders.
PROGRESS_EVERY_S = 5.0


def x_display_missing(display: str | None) -> bool:
    """True when DISPLAY names a local X server (":N" or "unix:N") whose socket is absent:
    no window can open, so the run goes headless without trying. Other forms (host:N over
    TCP) are left to the window attempt, which fails with ContextError."""
    if not display:
        return False
    host, _, rest = display.rpartition(":")
    if host not in ("", "unix") or not rest:
        return False
    number = rest.split(".")[0]
    return number.isdigit() and not Path(f"/tmp/.X11-unix/X{number}").exists()


def headless_wanted(asked: bool) -> bool:
    """Headless when asked, or when no windowing system is there to open a window on."""
    wayland, display = os.environ.get("WAYLAND_DISPLAY"), os.environ.get("DISPLAY")
    if asked or not (display or wayland):
        return True
    if not wayland and x_display_missing(display):
        log.warning("DISPLAY=%s has no X server behind it: running headless", display)
        return True
    return False


def run_command_scene(scene: SceneFactory, *, frames: int, headless: bool, hud: bool,
                      headless_frames: int, hooks: Sequence[FrameHook] = (),
                      **settings: Any) -> RunResult:
    """Run `scene` (in a window unless `headless`) with a progress line every few seconds
    after `hooks` when headless (a window shows its progress in the HUD, not on stderr). A window that cannot open makes it a headless run of `frames`, or of
    `headless_frames` when `frames` is 0 (until closed); the HUD is always on in a window,
    `hud` says for a headless run. Says where the screenshot and the report went."""
    def attempt(count: int, windowed: bool) -> RunResult:
        progress_hooks = [] if windowed else [progress_hook(count, PROGRESS_EVERY_S)]
        return run_scene(scene, headless=not windowed, hud=windowed or hud, frames=count,
                         on_frame=[*hooks, *progress_hooks], **settings)

    result = None
    if not headless:
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", module="glfw")  # the ContextError says it
                result = attempt(frames, True)
        except ContextError as exc:  # raised making the window, before any work
            log.warning("no window (%s): running headless", exc)
            frames = frames or headless_frames
    if result is None:
        result = attempt(frames, False)
    if result.screenshot is not None:
        progress.info("screenshot written to %s", result.screenshot)
    if result.report is not None:
        progress.info("report written to %s", result.report)
    return result
