"""The one contract between the runner (engine.hosts.run) and a host it drives.

Why a contract: the runner owns the frame loop's life (budget, release, leak count,
summary) the same way for every host; a host only says where frames go, which camera
moves, and what ends the run. Hosts whose toolkit owns the frame timing (Qt, canvases)
drive the same loop through engine.hosts.frames instead.
"""
from __future__ import annotations

from typing import Protocol

from ..app.loop import FrameLoop
from ..app.settings import RunSettings
from ..render.scene import Scene


class Host(Protocol):
    """Where frames go and what ends a run: headless or a window."""

    def output_size(self, settings: RunSettings) -> tuple[int, int]: ...

    def attach(self, loop: FrameLoop) -> None:
        """Called once the loop exists, before its first frame (the window's key
        handlers need it)."""
        ...

    def running(self, frame: int) -> bool: ...

    def before_frame(self, loop: FrameLoop) -> bool:
        """Per-frame input handling; False skips drawing this frame (minimised window)."""
        ...

    def camera(self, scene: Scene) -> None: ...

    def after_frame(self, loop: FrameLoop) -> None: ...

    def hud_visible(self) -> bool: ...
