"""Where the lower layers report what happened to memory, for a trace that is being recorded.

The streamer, the I/O workers and the allocator sit below the diagnostics layer that writes
traces, so they cannot call it; they call this module instead. While no trace records (the
usual case) `SINK` is None and every call site costs one global read and a comparison. A
sink is installed by the frame loop for a run with `trace=` set (one at a time per process:
a second is refused, since two runs would interleave their events in one file).

Times are `time.perf_counter()` seconds; the sink converts them to its own clock.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class EventSink(Protocol):
    """What a trace recorder takes from the layers below it (any thread may call)."""

    def span(self, cat: str, name: str, start: float, end: float,
             args: Mapping[str, Any]) -> None:
        """An asynchronous span (a read, an upload) that began at `start` and ended at `end`."""
        ...

    def instant(self, cat: str, name: str, args: Mapping[str, Any]) -> None:
        """A point event now (an eviction, an out-of-memory, a fault)."""
        ...


SINK: EventSink | None = None


def install(sink: EventSink) -> None:
    """Make `sink` receive every event; RuntimeError when another is installed."""
    global SINK
    if SINK is not None and SINK is not sink:
        raise RuntimeError("a trace is already being recorded in this process")
    SINK = sink


def uninstall(sink: EventSink) -> None:
    """Stop sending events to `sink` (no-op when another one is installed, or none)."""
    global SINK
    if SINK is sink:
        SINK = None
