"""Where each image sits on the wall: pure geometry, in world units, no GL.

`justified_rows` is the photo-wall layout (Flickr's, Google Photos'): images keep their
aspect ratio, rows share one height, and each row is scaled to the wall's width, so nothing
is cropped or letterboxed. The wall's width is chosen from the images' total aspect so the
whole wall comes out about as wide as a 16:9 screen. `grid` places one image per cell of
equal cells in the given order (`--order given` with `--layout grid`), each fitted inside
its cell. Rectangles are (x0, y0, x1, y1) with y up and the wall centred on the origin;
row 0 is at the top.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: Gap between images, as a fraction of the row height.
GAP = 0.04
SCREEN_ASPECT = 16 / 9


@dataclass(frozen=True)
class Rect:
    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def height(self) -> float:
        return self.y1 - self.y0

    @property
    def center(self) -> tuple[float, float]:
        return ((self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2)

    def contains(self, x: float, y: float) -> bool:
        return self.x0 <= x <= self.x1 and self.y0 <= y <= self.y1


def _centre(rects: list[Rect]) -> list[Rect]:
    if not rects:
        return rects
    x0 = min(r.x0 for r in rects)
    x1 = max(r.x1 for r in rects)
    y0 = min(r.y0 for r in rects)
    y1 = max(r.y1 for r in rects)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    return [Rect(r.x0 - cx, r.y0 - cy, r.x1 - cx, r.y1 - cy) for r in rects]


def justified_rows(aspects: Sequence[float], screen_aspect: float = SCREEN_ASPECT
                   ) -> list[Rect]:
    """One rectangle per aspect ratio (width / height), in order, rows of height about 1."""
    if not aspects:
        return []
    total = sum(aspects) * (1 + GAP)
    # rows r and width W with W = total / r and W / r ~ screen aspect (rows of height 1)
    rows = max(1, round(math.sqrt(total / screen_aspect)))
    width = max(max(aspects), total / rows)
    rects: list[Rect] = []
    row: list[float] = []
    y = 0.0

    def close(items: list[float], last: bool) -> None:
        nonlocal y
        natural = sum(items) + GAP * (len(items) - 1)
        scale = width / natural if not last or natural > width else 1.0
        h = scale
        x = 0.0
        for a in items:
            rects.append(Rect(x, y - h, x + a * h, y))
            x += a * h + GAP * h
        y -= h + GAP

    for a in aspects:
        row.append(a)
        if sum(row) + GAP * (len(row) - 1) >= width:
            close(row, last=False)
            row = []
    if row:
        close(row, last=True)
    return _centre(rects)


def grid(aspects: Sequence[float], screen_aspect: float = SCREEN_ASPECT) -> list[Rect]:
    """Equal square cells, columns chosen for the screen's aspect; each image fitted inside."""
    n = len(aspects)
    if not n:
        return []
    cols = max(1, math.ceil(math.sqrt(n * screen_aspect)))
    cell = 1.0 + GAP
    rects = []
    for i, a in enumerate(aspects):
        c, r = i % cols, i // cols
        w, h = (1.0, 1.0 / a) if a >= 1 else (a, 1.0)
        cx, cy = c * cell + 0.5, -(r * cell + 0.5)
        rects.append(Rect(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
    return _centre(rects)


def bounds(rects: Sequence[Rect]) -> Rect:
    return Rect(min(r.x0 for r in rects), min(r.y0 for r in rects),
                max(r.x1 for r in rects), max(r.y1 for r in rects))


def chunk_grid(width: int, height: int, chunk: int) -> list[tuple[int, int, int, int]]:
    """Pixel boxes (x0, y0, x1, y1) of the chunk textures an image of width x height is cut
    into: row-major from the top-left, each at most `chunk` on a side, edge to edge."""
    boxes = []
    for y0 in range(0, height, chunk):
        for x0 in range(0, width, chunk):
            boxes.append((x0, y0, min(width, x0 + chunk), min(height, y0 + chunk)))
    return boxes
