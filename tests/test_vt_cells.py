"""PackedCells without GL: how many slots the small packed levels take, where each class
starts, and the floor the provider reads."""
from __future__ import annotations

from engine.formats import get
from engine.memory.split import MIN_STREAM_SLOTS
from engine.streaming.virtual.cells import PackedCells
from engine.streaming.virtual.tiles import TAIL_CLASS_SHIFT, TAIL_CLASSES, tails_per_slot

BC1 = get("BC1_RGB")


def cells(pinned: list[int], streamed: list[int]) -> PackedCells:
    out = PackedCells(BC1)
    key = 1
    for k, n in enumerate(pinned):
        for _ in range(n):
            out.pin(key, k)
            key += 1
    for k, n in enumerate(streamed):
        for _ in range(n):
            out.stream(k)
    return out


def test_pinned_cells_are_numbered_per_class():
    p = PackedCells(BC1)
    p.pin(10, 2)
    p.pin(11, 2)
    p.pin(12, 0)
    assert p.pinned == {10: 2 << TAIL_CLASS_SHIFT, 11: 2 << TAIL_CLASS_SHIFT | 1, 12: 0}
    assert p.cell_of(p.pinned[11]) == (2, 1)
    assert p.pinned_count == [1, 0, 2, 0]
    assert [p.stream(1), p.stream(1), p.stream(3)] == [True, False, True]


def test_fewest_slots_are_the_pinned_cells_and_one_slot_a_streaming_class():
    per0 = tails_per_slot(BC1, 0)
    p = cells([per0 + 1, 0, 3, 0], [0, 5, 0, 0])
    assert p.fewest_slots() == 2 + 1 + 1  # class 0: two slots; class 1 streams; class 2: one
    assert PackedCells().fewest_slots() == 0  # no format yet: nothing packed
    assert PackedCells().class_slots(100, [0] * 4, [0] * 4, 0) == [0] * TAIL_CLASSES


def test_class_slots_grow_with_what_the_screen_shows_within_the_room():
    per1 = tails_per_slot(BC1, 1)
    p = cells([0, 0, 0, 0], [0, 10 * per1, 0, 0])
    quiet = p.class_slots(1000, [0] * 4, [0] * 4, 0)
    assert quiet == [0, 1, 0, 0]  # a streaming class always has its slot
    shown = p.class_slots(1000, [0, 3 * per1, 0, 0], [0, 4 * per1, 0, 0], 0)
    assert shown == [0, 4, 0, 0]  # what the feedback asks of it
    most = p.class_slots(1000, [0, 30 * per1, 0, 0], [0, 30 * per1, 0, 0], 0)
    assert most == [0, 10, 0, 0]  # never more than all its levels fill
    tight = p.class_slots(1 + 2 + MIN_STREAM_SLOTS + 1, [0, 30 * per1, 0, 0],
                          [0, 30 * per1, 0, 0], whole_pinned=2)
    assert tight == [0, 2, 0, 0]  # cut to what the whole pinned tiles and streaming leave


def test_place_lays_classes_out_from_slot_zero():
    p = cells([5, 0, 30, 0], [0, 0, 4, 0])
    p.place([1, 0, 3, 2])
    assert p.bases == [0, 1, 1, 4] and p.slots == 6
    assert p.held() == [1, 0, 3, 2]
    assert p.capacity == [tails_per_slot(BC1, k) * n for k, n in enumerate([1, 0, 3, 2])]
    per2 = tails_per_slot(BC1, 2)
    assert p.streamed_room(2, 3) == min(4, 3 * per2 - 30)
    assert p.fits([0, 0, 4, 0])
    assert not p.fits([0, 0, 3 * per2 - 29, 0])  # one cell too many for class 2's slots
