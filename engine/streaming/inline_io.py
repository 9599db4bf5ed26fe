"""A level source that reads on the render thread, in priority order, when polled.

The threaded `LevelIO` is what real runs use: reads never block the frame. But its results
arrive whenever the threads finish, so two runs of the same flight can differ by a frame here
and there. Reference-image tests and reproducible benchmarks inject this source instead: the
requests made in frame N are read at the start of frame N+1, deterministically, with the same
cache, fault handling and statistics as the threaded source (and the same `request`, `cancel`,
`retain`, `poll`, `stats`, `close` surface).
"""
from __future__ import annotations

import logging
from collections.abc import Iterable

from .cache import LevelCache, level_key
from .io import Reader, ReadResult, RequestKey
from .stats import IOStats

log = logging.getLogger(__name__)


class InlineLevelIO:
    """Deterministic, single-threaded level reads: `poll` does up to `max_items` reads."""

    def __init__(self, read: Reader, cache: LevelCache | None = None) -> None:
        self._read = read
        self._cache = cache
        self._pending: dict[RequestKey, float] = {}
        self._stats = IOStats()
        self._failed_textures: set[int] = set()

    def request(self, texture_id: int, level: int, priority: float = 0.0) -> None:
        key = (int(texture_id), int(level))
        if key not in self._pending:
            self._stats.requested += 1
        self._pending[key] = float(priority)

    def request_many(self, items: Iterable[tuple[int, int, float]]) -> None:
        """`LevelIO.request_many`: `request` for each (texture id, level, priority)."""
        for texture_id, level, priority in items:
            self.request(texture_id, level, priority)

    def cancel(self, texture_id: int, level: int) -> bool:
        if self._pending.pop((texture_id, level), None) is None:
            return False
        self._stats.cancelled += 1
        return True

    def retain(self, keys: Iterable[RequestKey], *, keep_reading: bool = False) -> int:
        """`LevelIO.retain` (no read is ever under way here, so `keep_reading` changes
        nothing)."""
        keep = set(keys)
        doomed = [k for k in self._pending if k not in keep]
        for key in doomed:
            self.cancel(*key)
        return len(doomed)

    def poll(self, max_items: int = 64) -> list[ReadResult]:
        """Read the most wanted pending levels now (highest priority, then lowest key)."""
        order = sorted(self._pending, key=lambda k: (-self._pending[k], k))[:max_items]
        out = []
        for key in order:
            del self._pending[key]
            out.append(self._fetch(key))
        return out

    def _fetch(self, key: RequestKey) -> ReadResult:
        texture_id, level = key
        if self._cache is not None:
            data = self._cache.get(level_key(texture_id, level))
            if data is not None:
                self._stats.cache_hits += 1
                self._stats.completed += 1
                return ReadResult(texture_id, level, data, from_cache=True)
        try:
            data = bytes(self._read(texture_id, level))
        except Exception as exc:  # noqa: BLE001 - a fault is a failed result, never a crash
            self._stats.failed += 1
            if texture_id not in self._failed_textures:
                self._failed_textures.add(texture_id)
                log.warning("texture %s: reading level %d failed: %s", texture_id, level, exc)
            return ReadResult(texture_id, level, error=exc)
        self._stats.completed += 1
        self._stats.bytes_read += len(data)
        if self._cache is not None:
            self._cache.put(level_key(texture_id, level), data)
        return ReadResult(texture_id, level, data)

    def stats(self) -> IOStats:
        snap = IOStats(**vars(self._stats))
        snap.pending = len(self._pending)
        return snap

    def close(self) -> None:
        self._stats.cancelled += len(self._pending)
        self._pending.clear()
