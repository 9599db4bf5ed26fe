"""Which full-detail chunk to encode next: pure numbers from the camera and the layout.

The screen asks first: chunks on screen before those off it; among those on screen, the ones
drawn largest (most screen pixels per chunk, so the most visible blur) first; off screen,
the nearest to the view first, so a pan finds its neighbours done.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .layout import Rect


@dataclass(frozen=True)
class ViewRect:
    """The world rectangle the camera shows and the output height in pixels."""

    x0: float
    y0: float
    x1: float
    y1: float
    pixels_high: int

    @classmethod
    def of(cls, x: float, y: float, distance: float, fovy_deg: float, aspect: float,
           pixels_high: int) -> ViewRect:
        half_h = distance * math.tan(math.radians(fovy_deg) / 2)
        half_w = half_h * aspect
        return cls(x - half_w, y - half_h, x + half_w, y + half_h, pixels_high)

    def overlaps(self, r: Rect) -> bool:
        return r.x0 < self.x1 and r.x1 > self.x0 and r.y0 < self.y1 and r.y1 > self.y0

    def pixels_per_world(self) -> float:
        return self.pixels_high / max(self.y1 - self.y0, 1e-12)


def detail_order(rects: Sequence[Rect], view: ViewRect) -> list[int]:
    """Indices of `rects` in the order their detail should be made (module docstring)."""
    cx, cy = (view.x0 + view.x1) / 2, (view.y0 + view.y1) / 2

    def key(i: int) -> tuple[int, float]:
        r = rects[i]
        if view.overlaps(r):
            return (0, -r.height * view.pixels_per_world())
        rx, ry = r.center
        return (1, math.hypot(rx - cx, ry - cy))

    return sorted(range(len(rects)), key=key)
