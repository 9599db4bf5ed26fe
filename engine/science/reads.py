"""Concurrent, cancellable tile reads from a chunked source.

Why: a source over HTTP answers a tile in tens of milliseconds, a compressed chunk on disk
in a few; several reads in flight hide that latency. And a zoom or pan makes most queued
reads worthless: each frame `want` replaces the queue with what the screen needs now, so a
tile no longer wanted is dropped before a worker picks it up (`cancelled` counts those). A
tile already being read finishes and is kept (it may be wanted again soon).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .source import ChunkedSource, TileKey

log = logging.getLogger(__name__)

#: worker threads: enough to keep an HTTP server busy, few enough for a laptop
DEFAULT_WORKERS = 4


class TileReader:
    """Worker threads reading the tiles `want` last named, first named first; `prepare`
    turns each tile into what the cache uploads (a BC4 encoding), on the worker too."""

    def __init__(self, source: ChunkedSource, workers: int = DEFAULT_WORKERS,
                 prepare: Callable[[np.ndarray], Any] | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.source = source
        self._prepare = prepare
        self._cond = threading.Condition()
        self._queue: list[TileKey] = []
        self._busy: set[TileKey] = set()
        self._done: list[tuple[TileKey, Any]] = []
        self.failed: dict[TileKey, str] = {}
        self.cancelled = 0
        self.reads = 0
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"science-read-{i}",
                                          daemon=True) for i in range(workers)]
        for t in self._threads:
            t.start()

    def want(self, keys: Iterable[TileKey]) -> None:
        """Replace the queue with `keys` (in priority order) less those being read, done
        or failed; queued keys not named again are cancelled."""
        with self._cond:
            done = {k for k, _ in self._done}
            fresh = [k for k in dict.fromkeys(keys)
                     if k not in self._busy and k not in done and k not in self.failed]
            self.cancelled += len(set(self._queue) - set(fresh))
            self._queue = fresh
            if fresh:
                self._cond.notify_all()

    def collect(self) -> list[tuple[TileKey, Any]]:
        """Tiles read since the last call."""
        with self._cond:
            done, self._done = self._done, []
        return done

    @property
    def pending(self) -> int:
        """Tiles queued or being read."""
        with self._cond:
            return len(self._queue) + len(self._busy)

    def wait_idle(self, timeout: float) -> bool:
        """Block until nothing is queued or being read (tests and headless runs that want a
        complete picture); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closed)
                if self._closed:
                    return
                key = self._queue.pop(0)
                self._busy.add(key)
            try:
                tile = self.source.read_tile(*key)
                if self._prepare is not None:
                    tile = self._prepare(tile)
                error = None
            except Exception as exc:  # a bad chunk or a dropped connection: report, go on
                tile, error = None, f"{type(exc).__name__}: {exc}"
            with self._cond:
                self._busy.discard(key)
                if error is None:
                    self._done.append((key, tile))
                    self.reads += 1
                else:
                    self.failed[key] = error
                    log.warning("%s: tile %s not read: %s", self.source.name, key, error)
                self._cond.notify_all()

    def close(self) -> None:
        """Stop the workers (a read in progress finishes first)."""
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=30)
