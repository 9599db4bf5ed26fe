"""The ledger: every live GL allocation the engine made, with its exact byte size.

It is the engine's own answer to "how much VRAM am I using", independent of drivers
(llvmpipe reports nothing; NVIDIA places textures lazily). Categories let the governor split
one budget: `texture.streamed`, `texture.static`, `target`, `buffer`, `other`.
A per-frame history feeds the report and the timeline picture.

Owners. Several views (frame loops) may draw with one device, and so share its ledger. Each
view is an `Owner` of this ledger; while it works (`with ledger.attributed(owner):`, which the
frame loop puts around its construction, its step and its release) new allocations are
tagged with it, and the figures a view plans with (`total`, `by_category`,
`category_total`, the frame samples and their `history`) are that view's: its own bytes plus
its fair part of the objects nobody owns (made outside any view), split evenly between the
live owners. The views' figures therefore add up to the device's, to the byte, so a governor
per view can plan against its own grant without counting the others' memory. Outside any
scope every figure is the device's; lifetime peaks, object counts and the item list always
are.
"""
from __future__ import annotations

import itertools
import logging
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from enum import StrEnum

log = logging.getLogger(__name__)


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
class Owner:
    """One view drawing with a ledger's device (see "Owners" in the module docstring)."""

    key: int
    label: str
    ledger_id: int


@dataclass(frozen=True)
class Allocation:
    """One live GL object as the ledger sees it. `owner`: the view it was made for, or None
    for an object nobody owns (shared by the device's views)."""

    id: int
    kind: str  # texture, renderbuffer, buffer, framebuffer, program, vertex_array, sampler
    category: Category
    label: str
    nbytes: int
    glo: int
    owner: Owner | None = None


@dataclass(frozen=True)
class Sample:
    """Ledger totals at the end of one frame."""

    frame: int
    total_bytes: int
    by_category: dict[str, int]
    peak_bytes: int


#: The owner whose scope the running code is in (`Ledger.attributed`). A context variable,
#: so views on different threads (or tasks) each see their own.
_CURRENT: ContextVar[Owner | None] = ContextVar("ledger_owner", default=None)

#: Stands for "the owner of the current scope" in `Ledger.add`.
CURRENT = object()

_LEDGER_IDS = itertools.count(1)


@dataclass(eq=False)
class _Tally:
    """One owner's own bytes and counts by category, its part of the unowned bytes (kept
    up to date on every change of them), its frame peak and its per-frame history."""

    by_cat: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    count_by_cat: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    total: int = 0
    shared_part: int = 0
    frame_peak: int = 0
    history: list[Sample] = field(default_factory=list)

    @property
    def usage(self) -> int:
        return self.total + self.shared_part


def _part(nbytes: int, rank: int, n: int) -> int:
    """Owner `rank`'s part of `nbytes` shared by `n` owners: an even split, the first owner
    also taking the remainder, so the parts add up exactly."""
    return nbytes // n + (nbytes % n if rank == 0 else 0)


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
    _history: list[Sample] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Owners (module docstring): their tallies in the order they came, and the unowned bytes.
    _uid: int = field(default_factory=lambda: next(_LEDGER_IDS))
    _owner_keys: itertools.count = field(default_factory=lambda: itertools.count(1))
    _owners: dict[Owner, _Tally] = field(default_factory=dict)
    _shared_by_cat: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    _shared_count_by_cat: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    # ------------------------------------------------------------------ owners
    def owner(self, label: str) -> Owner:
        """A new owner (a view drawing with this ledger's device); `release_owner` when the
        view is gone."""
        with self._lock:
            owner = Owner(next(self._owner_keys), label, self._uid)
            self._owners[owner] = _Tally()
            self._reshare()
            return owner

    def release_owner(self, owner: Owner) -> None:
        """The view is gone: what it still holds counts as unowned from now (shared by the
        views left, and the device's either way)."""
        with self._lock:
            tally = self._owners.pop(owner, None)
            if tally is None:
                return
            kept = [a for a in self._items.values() if a.owner == owner]
            for alloc in kept:
                self._items[alloc.id] = replace(alloc, owner=None)
                self._shared_by_cat[alloc.category] += alloc.nbytes
                self._shared_count_by_cat[alloc.category] += 1
            self._reshare()
        if kept:
            log.warning("view %r released with %d object(s), %d bytes, still allocated: they "
                        "count as unowned", owner.label, len(kept), sum(a.nbytes for a in kept))

    @contextmanager
    def attributed(self, owner: Owner) -> Iterator[Owner]:
        """Allocations made inside the block are `owner`'s, and the ledger's figures are its."""
        if owner.ledger_id != self._uid:
            raise ValueError(f"owner {owner.label!r} belongs to another ledger")
        token = _CURRENT.set(owner)
        try:
            yield owner
        finally:
            _CURRENT.reset(token)

    def _scope(self) -> _Tally | None:
        owner = _CURRENT.get()
        return self._owners.get(owner) if owner is not None else None

    def _reshare(self) -> None:
        """Recompute every owner's part of the unowned bytes (lock held); a part that grew
        raises its frame peak."""
        n = len(self._owners)
        for rank, tally in enumerate(self._owners.values()):
            tally.shared_part = sum(_part(b, rank, n) for b in self._shared_by_cat.values())
            tally.frame_peak = max(tally.frame_peak, tally.usage)

    # ------------------------------------------------------------------ allocations
    def add(self, kind: str, category: Category | str, label: str, nbytes: int, glo: int = 0,
            *, owner: Owner | None | object = CURRENT) -> Allocation:
        """Record a live object; `owner` defaults to the current scope's (unowned outside
        one, or when the owner is gone or another ledger's)."""
        if nbytes < 0:
            raise ValueError(f"negative allocation size {nbytes} for {label}")
        if owner is CURRENT:
            owner = _CURRENT.get()
        with self._lock:
            tally = self._owners.get(owner) if isinstance(owner, Owner) else None
            alloc = Allocation(next(self._ids), kind, Category(category), label, int(nbytes),
                               int(glo), owner if tally is not None else None)
            self._items[alloc.id] = alloc
            self._by_cat[category] += alloc.nbytes
            self._count_by_cat[category] += 1
            self._total += alloc.nbytes
            self._peak = max(self._peak, self._total)
            self._frame_peak = max(self._frame_peak, self._total)
            self._peak_by_cat[category] = max(self._peak_by_cat[category], self._by_cat[category])
            if tally is not None:
                tally.by_cat[category] += alloc.nbytes
                tally.count_by_cat[category] += 1
                tally.total += alloc.nbytes
                tally.frame_peak = max(tally.frame_peak, tally.usage)
            else:
                self._shared_by_cat[category] += alloc.nbytes
                self._shared_count_by_cat[category] += 1
                if self._owners:
                    self._reshare()
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
            tally = self._owners.get(item.owner) if item.owner is not None else None
            if tally is not None:
                tally.by_cat[item.category] -= item.nbytes
                tally.count_by_cat[item.category] -= 1
                tally.total -= item.nbytes
            else:
                self._shared_by_cat[item.category] -= item.nbytes
                self._shared_count_by_cat[item.category] -= 1
                if self._owners:
                    self._reshare()

    def __contains__(self, alloc: Allocation | int) -> bool:
        aid = alloc if isinstance(alloc, int) else alloc.id
        return aid in self._items

    # ------------------------------------------------------------------ figures
    @property
    def total(self) -> int:
        """Bytes live now: the current owner's (module docstring), else the device's."""
        tally = self._scope()
        return self._total if tally is None else tally.usage

    @property
    def peak(self) -> int:
        return self._peak

    # Keys are the categories' plain strings (a Category compares and hashes equal to its
    # string), so reports, JSON and printed dictionaries read "target", not Category.TARGET.
    def by_category(self) -> dict[str, int]:
        """Bytes by category: the current owner's (module docstring), else the device's."""
        with self._lock:
            tally = self._scope()
            if tally is None:
                return {str(c): b for c, b in self._by_cat.items() if b or self._count_by_cat[c]}
            return self._owner_by_category(tally)

    def _owner_by_category(self, tally: _Tally) -> dict[str, int]:
        rank, n = list(self._owners.values()).index(tally), len(self._owners)
        out = {str(c): b for c, b in tally.by_cat.items() if b or tally.count_by_cat[c]}
        for c, b in self._shared_by_cat.items():
            if b or self._shared_count_by_cat[c]:
                out[str(c)] = out.get(str(c), 0) + _part(b, rank, n)
        return out

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
        """Bytes of one category: the current owner's (module docstring), else the device's."""
        tally = self._scope()
        if tally is None:
            return self._by_cat.get(category, 0)
        with self._lock:
            return self._owner_by_category(tally).get(str(category), 0)

    @property
    def history(self) -> list[Sample]:
        """The per-frame samples: the current owner's (module docstring), else the device's."""
        tally = self._scope()
        return self._history if tally is None else tally.history

    def reset_frame_peak(self) -> None:
        """Start measuring a frame peak from now (a run on a shared device must not inherit
        the peak of whatever ran before it): the current owner's, else every one's."""
        with self._lock:
            tally = self._scope()
            if tally is not None:
                tally.frame_peak = tally.usage
                return
            self._frame_peak = self._total
            for t in self._owners.values():
                t.frame_peak = t.usage

    def end_frame(self, frame: int) -> Sample:
        """Record a history sample (the current owner's, else the device's). Its peak is the
        highest total seen *during* the frame, so transient double allocations (a resize, a
        mip swap) are not hidden by the end state."""
        with self._lock:
            tally = self._scope()
            if tally is None:
                sample = Sample(frame, self._total,
                                {str(c): b for c, b in self._by_cat.items() if b},
                                self._frame_peak)
                self._frame_peak = self._total
                history = self._history
            else:
                sample = Sample(frame, tally.usage,
                                {c: b for c, b in self._owner_by_category(tally).items() if b},
                                tally.frame_peak)
                tally.frame_peak = tally.usage
                history = tally.history
            history.append(sample)
            if len(history) > self.history_limit:
                del history[: len(history) - self.history_limit]
            return sample
