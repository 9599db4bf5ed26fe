"""The headless host: frames into the renderer's offscreen output, read back at the end.

What CI, tests and batch renders use: no display, no input, a run that ends after a fixed
number of frames (or once the picture settles).
"""
from __future__ import annotations

from ..app.loop import FrameLoop
from ..app.settings import RunSettings
from ..render.scene import Scene


class HeadlessHost:
    """A fixed number of frames into the renderer's offscreen output, and up to
    `settle_frames` more while the last one's record does not say `settled`."""

    def __init__(self, frames: int, settle_frames: int = 0) -> None:
        self.frames, self.settle_frames = frames, settle_frames
        self._settled = False

    def output_size(self, settings: RunSettings) -> tuple[int, int]:
        return settings.size

    def attach(self, loop: FrameLoop) -> None:
        """No input to wire."""

    def running(self, frame: int) -> bool:
        return frame < self.frames or (frame < self.frames + self.settle_frames
                                       and not self._settled)

    def before_frame(self, loop: FrameLoop) -> bool:
        return True

    def camera(self, scene: Scene) -> None:
        """The scripted camera runs unchanged."""

    def after_frame(self, loop: FrameLoop) -> None:
        """Nothing to present (the output is read back once, at the end); whether the
        frame settled the picture."""
        self._settled = bool(loop.frames and loop.frames[-1].get("settled"))

    def hud_visible(self) -> bool:
        return True
