"""The RAM level cache: LRU order, byte budget, stats, and thread safety."""
from __future__ import annotations

from streaming_helpers import run_threads

from engine.streaming.cache import LevelCache, level_key


def test_lru_eviction_keeps_budget():
    cache = LevelCache(100)
    a, b, c = level_key(1, 0), level_key(2, 0), level_key(3, 0)
    assert cache.put(a, b"x" * 40) and cache.put(b, b"y" * 40)
    assert cache.get(a) == b"x" * 40          # a is now most recent
    assert cache.put(c, b"z" * 40)            # evicts b, the least recent
    assert cache.get(b) is None and a in cache and c in cache
    s = cache.stats()
    assert (s.hits, s.misses, s.evictions, s.bytes, s.entries) == (1, 1, 1, 80, 2)


def test_oversized_item_rejected_and_replace_counts_once():
    cache = LevelCache(10)
    assert not cache.put(level_key(1, 0), b"x" * 11)
    cache.put(level_key(1, 0), b"abc")
    cache.put(level_key(1, 0), b"abcdef")
    s = cache.stats()
    assert (s.rejected, s.bytes, s.entries) == (1, 6, 1)


def test_discard_texture_budget_change_and_clear():
    cache = LevelCache(1000)
    for lvl in range(3):
        cache.put(level_key(7, lvl), b"a" * 100)
    cache.put(level_key(8, 0, layer=2, face=3), b"b" * 100)
    cache.discard_texture(7)
    assert cache.stats().entries == 1 and level_key(8, 0, 2, 3) in cache
    cache.put(level_key(9, 0), b"c" * 100)
    cache.set_budget(150)
    assert cache.stats().bytes == 100 and level_key(9, 0) in cache
    cache.clear()
    assert cache.stats().bytes == 0


def test_concurrent_use_never_exceeds_budget():
    cache = LevelCache(10_000)

    def hammer(seed: int) -> None:
        for i in range(2000):
            key = level_key((seed * 7 + i) % 50, i % 4)
            if cache.get(key) is None:
                cache.put(key, bytes(100 + (i % 300)))
            assert cache.stats().bytes <= 10_000

    errors = run_threads(hammer, 4)
    assert not errors
    s = cache.stats()
    assert s.hits + s.misses == 8000 and s.bytes <= 10_000
