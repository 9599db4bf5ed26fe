"""What the background workers make next: pure numbers from the camera and the layout.

The queue holds each image's first pictures (its embedded EXIF thumbnail, then its own
thumbnail: what replaces its placeholder) and its full-detail chunks. The screen asks
first: what is on screen before what is off it. On screen, first pictures before detail,
embedded before thumbnails, in reading order (rows top to bottom, each left to right, as a
page of a browser fills), then the chunks drawn largest (most screen pixels per chunk, so
the most visible blur) first. Off screen, first pictures before detail, each the nearest
to the view first, so a pan finds its neighbours done. The order is asked again every
frame, so it follows the view as it moves.
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


#: Chunk numbers that stand for an image's first pictures in the queue, in the order they
#: come: its embedded EXIF thumbnail, then its own thumbnail (chunks are numbered from 0).
EMBEDDED, THUMB = -2, -1


def fill_order(parts: Sequence[int], rects: Sequence[Rect], view: ViewRect) -> list[int]:
    """Indices into `parts` (each a chunk number, or EMBEDDED / THUMB) and their world
    `rects` (an image's whole rectangle for its first pictures), in the order they should
    be made (module docstring)."""
    cx, cy = (view.x0 + view.x1) / 2, (view.y0 + view.y1) / 2

    def key(i: int) -> tuple[int, int, float, float]:
        r, part = rects[i], parts[i]
        tier = part - EMBEDDED if part < 0 else 2  # embedded 0, thumbnail 1, detail 2
        if view.overlaps(r):
            if part < 0:
                return (0, tier, -r.y1, r.x0)
            return (0, tier, -r.height * view.pixels_per_world(), 0.0)
        rx, ry = r.center
        return (1, int(part >= 0), math.hypot(rx - cx, ry - cy), float(tier))

    return sorted(range(len(parts)), key=key)
