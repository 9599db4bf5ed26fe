"""What the viewer keys, the wheel and a drag do to a `ScienceView` (pure: no GL, no window).

The same names and meanings as the photo wall's browser (engine.view.browse) where they
apply to one image: Home or f fits the image, q or Escape quits, the wheel zooms at the
cursor by the wall navigator's step, a left drag moves the picture with the pointer. An
image has no neighbours to step to, so the arrows pan instead.
"""
from __future__ import annotations

from typing import Protocol

#: the wheel's zoom per step: the photo wall navigator's
ZOOM_STEP = 1.2
#: an arrow key pans this fraction of the screen
PAN_FRACTION = 0.2
ARROWS = {"left": (1, 0), "right": (-1, 0), "up": (0, 1), "down": (0, -1)}
FIT = ("home", "f")
QUIT = ("q", "escape")


class Camera(Protocol):
    """The part of a ScienceView the controls move."""

    size: tuple[int, int]

    def fit(self) -> None: ...

    def zoom(self, factor: float, at: tuple[float, float] | None = None) -> None: ...

    def pan(self, dx: float, dy: float) -> None: ...


class ScienceControls:
    """Keys by name (a window's, a widget's), wheel steps and drags in screen pixels."""

    def __init__(self, view: Camera) -> None:
        self.view = view

    def key(self, name: str) -> str | None:
        """"quit", "handled", or None (not a viewer key)."""
        if name in QUIT:
            return "quit"
        if name in FIT:
            self.view.fit()
            return "handled"
        if name in ARROWS:
            sx, sy = ARROWS[name]
            w, h = self.view.size
            self.view.pan(sx * w * PAN_FRACTION, sy * h * PAN_FRACTION)
            return "handled"
        return None

    def wheel(self, steps: float, at: tuple[float, float]) -> None:
        """Zoom in by `steps` wheel steps (negative: out) keeping screen point `at` put."""
        self.view.zoom(ZOOM_STEP ** steps, at)

    def drag(self, dx: float, dy: float) -> None:
        """The pointer moved (dx, dy) screen pixels with the button held."""
        self.view.pan(dx, dy)
