"""I/O workers: priority, cancellation, cache, faults, latency stress and shutdown."""
from __future__ import annotations

import logging
import threading
import time

import pytest

from engine.errors import TextureFormatError
from engine.streaming.cache import LevelCache, level_key
from engine.streaming.io import LevelIO, ReadResult


def blob(tid: int, level: int) -> bytes:
    return f"{tid}:{level}".encode()


def drain(io: LevelIO, count: int, timeout: float = 5.0) -> list[ReadResult]:
    out: list[ReadResult] = []
    end = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < end:
        out += io.poll(16)
        time.sleep(0.001)
    return out


def test_reads_through_and_poll_never_blocks():
    with LevelIO(blob) as io:
        assert io.poll() == []
        for lvl in range(5):
            io.request(1, lvl)
        results = drain(io, 5)
    assert sorted(r.level for r in results) == list(range(5))
    assert all(r.ok and r.data == blob(1, r.level) for r in results)


def test_higher_priority_read_first():
    gate = threading.Event()
    order = []

    def read(tid: int, level: int) -> bytes:
        gate.wait(5)
        order.append(tid)
        return b"x"

    with LevelIO(read, workers=1) as io:
        io.request(0, 0, priority=0)      # taken by the worker, blocks on the gate
        time.sleep(0.05)
        for tid, prio in [(1, 1.0), (2, 5.0), (3, 3.0), (1, 9.0)]:  # 1 re-prioritised
            io.request(tid, 0, prio)
        gate.set()
        drain(io, 4)
    assert order == [0, 1, 2, 3]


def test_cancel_and_retain_drop_unwanted_requests():
    gate = threading.Event()
    read_levels = []

    def read(tid: int, level: int) -> bytes:
        gate.wait(5)
        read_levels.append((tid, level))
        return b"x"

    with LevelIO(read, workers=1) as io:
        io.request(9, 9)                  # in progress
        time.sleep(0.05)
        for lvl in range(6):
            io.request(1, lvl)
        assert io.cancel(1, 0) and not io.cancel(1, 0)
        assert io.retain([(1, 1), (1, 2)]) == 4  # (1,3..5) pending + (9,9) in progress
        gate.set()
        results = drain(io, 2)
        time.sleep(0.05)
        assert io.poll() == []
        stats = io.stats()
    assert sorted((r.texture_id, r.level) for r in results) == [(1, 1), (1, 2)]
    assert sorted(read_levels) == [(1, 1), (1, 2), (9, 9)]  # 9,9 was read, result dropped
    assert stats.cancelled == 5


def test_cache_serves_repeats_and_is_filled():
    calls = []
    cache = LevelCache(1 << 20)

    def read(tid: int, level: int) -> bytes:
        calls.append((tid, level))
        return blob(tid, level)

    with LevelIO(read, cache) as io:
        io.request(3, 1)
        drain(io, 1)
        io.request(3, 1)
        [again] = drain(io, 1)
        stats = io.stats()
    assert again.from_cache and again.data == blob(3, 1) and calls == [(3, 1)]
    assert cache.get(level_key(3, 1)) == blob(3, 1)
    assert (stats.cache_hits, stats.completed, stats.bytes_read) == (1, 2, len(blob(3, 1)))


def test_reader_faults_become_failed_results_logged_once(caplog):
    def read(tid: int, level: int) -> bytes:
        if tid == 1:
            raise TextureFormatError("a.ktx2", "truncated level index")
        if tid == 2:
            raise FileNotFoundError("b.ktx2")
        return b"ok"

    with caplog.at_level(logging.WARNING, logger="engine.streaming.io"), \
            LevelIO(read, workers=2) as io:
        for lvl in range(3):
            io.request(1, lvl)
            io.request(2, lvl)
        io.request(3, 0)
        results = drain(io, 7)
        stats = io.stats()
    failed = [r for r in results if not r.ok]
    assert len(failed) == 6 and all(r.data is None for r in failed)
    assert {type(r.error) for r in failed} == {TextureFormatError, FileNotFoundError}
    assert [r.data for r in results if r.ok] == [b"ok"]
    assert stats.failed == 6 and stats.completed == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2  # once per texture, not per level


def test_latency_stress_many_requests_all_accounted():
    with LevelIO(blob, LevelCache(1 << 16), workers=4, latency_ms=(0.0, 2.0), seed=1) as io:
        for i in range(300):
            io.request(i % 40, i % 7, priority=i % 5)
            if i % 10 == 0:
                io.cancel((i + 3) % 40, (i + 3) % 7)
        time.sleep(0.01)
        io.retain({(t, lvl) for t in range(20) for lvl in range(7)})
        deadline = time.monotonic() + 10
        results: list[ReadResult] = []
        while time.monotonic() < deadline:
            results += io.poll(64)
            s = io.stats()
            if s.pending == 0 and s.in_progress == 0:
                results += io.poll(1000)
                break
            time.sleep(0.002)
        s = io.stats()
    assert all(r.ok and r.data == blob(r.texture_id, r.level) for r in results)
    assert s.completed == len(results)
    assert s.completed + s.cancelled + s.failed >= len({(i % 40, i % 7) for i in range(300)})


def test_close_is_idempotent_and_joins():
    io = LevelIO(blob, workers=3)
    io.request(1, 1)
    io.close()
    io.close()
    assert not any(t.is_alive() for t in threading.enumerate() if t.name.startswith("engine-io"))
    with pytest.raises(RuntimeError):
        io.request(1, 2)
