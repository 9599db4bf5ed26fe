"""The engine reports the failures it survives as typed events (`Device.faults`), and the
whole-level streamer reads through an injectable file source: what the soak counts, without
parsing log lines or patching readers."""
from __future__ import annotations

from streaming_helpers import make_textures, row_view, step

from engine.errors import FaultEvent, FaultKind, FaultReport
from engine.memory.governor import Governor
from engine.streaming.handles import HandleCache
from engine.streaming.levels.streamer import LevelStreamer
from engine.memory.budget import Budget


def test_a_report_reaches_every_listener_until_it_unsubscribes():
    report, seen = FaultReport(), []
    stop = report.subscribe(seen.append)
    report.report(FaultKind.TILE_READ, "a.ktx2", OSError("gone"))
    stop()
    report.report(FaultKind.TILE_READ, "b.ktx2")
    assert seen == [FaultEvent(FaultKind.TILE_READ, "a.ktx2", "gone")]


class _Failing:
    """Level files whose reads of one texture fail, counting the reads."""

    def __init__(self, bad: str) -> None:
        self.inner, self.bad, self.reads = HandleCache(4), bad, 0

    def read_level(self, tf, level):
        self.reads += 1
        if str(tf.path) == self.bad:
            raise OSError("injected")
        return self.inner.read_level(tf, level)

    def drop(self, path):
        self.inner.drop(path)

    def close(self):
        self.inner.close()


def test_a_failed_read_is_one_event_naming_the_texture(device, tmp_path):
    paths = make_textures(tmp_path, 4, 128)
    files = _Failing(str(paths[1]))
    s = LevelStreamer(device, backend="realloc", io_workers=0, files=files)
    seen: list[FaultEvent] = []
    stop = device.faults.subscribe(seen.append)
    gov = Governor(budget=Budget("1GiB"))
    try:
        for i, p in enumerate(paths):
            s.register(f"t{i}", p)
        for f in range(20):
            step(device, gov, s, row_view(f, (1.5, 0.0, 1.2), 4))
        assert files.reads > 0
        assert [(e.kind, e.subject) for e in seen] == [(FaultKind.LEVEL_READ, "t1")]
        assert s.stats().io_errors == 1
    finally:
        stop()
        s.release()
