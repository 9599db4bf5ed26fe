"""The ledger: every live GL allocation the engine made, with its exact byte size.

It is the engine's own answer to "how much VRAM am I using", independent of drivers
(llvmpipe reports nothing; NVIDIA places textures lazily). Categories let the governor split
one budget: `texture.streamed`, `texture.static`, `target`, `buffer`, `other`.
A per-frame history feeds the report and the timeline picture.
"""
from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from enum import StrEnum


class Category(StrEnum):
    """What an allocation is for: the governor splits the one budget by these.

    A StrEnum so reports, JSON and dictionary keys keep the plain strings readers know."""

    STREAMED = "texture.streamed"  # mip levels the streamer holds (the streaming pool)
    STATIC = "texture.static"  # fully resident textures (static provider, fonts, LUTs)
    TARGET = "target"  # render targets the resolution controller sizes
    BUFFER = "buffer"  # vertex, index, uniform and storage buffers
    STAGING = "staging"  # upload staging rings (persistently mapped PBOs)
    OTHER = "other"  # objects that own no memory of their own: programs, VAOs, fences
    USER = "user"  # objects a host made through a tracked moderngl context


CATEGORIES: tuple[Category, ...] = tuple(Category)


@dataclass(frozen=True)
class Allocation:
    """One live GL object as the ledger sees it."""

    id: int
    kind: str  # texture, renderbuffer, buffer, framebuffer, program, vertex_array, sampler
    category: Category
    label: str
    nbytes: int
    glo: int


@dataclass(frozen=True)
class Sample:
    """Ledger totals at the end of one frame."""

    frame: int
    total_bytes: int
    by_category: dict[str, int]
    peak_bytes: int


@dataclass
class Ledger:
    """Thread-safe registry of live allocations with totals, peak and per-frame history."""

    history_limit: int = 100_000
    _items: dict[int, Allocation] = field(default_factory=dict)
    _by_cat: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    _count_by_cat: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    _peak_by_cat: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    _total: int = 0
    _peak: int = 0
    _frame_peak: int = 0
    history: list[Sample] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, category: Category | str, label: str, nbytes: int, glo: int = 0) -> Allocation:
        if nbytes < 0:
            raise ValueError(f"negative allocation size {nbytes} for {label}")
        with self._lock:
            alloc = Allocation(next(self._ids), kind, Category(category), label, int(nbytes), int(glo))
            self._items[alloc.id] = alloc
            self._by_cat[category] += alloc.nbytes
            self._count_by_cat[category] += 1
            self._total += alloc.nbytes
            self._peak = max(self._peak, self._total)
            self._frame_peak = max(self._frame_peak, self._total)
            self._peak_by_cat[category] = max(self._peak_by_cat[category], self._by_cat[category])
            return alloc

    def remove(self, alloc: Allocation | int) -> None:
        aid = alloc if isinstance(alloc, int) else alloc.id
        with self._lock:
            item = self._items.pop(aid, None)
            if item is None:
                return
            self._by_cat[item.category] -= item.nbytes
            self._count_by_cat[item.category] -= 1
            self._total -= item.nbytes

    def __contains__(self, alloc: Allocation | int) -> bool:
        aid = alloc if isinstance(alloc, int) else alloc.id
        return aid in self._items

    @property
    def total(self) -> int:
        return self._total

    @property
    def peak(self) -> int:
        return self._peak

    # Keys are the categories' plain strings (a Category compares and hashes equal to its
    # string), so reports, JSON and printed dictionaries read "target", not Category.TARGET.
    def by_category(self) -> dict[str, int]:
        with self._lock:
            return {str(c): b for c, b in self._by_cat.items() if b or self._count_by_cat[c]}

    def count_by_category(self) -> dict[str, int]:
        with self._lock:
            return {str(c): n for c, n in self._count_by_cat.items() if n}

    def peak_by_category(self) -> dict[str, int]:
        with self._lock:
            return {str(c): b for c, b in self._peak_by_cat.items()}

    def items(self) -> list[Allocation]:
        with self._lock:
            return list(self._items.values())

    def category_total(self, category: str) -> int:
        return self._by_cat.get(category, 0)

    def reset_frame_peak(self) -> None:
        """Start measuring a frame peak from now (a run on a shared device must not inherit
        the peak of whatever ran before it)."""
        with self._lock:
            self._frame_peak = self._total

    def end_frame(self, frame: int) -> Sample:
        """Record a history sample. Its peak is the highest total seen *during* the frame,
        so transient double allocations (a resize, a mip swap) are not hidden by the end state."""
        with self._lock:
            sample = Sample(frame, self._total, {str(c): b for c, b in self._by_cat.items() if b},
                            self._frame_peak)
            self._frame_peak = self._total
            self.history.append(sample)
            if len(self.history) > self.history_limit:
                del self.history[: len(self.history) - self.history_limit]
            return sample
