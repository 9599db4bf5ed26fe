"""How many slots the page cache holds: what the screen needs, not what the allowance allows.

The governor's allowance is a ceiling. Below it the cache follows the newest feedback: the
tiles the screen shows (each visible tile and the coarser one trilinear blends with) times a
small headroom for the tiles a moving view brings next, or every tile it wants (the visible
ones and the ancestors they fall back to) where that is more, plus the slots of pinned tiles, rounded up to whole slabs. It grows at once (a screen that
shows more must not wait) and shrinks only after the need stayed a slab or more lower for a
while (a resize costs a copy of every kept tile; a view that wobbles must not pay it each
frame). Before any feedback, the screen's own tile count stands in for the visible tiles.
Pure: numbers in, a slot count out (engine/streaming/virtual/system.py applies it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...memory.split import MIN_STREAM_SLOTS

#: Slots the cache grows and shrinks by (DirectX sampler-feedback streaming grows its heap
#: in 64 KiB tiles; a BC7 slot is 18 KiB, so a slab of 8 is ~144 KiB).
SLAB_SLOTS = 8
#: Cache slots per visible tile: the visible tiles, their ancestors (a third as many again
#: at most) and room for what a moving view asks next.
HEADROOM = 1.25
#: Frames the need must stay a slab or more below the cache before it shrinks.
SHRINK_FRAMES = 60


def screen_tiles(width: int, height: int, tile: int) -> int:
    """Visible tiles a screen of `width` x `height` asks for before any feedback says: its
    area in tiles at the level a pixel reads (one to two texels a pixel a side, about twice
    the area) plus the coarser level trilinear blends with."""
    area = -(-int(width) // tile) * -(-int(height) // tile)
    return 2 * area + -(-area // 2)


def room_for(visible: int, asked: int) -> int:
    """Slots for `visible` visible tiles among `asked` wanted ones (their ancestors too):
    every wanted tile, and at least the headroom over the visible ones."""
    return max(math.ceil(max(0, visible) * HEADROOM), int(asked))


def wanted_slots(fixed: int, visible: int, most: int, asked: int = 0) -> int:
    """The cache for `visible` visible whole-slot tiles (of `asked` wanted: `room_for`)
    beside `fixed` slots of pinned and packed tiles, in whole slabs, at most `most` (the
    allowance's slots), at least the floor (`fixed` and MIN_STREAM_SLOTS to stream)."""
    floor = fixed + MIN_STREAM_SLOTS
    want = fixed + room_for(visible, asked)
    want = -(-want // SLAB_SLOTS) * SLAB_SLOTS
    return max(min(floor, most), min(max(want, floor), most))


@dataclass
class ElasticSize:
    """The resize decision, frame by frame: grow now, shrink once the lower need held."""

    low_since: int | None = None

    def decide(self, frame: int, current: int, wanted: int, most: int) -> int:
        """The slot count to hold from `frame` on (`current` when nothing changes)."""
        if current > most or wanted > current:  # the allowance fell, or the screen needs more
            self.low_since = None
            return wanted
        if current - wanted < SLAB_SLOTS:
            self.low_since = None
            return current
        if self.low_since is None:
            self.low_since = frame
        if frame - self.low_since >= SHRINK_FRAMES:
            self.low_since = None
            return wanted
        return current
