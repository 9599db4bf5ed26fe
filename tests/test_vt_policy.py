"""The virtual-texture residency policy (pure: no GL, no files)."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import BudgetError
from engine.streaming.virtual.keys import pack as pack_feedback
from engine.streaming.virtual.policy import Tier, TilePolicy


def key(vt, level, x, y):
    return int(pack_feedback(np.array([vt]), np.array([level]), np.array([x]),
                             np.array([y]))[0])


def plan(policy, frame, wanted):
    keys = np.array(sorted(wanted), np.uint64)
    tiers = np.array([wanted[int(k)] for k in keys], np.int64)
    return policy.plan(frame, keys, tiers)


def test_missing_tiles_come_visible_first_then_coarser_first():
    p = TilePolicy(8)
    top = key(0, 3, 0, 0)
    p.pin(top)
    wanted = {key(0, 0, 1, 1): Tier.VISIBLE, key(0, 1, 0, 0): Tier.VISIBLE,
              key(0, 2, 0, 0): Tier.PREFETCH, top: Tier.PREFETCH}
    keys, prio = plan(p, 1, wanted)
    assert keys.tolist() == [key(0, 1, 0, 0), key(0, 0, 1, 1), key(0, 2, 0, 0)]
    assert list(prio) == sorted(prio, reverse=True)


def test_pinned_tiles_are_never_evicted_and_visible_never_evicts_visible():
    p = TilePolicy(3, hold_frames=2)
    pinned = key(0, 2, 0, 0)
    p.pin(pinned)
    a, b, c = key(0, 0, 0, 0), key(0, 0, 1, 0), key(0, 0, 2, 0)
    plan(p, 1, {a: Tier.VISIBLE, b: Tier.VISIBLE, c: Tier.VISIBLE})
    assert p.admit(a) is not None and p.admit(b) is not None
    assert p.admit(c) is None  # full of visible + pinned tiles: c waits, nothing thrashes
    # Later frames want only c: after the hold, a and b are RECENT and c takes a slot.
    for frame in (2, 3, 4, 5):
        plan(p, frame, {c: Tier.VISIBLE})
    adm = p.admit(c)
    assert adm is not None and adm.evicted in (a, b)
    assert p.is_resident(pinned) and p.is_resident(c)
    assert p.evict(pinned) is None


def test_prefetch_evicts_only_recent_tiles():
    p = TilePolicy(2, hold_frames=0)
    p.pin(key(0, 1, 0, 0))
    vis, pre = key(0, 0, 0, 0), key(0, 0, 1, 0)
    plan(p, 1, {vis: Tier.VISIBLE})
    assert p.admit(vis).evicted == 0
    plan(p, 1, {vis: Tier.VISIBLE, pre: Tier.PREFETCH})
    assert p.admit(pre) is None  # vis is visible this frame
    plan(p, 3, {pre: Tier.PREFETCH})  # vis unseen for 2 frames: RECENT
    assert p.admit(pre).evicted == vis


def test_hysteresis_keeps_a_tile_missing_from_one_readback():
    """A tile missing from one readback keeps its place against prefetch (the feedback is
    sub-sampled), but gives way to a tile the newest feedback shows (a camera cut)."""
    p = TilePolicy(2, hold_frames=6, grace_frames=2)
    p.pin(key(0, 1, 0, 0))
    a, b, c = key(0, 0, 0, 0), key(0, 0, 1, 0), key(0, 0, 0, 1)
    plan(p, 10, {a: Tier.VISIBLE})
    p.admit(a)
    plan(p, 12, {c: Tier.VISIBLE})  # a missing from one readback: within the grace
    assert p.admit(c) is None and p.is_resident(a)
    plan(p, 14, {b: Tier.PREFETCH})  # beyond the grace, within the hold
    assert p.admit(b) is None and p.is_resident(a)
    plan(p, 14, {c: Tier.VISIBLE})
    assert p.admit(c).evicted == a


def test_budget_errors_and_resize():
    with pytest.raises(BudgetError):
        TilePolicy(0)
    p = TilePolicy(2)
    p.pin(key(0, 4, 0, 0))
    p.pin(key(1, 4, 0, 0))
    with pytest.raises(BudgetError):
        p.pin(key(2, 4, 0, 0))
    moved = p.resize(5)
    assert sorted(moved.values()) == [0, 1] and p.slots == 5
    with pytest.raises(BudgetError):
        p.resize(1)


def test_random_streams_keep_invariants():
    rng = np.random.default_rng(7)
    for trial in range(20):
        slots = int(rng.integers(4, 40))
        p = TilePolicy(slots, hold_frames=int(rng.integers(0, 5)))
        pins = [key(v, 5, 0, 0) for v in range(int(rng.integers(1, 4)))]
        for k in pins:
            p.pin(k)
        for frame in range(30):
            wanted = {key(int(rng.integers(0, 3)), int(rng.integers(0, 5)),
                          int(rng.integers(0, 8)), int(rng.integers(0, 8))):
                      Tier(int(rng.integers(0, 2))) for _ in range(int(rng.integers(0, 30)))}
            keys, _ = plan(p, frame, wanted)
            for k in keys[: int(rng.integers(0, 10))]:
                p.admit(int(k))
            assert p.occupied <= slots
            assert all(p.is_resident(k) for k in pins)
            assert len(set(p.where.values())) == p.occupied
            assert all(int(p.slot_key[s]) == k for k, s in p.where.items())


def test_batch_admission_matches_one_by_one_admission():
    """admit_many gives the same residency as admitting the same arrivals one by one."""
    rng = np.random.default_rng(11)
    for _ in range(30):
        slots = int(rng.integers(3, 25))
        a, b = TilePolicy(slots, hold_frames=2), TilePolicy(slots, hold_frames=2)
        for p in (a, b):
            p.pin(key(0, 5, 0, 0))
        for frame in range(12):
            wanted = {key(0, int(rng.integers(0, 5)), int(rng.integers(0, 6)),
                          int(rng.integers(0, 6))): Tier(int(rng.integers(0, 3)))
                      for _ in range(int(rng.integers(0, 20)))}
            ka, _ = plan(a, frame, wanted)
            kb, _ = plan(b, frame, wanted)
            assert ka.tolist() == kb.tolist()
            got_a = [a.admit(int(k)) for k in ka]
            got_b = b.admit_many([int(k) for k in kb])
            assert [g is None for g in got_a] == [g is None for g in got_b]
            assert set(a.where) == set(b.where)
