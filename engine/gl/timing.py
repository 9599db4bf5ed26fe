"""GPU time per frame from GL timer queries, read back a few frames late so nothing stalls.

`begin()` / `end()` bracket a frame's GL commands with a GL_TIME_ELAPSED query. The query's
result is ready only when the GPU has finished those commands, so it is read `depth` frames
later and only when GL_QUERY_RESULT_AVAILABLE says so: asking earlier would make the CPU
wait for the GPU, the very stall the batched frame exists to avoid. A ring of `depth + 1`
queries lets new frames start while older ones are in flight. The queries are ledgered and
leak-tracked like every other GL object (kind "query", no bytes).
"""
from __future__ import annotations

import ctypes as C
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

from .extensions import (
    QUERY_RESULT,
    QUERY_RESULT_AVAILABLE,
    TIME_ELAPSED,
    extensions,
    guarded,
    register,
)

log = logging.getLogger(__name__)

_IMPLAUSIBLE_MS = 60_000.0


@dataclass(eq=False)
class _Query:
    glo: int
    frame: int = -1
    pending: bool = False


class GpuTimer:
    """A ring of GL_TIME_ELAPSED queries; `latest_ms` is the newest frame's GPU time known."""

    def __init__(self, device: Any, depth: int = 4, label: str = "gpu-timer") -> None:
        self.device = device
        self.label = label
        self._ext = extensions(device)
        self.supported = self._ext.has("glGenQueries", "glBeginQuery", "glEndQuery",
                                       "glGetQueryObjectiv", "glGetQueryObjectui64v")
        self._queries: list[_Query] = []
        self._next = 0
        self._open: _Query | None = None
        self.results: deque[tuple[int, float]] = deque(maxlen=1024)  # (frame, ms)
        self.latest_ms: float | None = None
        self.latest_frame = -1
        self.dropped = 0
        if self.supported:
            for i in range(depth + 1):
                self._queries.append(self._make(f"{label}.{i}"))

    def _make(self, label: str) -> _Query:
        ext = self._ext

        def make() -> _Query:
            name = C.c_uint(0)
            ext.glGenQueries(1, C.byref(name))
            return _Query(name.value)

        def delete(q: _Query) -> None:
            name = C.c_uint(q.glo)
            ext.glDeleteQueries(1, C.byref(name))

        q = guarded(self.device, f"timer query '{label}'", 0, make, delete)
        return register(self.device, q, "query", "other", label, 0, q.glo, lambda: delete(q))

    def begin(self, frame: int) -> None:
        """Start timing `frame` (a query still in flight is collected first, if ready, or
        dropped: never waited for)."""
        if not self.supported or self._open is not None:
            return
        self.poll()
        q = self._queries[self._next]
        if q.pending:
            self.dropped += 1  # its result never became available in time: skip it
            q.pending = False
        self._next = (self._next + 1) % len(self._queries)
        q.frame = frame
        self._ext.glBeginQuery(TIME_ELAPSED, q.glo)
        self._open = q

    def end(self) -> None:
        if self._open is None:
            return
        self._ext.glEndQuery(TIME_ELAPSED)
        self._open.pending = True
        self._open = None

    def poll(self) -> list[tuple[int, float]]:
        """Collect every finished query (non-blocking); returns the new (frame, ms)."""
        got = []
        ext = self._ext
        for q in sorted((q for q in self._queries if q.pending), key=lambda q: q.frame):
            avail = C.c_int(0)
            ext.glGetQueryObjectiv(q.glo, QUERY_RESULT_AVAILABLE, C.byref(avail))
            if not avail.value:
                break  # later queries finish later still
            ns = C.c_uint64(0)
            ext.glGetQueryObjectui64v(q.glo, QUERY_RESULT, C.byref(ns))
            q.pending = False
            ms = ns.value / 1e6
            if ms > _IMPLAUSIBLE_MS:
                # llvmpipe answers its very first TIME_ELAPSED query with a span from an
                # unset start (measured: 2.5e6 ms); no frame takes a minute
                self.dropped += 1
                continue
            got.append((q.frame, ms))
            self.results.append((q.frame, ms))
            if q.frame > self.latest_frame:
                self.latest_frame, self.latest_ms = q.frame, ms
        return got

    def release(self) -> None:
        if self._open is not None:
            self.end()
        for q in self._queries:
            self.device.release(q)
        self._queries.clear()
