"""Where a page cache's packed small levels live: cells of a few size classes, gathered in
whole slots at the start of the cache.

Why a class of its own: the system decides what is resident; this says where the small
levels go and how many slots they take. Each texture's coarsest level is pinned in a cell
(the fallback every lookup reaches); its other small levels stream into the cells after the
pinned ones of their class, under a policy per class that the system owns. Pure
bookkeeping, no GL: the provider's floor and the system's sizing both ask it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...formats import PixelFormat
from ...memory.split import MIN_STREAM_SLOTS
from .sizing import room_for
from .tiles import TAIL_CLASS_SHIFT, TAIL_CLASSES, tails_per_slot


def _per_class() -> list[int]:
    return [0] * TAIL_CLASSES


@dataclass
class PackedCells:
    """The packed levels of one page cache (one pixel format: None until the first
    texture names it, when nothing is packed yet)."""

    fmt: PixelFormat | None = None
    #: Pinned coarsest levels: key -> class << TAIL_CLASS_SHIFT | cell.
    pinned: dict[int, int] = field(default_factory=dict)
    pinned_count: list[int] = field(default_factory=_per_class)  # pinned cells a class
    streamed_count: list[int] = field(default_factory=_per_class)  # levels that stream
    bases: list[int] = field(default_factory=_per_class)  # first cache slot of each class
    slots: int = 0  # cache slots all classes take: policy slot i is cache slot i + this
    capacity: list[int] = field(default_factory=_per_class)  # cells each class's slots hold

    def per_slot(self, k: int) -> int:
        assert self.fmt is not None
        return tails_per_slot(self.fmt, k)

    def pin(self, key: int, k: int) -> None:
        """A texture's coarsest level, of size class `k`, takes the class's next cell."""
        self.pinned[key] = (k << TAIL_CLASS_SHIFT) | self.pinned_count[k]
        self.pinned_count[k] += 1

    def stream(self, k: int) -> bool:
        """A small level of class `k` streams into the class's cells; whether it is the
        class's first (its cells need a slot of their own)."""
        self.streamed_count[k] += 1
        return self.streamed_count[k] == 1

    def fewest_slots(self) -> int:
        """The fewest slots the packed levels run with: their pinned cells and one slot of
        cells for each size class that streams."""
        if self.fmt is None:
            return 0
        return sum(-(-n // self.per_slot(k)) + (self.streamed_count[k] > 0)
                   for k, n in enumerate(self.pinned_count))

    def class_slots(self, total: int, visible: list[int], asked: list[int],
                    whole_pinned: int) -> list[int]:
        """Slots each size class takes in a cache of `total` slots: its pinned cells, and
        for the cells that stream what the newest feedback shows of them (`visible`, of
        `asked` per class) with headroom (at least one slot, at most what all its levels
        fill), cut to what `total` leaves beside `whole_pinned` slots and a few to stream."""
        if self.fmt is None:
            return [0] * TAIL_CLASSES
        per = [self.per_slot(k) for k in range(TAIL_CLASSES)]
        out = [-(-n // per[k]) for k, n in enumerate(self.pinned_count)]
        extra = [0] * TAIL_CLASSES
        for k in range(TAIL_CLASSES):
            if self.streamed_count[k]:
                levels = self.pinned_count[k] + self.streamed_count[k]
                most = -(-levels // per[k]) - out[k]
                out[k] += 1
                need = room_for(visible[k], asked[k])
                extra[k] = max(0, min(most, -(-need // per[k])) - 1)
        room = total - sum(out) - whole_pinned - MIN_STREAM_SLOTS
        scale = min(1.0, max(0, room) / sum(extra)) if sum(extra) > 0 else 0.0
        return [n + max(0, int(e * scale)) for n, e in zip(out, extra, strict=True)]

    def place(self, class_slots: list[int]) -> None:
        """Lay the classes out from slot 0, each taking `class_slots[k]` slots."""
        self.bases = [0] * TAIL_CLASSES
        for k, n in enumerate(class_slots[:-1]):
            self.bases[k + 1] = self.bases[k] + n
        self.slots = sum(class_slots)
        self.capacity = [n * self.per_slot(k) for k, n in enumerate(class_slots)]

    def held(self) -> list[int]:
        """Slots each class takes now."""
        ends = [*self.bases[1:], self.slots]
        return [e - b for b, e in zip(self.bases, ends, strict=True)]

    def streamed_room(self, k: int, slots: int) -> int:
        """Cells that stream in class `k` when it takes `slots` slots: what is left after
        its pinned cells, at most one a level that streams."""
        return min(self.streamed_count[k], slots * self.per_slot(k) - self.pinned_count[k])

    def fits(self, streamed: list[int]) -> bool:
        """Every class's pinned cells and `streamed[k]` streaming cells fit its slots (a
        registration after the cache was made may add one too many)."""
        return all(n + s <= c for n, s, c in zip(self.pinned_count, streamed, self.capacity,
                                                 strict=True))

    def cell_of(self, code: int) -> tuple[int, int]:
        """(class, cell) of a pinned cell's code."""
        return code >> TAIL_CLASS_SHIFT, code & ((1 << TAIL_CLASS_SHIFT) - 1)
