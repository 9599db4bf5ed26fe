"""Leak tracking of GL objects, in the spirit of Vulkan validation's teardown report.

Every GL object made through the engine (and through a tracking wrapper of a user's
moderngl context) gets a record: type, label, bytes and, when asked for, the stack that
created it (off by default: capturing stacks costs, and a leak check should be free when off).
A `LeakCheck` remembers which records existed when it began and raises `LeakError` listing
those made inside it that are still alive at its end.
"""
from __future__ import annotations

import itertools
import threading
import time
import traceback
from pathlib import Path
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..errors import LeakError
from .sizes import format_bytes


@dataclass(eq=False)
class TrackedObject:
    """A live GL object. `alive` tells whether it still exists if it can be released
    behind the tracker's back (a user calling `.release()` on a moderngl object)."""

    serial: int
    type: str
    label: str
    nbytes: int
    glo: int
    obj: Any = None
    stack: str | None = None
    alive: Callable[[], bool] | None = None
    created: float = 0.0  # time.monotonic() when it was tracked (a snapshot shows its age)
    #: the device's own until it shuts down (a shared program): no leak check counts it
    kept: bool = False

    def describe(self) -> str:
        where = ""
        if self.stack:
            where = "\n      created at:\n" + "".join("      " + ln + "\n" for ln in
                                                    self.stack.rstrip().splitlines()[-6:])
        return (f"{self.type} '{self.label}' (GL name {self.glo}, "
                f"{format_bytes(self.nbytes)}){where}")


_BOOKKEEPING = (str(Path(__file__).resolve().parents[1] / "gl"),
                str(Path(__file__).resolve().parent))


def _creation_stack(limit: int = 12) -> str:
    """Where an object was made: the caller's frames, without the device's and the ledger's
    own bookkeeping frames (which are the same for every object and hide the caller)."""
    frames = [f for f in traceback.extract_stack()[:-1]
              if not f.filename.startswith(_BOOKKEEPING)]
    return "".join(traceback.format_list(frames[-limit:]))


@dataclass
class LeakTracker:
    """Registry of live GL objects made through the engine."""

    capture_stacks: bool = False
    _live: dict[int, TrackedObject] = field(default_factory=dict)
    #: the records that can be released behind our back (those with an `alive` test): the
    #: only ones a sweep needs to look at, so sweeping costs nothing per engine-owned texture
    _watched: dict[int, TrackedObject] = field(default_factory=dict)
    _serials: itertools.count = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def track(self, type_: str, label: str, nbytes: int, glo: int, obj: Any = None,
              alive: Callable[[], bool] | None = None) -> TrackedObject:
        stack = _creation_stack() if self.capture_stacks else None
        with self._lock:
            rec = TrackedObject(next(self._serials), type_, label, int(nbytes), int(glo), obj,
                                stack, alive, time.monotonic())
            self._live[rec.serial] = rec
            if alive is not None:
                self._watched[rec.serial] = rec
            return rec

    def untrack(self, rec: TrackedObject) -> None:
        with self._lock:
            self._live.pop(rec.serial, None)
            self._watched.pop(rec.serial, None)

    def sweep(self) -> list[TrackedObject]:
        """Forget objects released behind our back; returns them so owners can unledger."""
        with self._lock:
            gone = [r for r in self._watched.values() if not r.alive()]
            for r in gone:
                del self._live[r.serial]
                del self._watched[r.serial]
        return gone

    def live(self) -> list[TrackedObject]:
        self.sweep()
        with self._lock:
            return sorted(self._live.values(), key=lambda r: r.serial)

    def mark(self) -> int:
        """A serial number: objects made after it are 'new' for a leak check."""
        with self._lock:
            return next(self._serials)

    def made_since(self, mark: int) -> list[TrackedObject]:
        return [r for r in self.live() if r.serial > mark and not r.kept]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.live():
            out[r.type] = out.get(r.type, 0) + 1
        return out

    @contextmanager
    def check(self, before_end: Callable[[], None] | None = None) -> Iterator[LeakTracker]:
        """Raise LeakError for objects made inside the block and alive at its end.

        `before_end` runs first (the device passes its pending-release flush, so releases
        queued from other threads are done before judging)."""
        mark = self.mark()
        yield self
        if before_end is not None:
            before_end()
        leaks = self.made_since(mark)
        if leaks:
            raise LeakError(leaks)
