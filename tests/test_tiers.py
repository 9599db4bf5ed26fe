"""Resident bytes by priority tier: the policy's split (pure), and where it is shown (the
HUD, the timeline picture)."""
from __future__ import annotations

import numpy as np

from engine.diagnostics.hud import Hud
from engine.diagnostics.report import build_report
from engine.diagnostics.timeline import _Pillow
from engine.streaming.levels.state import (
    StreamerState,
    TextureSpec,
    TextureTable,
    resident_by_tier,
    resident_bytes,
)

# Four 256^2 RGBA8 textures with 9 levels, tails at level 2 (64 texels)
TABLE = TextureTable.build([TextureSpec("RGBA8", 256, 256, 9)] * 4)


def _level(t: int, lvl: int) -> int:
    return int(TABLE.storage[t, lvl] - TABLE.storage[t, lvl + 1])


def test_levels_fall_in_the_planners_tiers():
    st = StreamerState.initial(TABLE)
    st.resident_base = np.array([0, 0, 1, 2], np.int32)
    st.target = np.array([1, 2, 1, 2], np.int32)
    st.prefetch_target = np.array([0, 2, 2, 2], np.int32)  # tail (2) = nothing predicted
    st.visible = np.array([True, False, True, False])
    st.last_visible = np.array([5, 3, 5, -1], np.int64)
    tiers = resident_by_tier(st, TABLE)
    tail = int(TABLE.storage[0, 2])
    # 0: visible from its target (level 1) down; level 0 is finer than the target but
    #    predicted (prefetch target 0)
    # 1: not visible, nothing predicted, seen before: all recent
    # 2: visible, resident exactly at its target
    # 3: never seen, only its tail: none
    assert tiers == {"visible": int(TABLE.storage[0, 1]) + int(TABLE.storage[2, 1]),
                     "prefetch": _level(0, 0), "recent": int(TABLE.storage[1, 0]),
                     "none": tail}
    assert sum(tiers.values()) == resident_bytes(st, TABLE)


def test_before_the_first_frame_everything_is_recent():
    st = StreamerState.initial(TABLE)
    assert resident_by_tier(st, TABLE) == {"visible": 0, "prefetch": 0,
                                           "recent": resident_bytes(st, TABLE), "none": 0}


def _frames(n: int = 30) -> list[dict]:
    return [{"frame": i, "ms": 5.0, "total_bytes": 1000, "budget_bytes": 2000,
             "by_category": {"texture.streamed": 800, "target": 200}, "render_scale": 1.0,
             "texture_resident_bytes": 800, "texture_wanted_bytes": 900, "pool_bytes": 1000,
             "resident_by_tier": {"visible": 500 + i, "prefetch": 200, "recent": 100 - i,
                                  "none": 0}, "cache_slots": 64, "cache_slots_used": 60}
            for i in range(n)]


def test_the_timeline_picture_has_a_tier_panel():
    pic = _Pillow(build_report(_frames(), leaked_objects=0), (900, 600))
    top, bottom = pic.panels["tiers"]
    assert pic.panels["memory"][1] < top < bottom
    old = [{k: v for k, v in f.items() if k != "resident_by_tier"} for f in _frames()]
    assert "tiers" not in _Pillow(build_report(old, leaked_objects=0), (900, 600)).panels


def test_hud_shows_tiers_and_free_room(device):
    hud = Hud(device)
    try:
        quads = len(hud.layout((320, 240), {"frame": 1, "ms": 3.0, **_frames(1)[0]}).quads)
        plain = {k: v for k, v in _frames(1)[0].items()
                 if k not in ("resident_by_tier", "cache_slots", "cache_slots_used")}
        fewer = len(hud.layout((320, 240), {"frame": 1, "ms": 3.0, **plain}).quads)
    finally:
        hud.release()
    # the tier bar (3 segments) and its figures, and the cache's free slots, drawn
    assert quads > fewer + len("vis 500 B  pre 200 B  rec 100 B")


def test_tiers_always_add_up_to_what_is_resident():
    rng = np.random.default_rng(7)
    table = TextureTable.build([TextureSpec("BC7", 512, 256, 10)] * 25
                               + [TextureSpec("BC7", 2048, 2048, 12)] * 25)
    for _ in range(200):
        st = StreamerState.initial(table)
        tail = table.tail_base
        st.resident_base = rng.integers(0, tail + 1).astype(np.int32)
        st.target = rng.integers(0, tail + 1).astype(np.int32)
        st.prefetch_target = rng.integers(0, tail + 1).astype(np.int32)
        st.visible = rng.random(50) < 0.5
        st.last_visible = np.where(st.visible | (rng.random(50) < 0.5), 1, -1)
        tiers = resident_by_tier(st, table)
        assert min(tiers.values()) >= 0
        assert sum(tiers.values()) == resident_bytes(st, table)
