"""The allocator: makes, ledgers, tracks and releases every GL object the engine owns.

One job: whatever the object (a moderngl texture, a raw immutable texture, a fence), it is
made under a GL-error guard, and only a complete object is recorded, with its exact byte size
and category, in the byte ledger and in the object tracker, and labelled for KHR_debug tools.
A failed allocation deletes what it half-made and raises a typed error, so nothing of it stays
allocated, ledgered or tracked. Releases may be requested from any thread; they are queued and
done on the render thread.

The ledger and the tracker are injected through the two small protocols below (the memory
package's `Ledger` and `LeakTracker` satisfy them), so this layer knows nothing of reports or
diagnostics; tests may inject recording fakes. A fault injector (a predicate on the allocation)
lets soak tests and OOM tests make any allocation fail the way GL_OUT_OF_MEMORY would.
"""
from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import FaultReport, GLError, GLOutOfMemoryError
from ..memory import events
from ..memory.ledger import CURRENT, Allocation, Category, Owner
from ..memory.leaks import TrackedObject
from . import constants as K
from .context import RenderThread
from .raw import RawGL

log = logging.getLogger(__name__)

_LABEL_KIND = {"texture": K.LABEL_TEXTURE, "renderbuffer": K.LABEL_RENDERBUFFER,
               "framebuffer": K.LABEL_FRAMEBUFFER, "buffer": K.LABEL_BUFFER,
               "program": K.LABEL_PROGRAM, "vertex_array": K.LABEL_VERTEX_ARRAY,
               "sampler": K.LABEL_SAMPLER}


class ByteLedger(Protocol):
    """What the allocator needs of a byte ledger (engine.memory.ledger.Ledger). `owner`: the
    view an allocation is for; by default the ledger's current scope decides."""

    def add(self, kind: str, category: Category | str, label: str, nbytes: int,
            glo: int = 0, *, owner: Owner | None | object = CURRENT) -> Allocation: ...

    def remove(self, alloc: Allocation | int) -> None: ...


class ObjectTracker(Protocol):
    """What the allocator needs of an object tracker (engine.memory.leaks.LeakTracker)."""

    def track(self, type_: str, label: str, nbytes: int, glo: int, obj: Any = None,
              alive: Callable[[], bool] | None = None) -> TrackedObject: ...

    def untrack(self, rec: TrackedObject) -> None: ...

    def sweep(self) -> list[TrackedObject]: ...

    def live(self) -> list[TrackedObject]: ...

    def mark(self) -> int: ...

    def made_since(self, mark: int) -> list[TrackedObject]: ...

    def check(self, before_end: Callable[[], None] | None = None) -> Any: ...


#: Decides whether an allocation (its description and byte size) fails as if out of memory.
FaultInjector = Callable[[str, int], bool]


def moderngl_alive(obj: Any) -> Callable[[], bool]:
    """Liveness test of a moderngl object: released ones have an InvalidObject mglo."""
    return lambda: type(getattr(obj, "mglo", None)).__name__ != "InvalidObject"


class FaultInjection:
    """The `fault_injector` knob of anything that allocates through an `Allocator` (`_alloc`):
    a predicate (description, bytes) -> fail as out of memory; soak and OOM tests set it."""

    _alloc: Allocator

    @property
    def fault_injector(self) -> FaultInjector | None:
        return self._alloc.fault_injector

    @fault_injector.setter
    def fault_injector(self, inject: FaultInjector | None) -> None:
        self._alloc.fault_injector = inject

    @property
    def faults(self) -> FaultReport:
        """The failures the engine survived on this device, as an event stream."""
        return self._alloc.faults


def _oom_event(what: str, nbytes: int, *, injected: bool) -> None:
    """An out-of-memory allocation, for a trace being recorded."""
    if events.SINK is not None:
        events.SINK.instant("oom", "out of memory", {"what": what, "bytes": int(nbytes),
                                                     "injected": injected})


@dataclass(eq=False)
class _Entry:
    obj: Any
    alloc: Allocation
    rec: TrackedObject
    destroy: Callable[[], None]


class Allocator:
    """Guarded creation, registration and release of GL objects (render thread only)."""

    def __init__(self, raw: RawGL, thread: RenderThread, ledger: ByteLedger,
                 tracker: ObjectTracker, *, labels: bool) -> None:
        self._raw = raw
        self._thread = thread
        self.ledger = ledger
        self.tracker = tracker
        self._labels = labels
        self._entries: dict[int, _Entry] = {}  # tracker serial -> entry
        self._by_obj: dict[int, int] = {}  # id(obj) -> serial
        self._pending: queue.SimpleQueue = queue.SimpleQueue()
        self.fault_injector: FaultInjector | None = None
        self.faults = FaultReport()
        #: called before an object is destroyed (the device unbinds a dying framebuffer)
        self.before_destroy: Callable[[Allocation, Any], None] | None = None

    # ------------------------------------------------------------------ errors
    def drain_errors(self) -> list[int]:
        get_error = self._raw.glGetError
        code = get_error()
        if code == K.NO_ERROR:  # the usual answer, three times per registered texture
            return []
        codes = [code]
        for _ in range(63):  # a lost context can return errors forever; don't hang
            code = get_error()
            if code == K.NO_ERROR:
                break
            codes.append(code)
        return codes

    def check_errors(self, what: str = "GL call") -> None:
        """Raise GLError if GL recorded any error since the last check."""
        codes = self.drain_errors()
        if codes:
            names = ", ".join(K.ERROR_NAMES.get(c, hex(c)) for c in codes)
            raise GLError(f"{what}: {names}", tuple(codes))

    # ------------------------------------------------------------------ making
    def guarded(self, what: str, nbytes: int, make: Callable[[], Any],
                destroy: Callable[[Any], None]) -> Any:
        """Run an allocation; on any GL error delete what it made and raise a typed error."""
        self._thread.require(what)
        if self.fault_injector is not None and self.fault_injector(what, nbytes):
            _oom_event(what, nbytes, injected=True)
            raise GLOutOfMemoryError(what, nbytes)
        self.drain_errors()
        try:
            obj = make()
        except GLError:
            raise
        except Exception as exc:  # moderngl.Error and ctypes failures alike
            codes = self.drain_errors()
            if K.OUT_OF_MEMORY in codes or "memory" in str(exc).lower():
                _oom_event(what, nbytes, injected=False)
                raise GLOutOfMemoryError(what, nbytes) from exc
            raise GLError(f"{what}: {exc}", tuple(codes)) from exc
        codes = self.drain_errors()
        if codes:
            destroy(obj)
            self.drain_errors()
            if K.OUT_OF_MEMORY in codes:
                _oom_event(what, nbytes, injected=False)
                raise GLOutOfMemoryError(what, nbytes)
            names = ", ".join(K.ERROR_NAMES.get(c, hex(c)) for c in codes)
            raise GLError(f"{what}: {names}", tuple(codes))
        return obj

    def register(self, obj: Any, kind: str, category: Category | str, label: str, nbytes: int,
                 glo: int, destroy: Callable[[], None],
                 alive: Callable[[], bool] | None = None, *, label_object: bool = True) -> Any:
        """Record a complete object in the ledger and the tracker, and label it (unless
        `label_object` is False: a user's object keeps the label its code gave it)."""
        if label_object and self._labels and glo and kind in _LABEL_KIND:
            # a file name that is not UTF-8 (caf\xe9.jpg) is labelled readably, not refused
            data = label.encode("utf-8", "backslashreplace")[:255]
            self._raw.glObjectLabel(_LABEL_KIND[kind], glo, len(data), data)
        alloc = self.ledger.add(kind, category, label, nbytes, glo)
        rec = self.tracker.track(kind, label, nbytes, glo, obj, alive)
        self._entries[rec.serial] = _Entry(obj, alloc, rec, destroy)
        self._by_obj[id(obj)] = rec.serial
        return obj

    def make_moderngl(self, kind: str, category: Category | str, label: str, nbytes: int,
                      make: Callable[[], Any]) -> Any:
        obj = self.guarded(f"{kind} '{label}'", nbytes, make, lambda o: o.release())
        return self.register(obj, kind, category, label, nbytes, getattr(obj, "glo", 0),
                             obj.release, moderngl_alive(obj))

    def owns(self, obj: Any) -> bool:
        return id(obj) in self._by_obj

    def keep(self, obj: Any) -> None:
        """Make a live object this allocator made the device's own: no leak check counts it,
        no view owns it (it outlives the run that made it), shutdown releases it."""
        entry = self._entries[self._by_obj[id(obj)]]
        entry.rec.kept = True
        old = entry.alloc
        self.ledger.remove(old)
        entry.alloc = self.ledger.add(old.kind, old.category, old.label, old.nbytes, old.glo,
                                      owner=None)

    def reaccount(self, obj: Any, nbytes: int) -> Allocation:
        """Change the ledgered size of a live object whose memory changes in place."""
        entry = self._entries[self._by_obj[id(obj)]]
        old = entry.alloc
        self.ledger.remove(old)
        entry.alloc = self.ledger.add(old.kind, old.category, old.label, nbytes, old.glo,
                                      owner=old.owner)  # the view it was made for keeps it
        entry.rec.nbytes = int(nbytes)
        return entry.alloc

    # ------------------------------------------------------------------ releasing
    def release(self, obj: Any, *, closed: bool = False) -> bool:
        """Delete an object this allocator made; from another thread it is queued.
        Returns False when the object is not (or no longer) ours."""
        if obj is None:
            return False
        if not self._thread.current:
            self._pending.put(obj)
            return True
        serial = self._by_obj.pop(id(obj), None)
        if serial is None:
            return False
        entry = self._entries.pop(serial)
        self.ledger.remove(entry.alloc)
        self.tracker.untrack(entry.rec)
        if not closed:
            if self.before_destroy is not None:
                self.before_destroy(entry.alloc, obj)
            entry.destroy()
        return True

    def flush(self, *, closed: bool = False) -> int:
        """Do the releases other threads queued; forget objects released behind our back."""
        n = 0
        while True:
            try:
                obj = self._pending.get_nowait()
            except queue.Empty:
                break
            self.release(obj, closed=closed)
            n += 1
        for rec in self.tracker.sweep():
            entry = self._entries.pop(rec.serial, None)
            if entry is not None:
                self._by_obj.pop(id(entry.obj), None)
                self.ledger.remove(entry.alloc)
        return n

    def live(self) -> list[TrackedObject]:
        self.flush()
        return self.tracker.live()

    def entries(self) -> list[tuple[Allocation, TrackedObject, Any]]:
        """Every live object this allocator made: its ledger entry, its tracker record and
        the object itself (a snapshot lists them; a staging ring reports its occupancy)."""
        self.flush()
        return [(e.alloc, e.rec, e.obj) for e in self._entries.values()]

    def object_of(self, rec: TrackedObject) -> Any:
        entry = self._entries.get(rec.serial)
        return entry.obj if entry is not None else None

    @contextmanager
    def leak_check(self) -> Iterator[Any]:
        """Objects made inside the block and alive at its end raise LeakError naming each."""
        with self.tracker.check(before_end=self.flush) as t:
            yield t

