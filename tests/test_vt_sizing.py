"""The page cache's size policy (engine/streaming/virtual/sizing.py), without GL."""
from __future__ import annotations

import numpy as np
import pytest

from engine.memory.split import MIN_STREAM_SLOTS
from engine.streaming.virtual.policy import TilePolicy
from engine.streaming.virtual.sizing import (
    HEADROOM,
    SHRINK_FRAMES,
    SLAB_SLOTS,
    ElasticSize,
    screen_tiles,
    room_for,
    wanted_slots,
)
from engine.streaming.virtual import keys as tile_keys


def test_wanted_slots_is_the_need_in_slabs_between_the_floor_and_the_allowance():
    low = wanted_slots(10, 0, 1000)
    assert low >= 10 + MIN_STREAM_SLOTS and low % SLAB_SLOTS == 0 and low < 10 + 2 * SLAB_SLOTS
    w = wanted_slots(10, 40, 1000)
    assert w % SLAB_SLOTS == 0 and 10 + 40 * HEADROOM <= w < 10 + 40 * HEADROOM + SLAB_SLOTS
    assert wanted_slots(10, 4000, 300) == 300
    assert wanted_slots(10, 40, 5) == 5  # never above the allowance (the caller refuses)


def test_screen_tiles_grow_with_the_screen():
    assert screen_tiles(128, 128, 128) == 3
    assert screen_tiles(1280, 720, 128) > screen_tiles(640, 360, 128) * 3


def test_grows_at_once_and_shrinks_only_after_the_need_stayed_low():
    e = ElasticSize()
    assert e.decide(0, 40, 64, 500) == 64
    assert e.decide(1, 64, 60, 500) == 64  # less than a slab lower: kept
    assert e.decide(2, 64, 24, 500) == 64  # lower, not yet long enough
    assert e.decide(2 + SHRINK_FRAMES - 1, 64, 24, 500) == 64
    assert e.decide(2 + SHRINK_FRAMES, 64, 24, 500) == 24
    assert e.decide(3 + SHRINK_FRAMES, 24, 24, 16) == 24  # over the allowance: what fits


def test_a_wobbling_need_does_not_resize():
    e = ElasticSize()
    sizes = {e.decide(f, 64, 24 if f % 2 else 64, 500) for f in range(4 * SHRINK_FRAMES)}
    assert sizes == {64}


def test_a_shrink_keeps_the_pinned_and_the_best_tiles_with_their_recency():
    pol = TilePolicy(8, hold_frames=4, grace_frames=1)
    keys = [int(tile_keys.pack_one(0, 3, i, 0)) for i in range(8)]
    pol.pin(keys[0])
    pol.plan(1, np.array(sorted(keys[1:]), tile_keys.DTYPE), np.zeros(7, np.int64))
    for k in pol.admit_many(keys[1:]):
        assert k is not None
    # frames pass; only keys 5..7 are still wanted
    pol.plan(20, np.array(keys[5:], tile_keys.DTYPE), np.zeros(3, np.int64))
    moves, dropped = pol.shrink_or_grow(4)
    assert pol.slots == 4 and len(moves) == 4 and sorted(dropped) == sorted(keys[1:5])
    kept = {int(pol.slot_key[b]) for _, b in moves}
    assert kept == {keys[0], *keys[5:]}
    assert pol.pinned[pol.where[keys[0]]] and pol.occupied == 4
    assert all(pol.last_wanted[pol.where[k]] == 20 for k in keys[5:])
    moves, dropped = pol.shrink_or_grow(16)  # a grow moves nothing out
    assert pol.slots == 16 and not dropped and all(a == b for a, b in moves)
    with pytest.raises(Exception, match="pinned"):
        pol.shrink_or_grow(0)


def test_room_holds_every_wanted_tile_and_the_headroom_over_the_visible():
    assert room_for(40, 0) == 50 and room_for(40, 70) == 70
    assert wanted_slots(6, 72, 1000, asked=96) >= 6 + 96
