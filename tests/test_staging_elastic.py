"""The streamer's staging ring follows its uploads and the pool's room: absent until whole
levels upload, grown to what a frame's uploads need while loads queue, never more than a
quarter of the room the pool has left, given back when the room shrinks or uploads stop.
The rule (engine.streaming.levels.staging) is pure; the GL test checks the executor."""
from __future__ import annotations

import time

import pytest

from streaming_helpers import make_textures, row_view, step

from engine.memory.governor import Governor
from engine.streaming.levels.staging import (IDLE_FRAMES, MIN_SEGMENT, StagingNeed,
                                             segment_bytes)
from engine.streaming.levels.streamer import LevelStreamer
from engine.memory.budget import Budget

KiB, MiB = 1 << 10, 1 << 20
CAP = 16 * MiB


def need(uploaded: int = 0, waiting: int = 0, room: int = 1 << 30, idle: int = 0
         ) -> StagingNeed:
    return StagingNeed(uploaded, waiting, room, idle)


def test_no_uploads_no_ring() -> None:
    assert segment_bytes(0, need(), 3, CAP) == 0


def test_grows_to_a_frame_of_uploads_and_what_waits() -> None:
    assert segment_bytes(0, need(300 * KiB, 200 * KiB), 3, CAP) == 512 * KiB
    assert segment_bytes(512 * KiB, need(900 * KiB, 900 * KiB), 3, CAP) == 2 * MiB


def test_small_uploads_go_without_a_ring() -> None:
    assert segment_bytes(0, need(MIN_SEGMENT // 2), 3, CAP) == 0


def test_capped() -> None:
    assert segment_bytes(0, need(100 * MiB), 3, CAP) == CAP


def test_takes_at_most_a_quarter_of_the_room() -> None:
    assert segment_bytes(0, need(4 * MiB, room=3 * MiB), 3, CAP) == 256 * KiB


def test_shrinks_when_the_room_does_and_goes_below_the_minimum() -> None:
    assert segment_bytes(MiB, need(MiB, room=3 * MiB), 3, CAP) == 256 * KiB
    assert segment_bytes(MiB, need(MiB, room=MiB), 3, CAP) == MIN_SEGMENT
    assert segment_bytes(MiB, need(MiB, room=512 * KiB), 3, CAP) == 0


def test_keeps_its_size_while_the_need_falls() -> None:
    assert segment_bytes(MiB, need(100 * KiB), 3, CAP) == MiB


def test_given_back_when_idle() -> None:
    assert segment_bytes(MiB, need(idle=IDLE_FRAMES), 3, CAP) == 0
    assert segment_bytes(MiB, need(idle=IDLE_FRAMES - 1), 3, CAP) == MiB


def _streamer(device, tmp_path) -> LevelStreamer:
    """A whole-level streamer of eight 512² textures."""
    s = LevelStreamer(device, backend="realloc")
    for i, p in enumerate(make_textures(tmp_path, 8, 512)):
        s.register(f"t{i}", p)
    return s


@pytest.mark.needs("ARB_buffer_storage")
def test_the_streamers_ring_follows_its_uploads(device, tmp_path) -> None:
    gov = Governor(budget=Budget("1GiB"))
    s = _streamer(device, tmp_path)
    try:
        assert s.uploader.ring is None and device.ledger.category_total("staging") == 0
        sizes = []
        for f in range(400):
            step(device, gov, s, row_view(f, (2.0, 0.0, 1.0), 8))
            sizes.append(s.uploader.ring_bytes)
            if f < 200:
                time.sleep(0.002)  # reads arrive from the I/O threads
        assert s.stats().loads > 0 and max(sizes) >= 3 * MIN_SEGMENT
        assert sizes[-1] == 0, "uploads stopped: the ring is given back"
        assert device.ledger.category_total("staging") == 0
    finally:
        s.release()


@pytest.mark.needs("ARB_buffer_storage")
def test_the_ring_shrinks_within_the_frame_the_pools_room_goes(device, tmp_path) -> None:
    gov = Governor(budget=Budget("1GiB"))
    s = _streamer(device, tmp_path)
    try:
        for f in range(200):
            step(device, gov, s, row_view(f, (2.0, 0.0, 1.0), 8))
            time.sleep(0.002)
            if s.uploader.ring is not None:
                break
        ring = s.uploader.ring_bytes
        assert ring > 0
        s.grant(device.ledger.category_total("texture.streamed"))  # no room beside it
        s.begin_frame(row_view(f + 1, (2.0, 0.0, 1.0), 8))
        assert s.uploader.ring_bytes <= ring // 4
        assert device.ledger.category_total("staging") == s.uploader.ring_bytes
    finally:
        s.release()
