"""Mouse navigation of a flat wall seen by a perspective camera looking down -Z: plain state
(centre x, y and the camera's distance), so it is testable without a window.

The window host (engine/hosts/window.py) drives it as the scene's `navigator`: the wheel
zooms at the cursor (the world point under it stays put, as map viewers do), a left drag
moves the wall with the cursor. Programmatic moves (`fit`, `one_to_one`) are the API's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from pyglm import glm

from ..render.camera import Camera
from .layout import Rect
from .priority import ViewRect

FOVY_DEG = 40.0
#: Closest and farthest camera distance, as multiples of the fitted distance: deep enough
#: for one texel of a 65536-pixel image to cover many screen pixels.
NEAREST = 1e-6
FARTHEST = 8.0


@dataclass
class Navigator:
    x: float
    y: float
    distance: float
    fovy_deg: float = FOVY_DEG
    aspect: float = 16 / 9
    pixels_high: int = 720
    home: float = 1.0  # the distance that fits everything: bounds the zoom
    #: the rectangle fitted last, refitted when the output changes shape, until the user moves
    fitted: tuple[Rect, float] | None = None
    #: everything (the wall): `home` is the distance that fits it at the current aspect
    everything: Rect | None = None

    @classmethod
    def fitting(cls, rect: Rect) -> Navigator:
        """Fitted to all of `rect`: `home` is set from the rectangle before the fit, which
        it bounds (a home left at its default clamped a wide wall's first fit to 8 units:
        a cropped middle)."""
        nav = cls(0.0, 0.0, 1.0, everything=rect)
        nav.home = nav._fit_distance(rect)
        nav.fit(rect)
        return nav

    def _half_h(self, distance: float | None = None) -> float:
        return (self.distance if distance is None else distance) * \
            math.tan(math.radians(self.fovy_deg) / 2)

    def _clamp(self, d: float) -> float:
        return min(self.home * FARTHEST, max(self.home * NEAREST, d))

    def _fit_distance(self, rect: Rect, margin: float = 1.05) -> float:
        height = max(rect.height, rect.width / self.aspect) * margin
        return height / (2 * math.tan(math.radians(self.fovy_deg) / 2))

    def fit(self, rect: Rect, margin: float = 1.05) -> None:
        """Show all of `rect`, centred, with `margin` around it."""
        self.x, self.y = rect.center
        self.distance = self._clamp(self._fit_distance(rect, margin))
        self.fitted = (rect, margin)

    def one_to_one(self, rect: Rect, image_pixels_high: int) -> None:
        """Centre `rect` at one of its image's pixels per screen pixel."""
        world_per_pixel = rect.height / image_pixels_high
        self.x, self.y = rect.center
        self.distance = self._clamp(world_per_pixel * self.pixels_high / 2 /
                                    math.tan(math.radians(self.fovy_deg) / 2))
        self.fitted = None

    def resize(self, width: int, height: int) -> None:
        if width <= 0 or height <= 0:
            return
        changed = (width / height, int(height)) != (self.aspect, self.pixels_high)
        self.aspect, self.pixels_high = width / height, int(height)
        if changed and self.everything is not None:  # a narrower output needs a farther home
            self.home = self._fit_distance(self.everything)
        if changed and self.fitted is not None:
            self.fit(*self.fitted)

    def world_at(self, ndc: tuple[float, float]) -> tuple[float, float]:
        h = self._half_h()
        return self.x + ndc[0] * h * self.aspect, self.y + ndc[1] * h

    def zoom(self, steps: float, cursor_ndc: tuple[float, float] = (0.0, 0.0),
             factor: float = 1.2) -> None:
        """Zoom in by `factor` per wheel step (negative steps zoom out) about the cursor."""
        wx, wy = self.world_at(cursor_ndc)
        new = self._clamp(self.distance / factor ** steps)
        keep = new / self.distance
        self.x = wx - (wx - self.x) * keep
        self.y = wy - (wy - self.y) * keep
        self.distance = new
        self.fitted = None

    def drag(self, dx_px: float, dy_px: float) -> None:
        """Move the wall with the cursor (screen y grows downwards)."""
        s = 2 * self._half_h() / max(1, self.pixels_high)
        self.x -= dx_px * s
        self.y += dy_px * s
        self.fitted = None

    def follow(self, camera: Camera) -> None:
        """The window takes over from wherever the camera is: it already is ours."""

    def view_rect(self) -> ViewRect:
        return ViewRect.of(self.x, self.y, self.distance, self.fovy_deg, self.aspect,
                           self.pixels_high)

    def apply(self, camera: Camera) -> None:
        camera.position = glm.vec3(self.x, self.y, self.distance)
        camera.target = glm.vec3(self.x, self.y, 0.0)
        camera.up = glm.vec3(0.0, 1.0, 0.0)
        camera.fovy_deg = self.fovy_deg
        camera.near = self.distance * 0.5
        camera.far = self.distance * 2.0
