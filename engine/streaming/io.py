"""I/O workers: read single mip levels off the render thread, most wanted first.

Why threads: file reads and zstd decompression release the GIL, and the render thread must
never wait on a disk. Why this shape:
- A priority queue, because the policy's requests are ordered (visible before the rest) and
  re-prioritised every frame; a request re-made with another priority just moves.
- Cancellation before the read (`cancel`, `retain`), because the camera moves faster than
  disks: reading levels nobody wants any more wastes the bandwidth the wanted ones need.
- Results through a queue the render thread drains without blocking (`poll`), so all GL
  work stays on the render thread (DESIGN.md: no GL in workers, ever).
- Faults are data: a vanished or truncated file becomes a failed `ReadResult`, logged once
  per texture and counted; it never raises on the render thread nor kills a worker.
The reader is any callable `read(texture_id, level) -> bytes`: this module knows no formats.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Self

from .cache import LevelCache, level_key
from .stats import IOStats

log = logging.getLogger(__name__)

Reader = Callable[[int, int], bytes]
RequestKey = tuple[int, int]  # (texture_id, level)


@dataclass(frozen=True)
class ReadResult:
    """One finished request: `data` on success, `error` on failure (never both)."""

    texture_id: int
    level: int
    data: bytes | None = None
    error: Exception | None = None
    from_cache: bool = False
    #: perf_counter seconds: asked for, taken by a worker, finished (0: not timed)
    requested: float = 0.0
    started: float = 0.0
    finished: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


class LevelIO:
    """A pool of reader threads with a cancellable priority queue and a RAM cache in front.

    Thread model: `request`, `cancel`, `retain`, `poll`, `stats` and `close` are called from
    the render thread; workers only call the reader and the (thread-safe) cache."""

    def __init__(self, read: Reader, cache: LevelCache | None = None, *, workers: int = 2,
                 latency_ms: tuple[float, float] | None = None, seed: int | None = None) -> None:
        if workers < 1:
            raise ValueError(f"need at least one I/O worker, got {workers}")
        self._read = read
        self._cache = cache
        self._latency = latency_ms
        self._rng = random.Random(seed)
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, RequestKey]] = []
        self._pending: dict[RequestKey, int] = {}  # key -> seq of its live heap entry
        self._asked: dict[RequestKey, float] = {}  # key -> when first asked (perf_counter)
        self._in_progress: set[RequestKey] = set()
        self._cancelled_in_progress: set[RequestKey] = set()
        self._done: queue.SimpleQueue[ReadResult] = queue.SimpleQueue()
        self._seq = itertools.count()
        self._stats = IOStats()
        self._failed_textures: set[int] = set()
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"engine-io-{i}", daemon=True)
                         for i in range(workers)]
        for thread in self._threads:
            thread.start()

    # -- render thread -------------------------------------------------------------------
    def request(self, texture_id: int, level: int, priority: float = 0.0) -> None:
        """Ask for a level (higher priority is read first). A cached level completes at
        once; one already pending is re-prioritised; one being read is left alone."""
        self.request_many([(texture_id, level, priority)])

    def request_many(self, items: Iterable[tuple[int, int, float]]) -> None:
        """`request` for each (texture id, level, priority), under one lock and with one
        wake-up of the workers: a frame's new reads go out together. (A lock and a notify
        per read let a woken worker take the GIL from the render thread mid-loop, which
        showed as the I/O requests of a camera cut's frame.)"""
        if self._closed:
            raise RuntimeError("LevelIO is closed")
        queued = []
        for texture_id, level, priority in items:
            key = (int(texture_id), int(level))
            data = self._cache.get(level_key(*key)) if self._cache is not None else None
            if data is None:
                queued.append((key, float(priority)))
                continue
            with self._cond:
                self._stats.requested += 1
                self._stats.cache_hits += 1
                self._stats.completed += 1
            now = time.perf_counter()
            self._done.put(ReadResult(key[0], key[1], data, from_cache=True,
                                      requested=now, started=now, finished=now))
        if not queued:
            return
        with self._cond:
            for key, priority in queued:
                if key in self._in_progress:
                    self._cancelled_in_progress.discard(key)
                    continue
                if key not in self._pending:
                    self._stats.requested += 1
                    self._asked.setdefault(key, time.perf_counter())
                seq = next(self._seq)
                self._pending[key] = seq  # any older heap entry of this key is now stale
                heapq.heappush(self._heap, (-priority, seq, key))
            self._cond.notify_all()

    def cancel(self, texture_id: int, level: int) -> bool:
        """Drop a request. True if it was pending or being read (whose result is then
        dropped: the bytes still reach the cache)."""
        with self._cond:
            return self._cancel_locked((int(texture_id), int(level)))

    def retain(self, keys: Iterable[RequestKey], *, keep_reading: bool = False) -> int:
        """Cancel every request not in `keys` (the policy's wanted set this frame).
        Returns how many were cancelled. `keep_reading`: reads already under way finish
        and are delivered (their bytes are paid for; a caller that keeps them in RAM gets
        them back for free when the camera returns)."""
        keep = {(int(t), int(lvl)) for t, lvl in keys}
        with self._cond:
            live = list(self._pending) if keep_reading else [*self._pending,
                                                              *self._in_progress]
            doomed = [k for k in live if k not in keep]
            return sum(self._cancel_locked(k) for k in doomed)

    def poll(self, max_items: int = 64) -> list[ReadResult]:
        """Finished results, at most `max_items`, without blocking."""
        out: list[ReadResult] = []
        while len(out) < max_items:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                break
        return out

    def stats(self) -> IOStats:
        with self._cond:
            snap = IOStats(**vars(self._stats))
            snap.pending = len(self._pending)
            snap.in_progress = len(self._in_progress)
            return snap

    def close(self) -> None:
        """Stop the workers and wait for them; pending requests are dropped. Idempotent."""
        with self._cond:
            self._closed = True
            self._stats.cancelled += len(self._pending)
            self._pending.clear()
            self._asked.clear()
            self._heap.clear()
            self._cond.notify_all()
        for thread in self._threads:
            thread.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------
    def _cancel_locked(self, key: RequestKey) -> bool:
        if self._pending.pop(key, None) is not None:
            self._asked.pop(key, None)
            self._stats.cancelled += 1
            return True
        if key in self._in_progress and key not in self._cancelled_in_progress:
            self._cancelled_in_progress.add(key)
            self._stats.cancelled += 1
            return True
        return False

    def _next(self) -> RequestKey | None:
        """Block until a live request (claimed as in progress) or close (None)."""
        with self._cond:
            while True:
                while self._heap:
                    _, seq, key = heapq.heappop(self._heap)
                    if self._pending.get(key) == seq:
                        del self._pending[key]
                        self._in_progress.add(key)
                        return key
                if self._closed:
                    return None
                self._cond.wait()

    def _work(self) -> None:
        while (key := self._next()) is not None:
            started = time.perf_counter()
            result = self._fetch(key)
            with self._cond:
                result = replace(result, requested=self._asked.pop(key, started),
                                 started=started, finished=time.perf_counter())
                self._in_progress.discard(key)
                if key in self._cancelled_in_progress:
                    self._cancelled_in_progress.discard(key)
                    continue
                if result.ok:
                    self._stats.completed += 1
                else:
                    self._stats.failed += 1
            self._done.put(result)

    def _fetch(self, key: RequestKey) -> ReadResult:
        """Cache first, then the reader; every exception becomes a failed result."""
        texture_id, level = key
        if self._cache is not None:
            data = self._cache.get(level_key(texture_id, level))
            if data is not None:
                with self._cond:
                    self._stats.cache_hits += 1
                return ReadResult(texture_id, level, data, from_cache=True)
        try:
            if self._latency is not None:
                with self._cond:
                    delay = self._rng.uniform(*self._latency)
                time.sleep(delay / 1000.0)
            data = bytes(self._read(texture_id, level))
        except Exception as exc:  # noqa: BLE001 - a worker must survive any reader fault
            self._log_failure(texture_id, level, exc)
            return ReadResult(texture_id, level, error=exc)
        with self._cond:
            self._stats.bytes_read += len(data)
        if self._cache is not None:
            self._cache.put(level_key(texture_id, level), data)
        return ReadResult(texture_id, level, data)

    def _log_failure(self, texture_id: int, level: int, exc: Exception) -> None:
        with self._cond:
            first = texture_id not in self._failed_textures
            self._failed_textures.add(texture_id)
        if first:
            log.warning("texture %s: reading level %d failed: %s", texture_id, level, exc)
        else:
            log.debug("texture %s: reading level %d failed again: %s", texture_id, level, exc)
