"""A thread-safe RAM cache of mip-level bytes with its own byte budget and LRU eviction.

Why: re-reading and re-decompressing a level the streamer evicted a second ago is the
commonest waste of a streamer (the camera turns back). The cache sits between the I/O
workers (which fill it) and the render thread (which uploads from it); both touch it, so
every method takes one lock. It never holds more than `budget_bytes`.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from .stats import CacheStats

#: (texture_id, level, layer, face); WHOLE_LEVEL in layer and face = every slice in one blob.
CacheKey = tuple[int, int, int, int]
WHOLE_LEVEL = -1


def level_key(texture_id: int, level: int, layer: int = WHOLE_LEVEL,
              face: int = WHOLE_LEVEL) -> CacheKey:
    return (int(texture_id), int(level), int(layer), int(face))


class LevelCache:
    """LRU of level blobs under a byte budget. `get` refreshes recency; `put` evicts the
    least recently used entries until the new one fits."""

    def __init__(self, budget_bytes: int) -> None:
        if budget_bytes < 0:
            raise ValueError(f"cache budget must not be negative, got {budget_bytes}")
        self._budget = int(budget_bytes)
        self._items: OrderedDict[CacheKey, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._stats = CacheStats(budget_bytes=self._budget)

    def get(self, key: CacheKey) -> bytes | None:
        with self._lock:
            data = self._items.get(key)
            if data is None:
                self._stats.misses += 1
                return None
            self._items.move_to_end(key)
            self._stats.hits += 1
            return data

    def __contains__(self, key: CacheKey) -> bool:
        """Presence without touching recency or hit counts (for planning, not for use)."""
        with self._lock:
            return key in self._items

    def put(self, key: CacheKey, data: bytes) -> bool:
        """Store `data`; False (and nothing stored) when it alone exceeds the budget."""
        size = len(data)
        with self._lock:
            if size > self._budget:
                self._stats.rejected += 1
                return False
            self._drop(key)
            while self._stats.bytes + size > self._budget:
                old_key = next(iter(self._items))
                self._drop(old_key)
                self._stats.evictions += 1
            self._items[key] = data
            self._stats.bytes += size
            self._stats.entries = len(self._items)
            return True

    def discard(self, key: CacheKey) -> None:
        with self._lock:
            self._drop(key)

    def discard_texture(self, texture_id: int) -> None:
        """Forget every level of a texture (its file changed or it was unregistered)."""
        with self._lock:
            for key in [k for k in self._items if k[0] == texture_id]:
                self._drop(key)

    def set_budget(self, budget_bytes: int) -> None:
        """Change the budget (RAM pressure); shrinks at once by LRU order."""
        with self._lock:
            self._budget = self._stats.budget_bytes = int(budget_bytes)
            while self._items and self._stats.bytes > self._budget:
                self._drop(next(iter(self._items)))
                self._stats.evictions += 1

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._stats.bytes = self._stats.entries = 0

    def stats(self) -> CacheStats:
        """A snapshot (a copy: the caller may keep it across frames)."""
        with self._lock:
            return CacheStats(**vars(self._stats))

    def _drop(self, key: CacheKey) -> None:
        data = self._items.pop(key, None)
        if data is not None:
            self._stats.bytes -= len(data)
            self._stats.entries = len(self._items)
