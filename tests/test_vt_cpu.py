"""The rewritten per-frame CPU path of virtual texturing (pure: no GL) gives what the plain
definitions give: unique keys and pixel counts, every ancestor with the right tier and
pixels, incremental page-table updates equal to a full recompute, and the same plan as the
pre-rewrite code gave (its outputs recorded in tests/data/vt_cpu_oracle.npz); the replay
runs and agrees with itself."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from lab.vt_cpu import Recording, run_replay
from engine.formats import get
from engine.streaming.virtual.keys import MAX_LEVELS
from engine.streaming.virtual.keys import pack as pack_feedback
from engine.streaming.virtual.keys import unpack as unpack_feedback
from engine.streaming.virtual.pagetable import TABLE_WIDTH, PageTable
from engine.streaming.virtual.policy import Tier, TilePolicy
from engine.streaming.virtual.requests import expand_requests, reduce_feedback
from engine.streaming.virtual.tiles import (
    VirtualLayout,
    pack_entry,
    Wrap,
    virtual_levels,
)

# Tile-contiguous copies (the default storage) go to a cache folder of each test's own.
pytestmark = pytest.mark.usefixtures("isolated_cache")

BC7 = get("BC7")
SIZES = [(1024, 1024), (2048, 512), (512, 512)]
#: What the pre-rewrite code (a full page-table recompute, the isin-based plan) gave on the
#: inputs of the two tests below, recorded when it was removed from the package.
ORACLE = dict(np.load(Path(__file__).parent / "data" / "vt_cpu_oracle.npz"))


def _layouts(table: PageTable) -> list[VirtualLayout]:
    out = []
    for w, h in SIZES:
        lay = VirtualLayout(BC7, w, h, virtual_levels(BC7, w, h, 12), Wrap.REPEAT)
        table.add(lay)
        out.append(lay)
    return out


def _random_keys(rng, layouts, n) -> np.ndarray:
    keys = []
    for _ in range(n):
        vt = int(rng.integers(len(layouts)))
        lay = layouts[vt]
        lvl = int(rng.integers(lay.levels))
        gx, gy = lay.grid(lvl)
        keys.append(int(pack_feedback(vt, lvl, int(rng.integers(gx)), int(rng.integers(gy)))))
    return np.array(keys, np.uint64)


def _blocky_image(rng, palette: np.ndarray, shape=(90, 160)) -> np.ndarray:
    """Runs of equal keys (as a feedback pass gives), with empty (0) pixels between."""
    cells = rng.integers(0, palette.size + 1, (shape[0] // 6 + 1, shape[1] // 5 + 1))
    img = np.where(cells == palette.size, 0, palette[np.minimum(cells, palette.size - 1)])
    return np.repeat(np.repeat(img, 6, 0), 5, 1)[:shape[0], :shape[1]].astype(np.uint64)


def test_reduce_feedback_gives_each_key_and_its_pixel_count():
    rng = np.random.default_rng(3)
    layouts = _layouts(PageTable())
    for _ in range(5):
        img = _blocky_image(rng, _random_keys(rng, layouts, 40))
        keys, counts = reduce_feedback(img)
        want_k, want_c = np.unique(img[img != 0], return_counts=True)
        assert keys.dtype == np.uint64 and counts.dtype == np.int64
        assert keys.tolist() == want_k.tolist() and counts.tolist() == want_c.tolist()
    empty = reduce_feedback(np.zeros((4, 4), np.uint64))
    assert empty[0].size == 0 and empty[1].size == 0


def test_expand_requests_adds_every_ancestor_with_tier_and_pixels():
    rng = np.random.default_rng(5)
    table = PageTable()
    layouts = _layouts(table)
    levels = np.array([lay.levels for lay in layouts], np.int64)
    grids = np.ones((len(layouts), MAX_LEVELS, 2), np.int64)
    for i, lay in enumerate(layouts):
        for lvl in range(lay.levels):
            grids[i, lvl] = lay.grid(lvl)
    keys = np.unique(_random_keys(rng, layouts, 120))
    pixels = rng.integers(1, 50, keys.size)
    # The plain definition: walk each key up to its texture's coarsest level.
    want: dict[int, list[int]] = {}
    for k, px in zip(keys.tolist(), pixels.tolist(), strict=True):
        vt, lvl, x, y = (int(v) for v in unpack_feedback(np.uint64(k)))
        for d in range(levels[vt] - lvl):
            a = int(pack_feedback(vt, lvl + d, x >> d, y >> d))
            tier = Tier.VISIBLE if d <= 1 else Tier.PREFETCH
            t, p = want.get(a, [Tier.RECENT, 0])
            want[a] = [min(t, tier), p + px]
    req = expand_requests(keys, pixels, levels, grids)
    assert req.keys.tolist() == sorted(want)
    assert req.tiers.tolist() == [int(want[k][0]) for k in req.keys.tolist()]
    assert req.pixels.tolist() == [want[k][1] for k in req.keys.tolist()]
    # Keys of a texture that does not exist, a level past the chain or a tile outside the
    # grid are dropped, and the rest still expand.
    lay = layouts[1]
    bad = np.array([int(pack_feedback(7, 0, 0, 0)), int(pack_feedback(1, lay.levels, 0, 0)),
                    int(pack_feedback(1, 0, 0, lay.grid(0)[1])), int(keys[0])], np.uint64)
    got = expand_requests(bad, np.ones(4, np.int64), levels, grids)
    vt0, lvl0, _, _ = (int(v) for v in unpack_feedback(keys[0]))
    assert len(got) == levels[vt0] - lvl0 and int(keys[0]) in got.keys.tolist()


def _dense_words(table: PageTable, vt: int) -> np.ndarray:
    """Texture `vt`'s entries as the shader reads them, in a dense table's order."""
    return np.concatenate([grid.ravel() for grid in table.dense(vt)])


def _recorded_entries(words: np.ndarray, layouts: list[VirtualLayout], vt: int) -> np.ndarray:
    """Texture `vt`'s entries in the recorded dense table: a directory row and one chunk,
    then per texture 20 descriptor words and its entries."""
    at = 2 * 2048
    for lay in layouts[:vt]:
        at += 20 + lay.entry_count
    return words[at + 20:at + 20 + layouts[vt].entry_count]


def test_incremental_page_table_equals_a_full_recompute():
    """The sparse table, updated tile by tile, reads (through its level words, as the
    shader does) exactly what the recorded dense full recompute held, and every word it
    changed is inside a rectangle marked for upload."""
    rng = np.random.default_rng(11)
    inc = PageTable()
    full = ORACLE["table_words"]  # the dense full recompute's words after each step
    layouts = _layouts(inc)
    resident = [{(lay.levels - 1, 0, 0): 1000 + i} for i, lay in enumerate(layouts)]
    for vt in range(len(layouts)):
        inc.set_residency(vt, resident[vt])
    inc.take_dirty()
    next_slot = 0
    for step in range(150):
        vt = int(rng.integers(len(layouts)))
        lay = layouts[vt]
        res = resident[vt]
        for _ in range(int(rng.integers(1, 6))):  # a few changes per call, mixed
            op = rng.random()
            movable = [t for t in res if t[0] != lay.levels - 1]
            if op < 0.3 and movable:
                del res[movable[int(rng.integers(len(movable)))]]
            elif op < 0.4 and movable:  # a tile moves slot (evict + admit of one key)
                res[movable[int(rng.integers(len(movable)))]] = next_slot
                next_slot += 1
            else:
                lvl = int(rng.integers(lay.levels - 1))
                gx, gy = lay.grid(lvl)
                res[(lvl, int(rng.integers(gx)), int(rng.integers(gy)))] = next_slot
                next_slot += 1
        before = inc.words.copy()
        inc.set_residency(vt, res)
        for v in range(len(layouts)):
            assert np.array_equal(_dense_words(inc, v),
                                  _recorded_entries(full[step], layouts, v)), (step, v)
        # blocks only for levels with a resident tile (and the coarsest)
        assert inc.level_blocks(vt) == sorted({lvl for lvl, _, _ in res})
        grown = inc.words.size > before.size
        changed = np.flatnonzero(before != inc.words[:before.size])
        marked = np.zeros(inc.words.size, bool)
        for r0, n, c0, w in inc.take_dirty():
            for r in range(r0, r0 + n):
                marked[r * TABLE_WIDTH + c0:r * TABLE_WIDTH + c0 + w] = True
        assert marked[changed].all() and (not grown or marked[before.size:inc.used].any())
    # A texture whose coarsest tile moves is recomputed, and still agrees.
    resident[0][(layouts[0].levels - 1, 0, 0)] = 4242
    inc.set_residency(0, resident[0])
    assert np.array_equal(_dense_words(inc, 0), _recorded_entries(full[-1], layouts, 0))
    # Holes left by levels given back are compacted away; lookups do not change.
    for vt, lay in enumerate(layouts):
        inc.set_residency(vt, {(lay.levels - 1, 0, 0): 1000 + vt})
    used = inc.used
    inc.compact()
    assert inc.used < used and inc.used == inc.live and not inc.wants_compaction()
    for vt, lay in enumerate(layouts):
        assert (_dense_words(inc, vt) == pack_entry(1000 + vt, lay.levels - 1)).all()


def test_plan_matches_the_pre_rewrite_plan():
    """Same requests and the same recency bookkeeping as the pre-rewrite isin-based plan
    (recorded), frame after frame, with the same tiles arriving in between (a cache large
    enough that no visible tile has to displace another), and for keys handed in unsorted.
    Only the order within a tier differs: the live plan ranks by screen loss (pixels first),
    the recorded one coarser first, so the recorded priorities no longer apply and the tiles
    that arrive are the recorded plan's first ones."""
    rng = np.random.default_rng(17)
    layouts = _layouts(PageTable())
    new = TilePolicy(400, max_requests=64)
    new.pin(int(pack_feedback(0, layouts[0].levels - 1, 0, 0)))
    ends = np.cumsum(ORACLE["plan_counts"])
    admit_ends = np.cumsum(ORACLE["plan_admit_counts"])
    for frame in range(1, 30):
        i = frame - 1
        old_keys = ORACLE["plan_keys"][ends[i] - ORACLE["plan_counts"][i]:ends[i]]
        admits = ORACLE["plan_admits"][admit_ends[i] - ORACLE["plan_admit_counts"][i]:
                                       admit_ends[i]].tolist()
        keys = np.unique(_random_keys(rng, layouts, 60))
        tiers = rng.integers(0, 2, keys.size)
        pixels = rng.integers(1, 99, keys.size)
        if frame % 3 == 0:  # unsorted input: the plan sorts it itself
            perm = rng.permutation(keys.size)
            keys, tiers, pixels = keys[perm], tiers[perm], pixels[perm]
        got_new = new.plan(frame, keys, tiers, pixels)
        assert sorted(got_new[0].tolist()) == sorted(old_keys.tolist())
        for name in ("current", "last_wanted", "last_visible", "slot_key"):
            assert np.array_equal(getattr(new, name), ORACLE[f"plan_{name}"][i]), (frame, name)
        assert int(new.tier_of(int(keys[0]))) == ORACLE["plan_tier_of_first"][i]
        arriving = old_keys[:20].tolist()
        assert [[-1, -1] if a is None else [a.slot, a.evicted]
                for a in new.admit_many(arriving)] == admits


def test_replay_reports_the_cpu_path_and_keeps_the_table_exact():
    rng = np.random.default_rng(23)
    layouts = _layouts(PageTable())
    palettes = [_random_keys(rng, layouts, 30) for _ in range(4)]
    images = [None] + [_blocky_image(rng, palettes[(f // 5) % 4]) for f in range(19)]
    rec = Recording(images, layouts, slots=48)
    res = run_replay(rec, max_uploads=8)
    row = res.rows[0]
    assert row["frames"] == 20 and row["feedback_images"] == 19
    assert row["feedback_size"] == "160x90"
    assert row["table_matches_full_recompute"] is True
    assert row["cpu_ms_p50"] > 0 and math.isfinite(row["cpu_ms_p95"])
    # the sum's mean is the parts' means added (each frame's figure is their sum)
    assert row["cpu_ms_mean"] == pytest.approx(
        row["feedback_ms_mean"] + row["table_ms_mean"], abs=2e-3)
    # the same frames as the GPU reduction's unordered lists ask for the same tiles
    assert row["gpu_list_requests_identical"] is True
    assert row["gpu_list_cpu_ms_p50"] > 0


def test_scale_wall_plans_from_the_feedback_and_keeps_the_table_exact():
    """lab.vt_scale's wall: frames over a few thousand registered textures fill
    the cache with what the feedback showed, and the incrementally kept page table equals
    one rebuilt from the final residency (each texture's entries recomputed in full)."""
    from lab.vt_scale import Wall, feedback_image, flight
    from engine.streaming.virtual.pagetable import TABLE_WIDTH, PageTable
    wall = Wall(3000, 256, 300)
    for f, (cx, cy, across, dx, dy, k) in enumerate(flight(30, seed=4)):
        image = feedback_image(wall.side, wall.count, 256, (480, 270),
                               cx * wall.side + dx * k / 20, cy * wall.side + dy * k / 20,
                               across)
        wall.step(f, image, 64)
    assert wall.policy.occupied > 50
    fresh = PageTable()
    for vt, lay in enumerate(wall.table.layouts):
        fresh.add(lay)
        fresh.set_residency(vt, wall.resident[vt])
    # textures holding only pinned levels have no block but the coarsest one's
    streamed = [vt for vt in range(wall.count) if len(wall.table.level_blocks(vt)) > 1]
    assert streamed and all(np.array_equal(_dense_words(fresh, vt), _dense_words(wall.table, vt))
                            for vt in streamed)
    assert all(fresh.level_blocks(vt) == wall.table.level_blocks(vt) for vt in range(wall.count))
    # The sparse table holds blocks only where tiles are resident: far below a dense one.
    dense_words = sum(20 + lay.entry_count for lay in wall.table.layouts)
    assert wall.table.live < dense_words / 2
