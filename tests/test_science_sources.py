"""Chunked sources and the view's plan without GL: typed errors for bad input, levels made
on the fly, cancellable concurrent reads, the level and tile plan, slots, colormaps."""
from __future__ import annotations

import json
import re
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

zarr = pytest.importorskip("zarr")

from science_helpers import pyramid, write_ome_zarr  # noqa: E402

from engine.errors import ImageSourceError, UnsupportedFormatError, UsageError  # noqa: E402
from engine.science.colormaps import lut  # noqa: E402
from engine.science.display import ChannelDisplay, shade  # noqa: E402
from engine.science.plan import (  # noqa: E402
    CoverCache,
    SlotCache,
    Viewport,
    cover,
    level_for,
    max_tiles,
    tile_rect,
    tiles_in,
    visible_tiles,
)
from engine.science.reads import TileReader  # noqa: E402
from engine.science.readers import open_image_source  # noqa: E402
from engine.science.source import LevelInfo, TileKey  # noqa: E402


def test_levels_missing_from_the_file_are_made_tile_by_tile(tmp_path):
    data = np.random.default_rng(1).integers(0, 4000, (1, 700, 530)).astype(np.uint16)
    src = open_image_source(write_ome_zarr(tmp_path / "one.zarr", [data], 3, chunk=256))
    assert src.tile == 256
    assert [lv.shape for lv in src.levels] == [(700, 530), (350, 265), (175, 133)]
    assert [lv.stored for lv in src.levels] == [True, False, False]
    want = pyramid(data, 3)
    for level in (1, 2):
        rows, cols = src.levels[level].grid(src.tile)
        got = np.block([[src.read_tile(level, 0, y, x) for x in range(cols)]
                        for y in range(rows)])
        assert np.array_equal(got, want[level][0])


def _bad_zarr(tmp_path, attrs, dtype="uint16"):
    g = zarr.open_group(str(tmp_path / "bad.zarr"), mode="w", zarr_format=2)
    g.create_array("0", shape=(2, 64, 64), chunks=(1, 64, 64), dtype=dtype)
    g.attrs.update(attrs)
    return str(tmp_path / "bad.zarr")


AXES = [{"name": "c"}, {"name": "y"}, {"name": "x"}]


@pytest.mark.parametrize(("attrs", "field"), [
    ({}, "multiscales"),
    ({"multiscales": []}, "multiscales"),
    ({"multiscales": [{"datasets": [{"path": "9"}], "axes": AXES}]}, "datasets[0].path"),
    ({"multiscales": [{"datasets": "0", "axes": AXES}]}, "datasets"),
    ({"multiscales": [{"datasets": [{"path": "0"}],
                       "axes": [{"name": "c"}, {"name": "z"}, {"name": "x"}]}]}, "lack y"),
    ({"multiscales": [{"datasets": [{"path": "0"}], "axes": AXES[1:]}]}, "do not match"),
])
def test_bad_metadata_is_a_typed_error_naming_the_field(tmp_path, attrs, field):
    with pytest.raises(ImageSourceError, match=re.escape(field)):
        open_image_source(_bad_zarr(tmp_path, attrs))


def test_bad_paths_and_dtypes_are_typed_errors(tmp_path):
    with pytest.raises(ImageSourceError, match="no such file"):
        open_image_source(tmp_path / "missing.zarr")
    with pytest.raises(ImageSourceError, match="no such file"):
        open_image_source(tmp_path / "nothing")
    (tmp_path / "junk.tif").write_bytes(b"not a tiff at all")
    with pytest.raises(ImageSourceError, match="not a readable TIFF"):
        open_image_source(tmp_path / "junk.tif")
    ms = {"multiscales": [{"datasets": [{"path": "0"}], "axes": AXES}]}
    with pytest.raises(UnsupportedFormatError, match="float64"):
        open_image_source(_bad_zarr(tmp_path, ms, dtype="float64"))
    json.loads((tmp_path / "bad.zarr" / ".zattrs").read_text())  # written as zarr v2


class _GatedSource:
    """A source whose reads wait for a gate: what is queued meanwhile can be cancelled."""

    name, channels, tile, dtype = "gated", 1, 4, np.dtype("uint16")
    levels = (LevelInfo((64, 64)),)
    channel_names = ("c",)

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.read: list[TileKey] = []

    def read_tile(self, level, channel, ty, tx):
        self.gate.wait(5)
        self.read.append(TileKey(level, channel, ty, tx))
        if tx == 13:
            raise OSError("connection reset")
        return np.full((4, 4), ty * 100 + tx, np.uint16)

    def close(self) -> None:
        pass


def test_reads_no_longer_wanted_are_dropped_before_they_are_read():
    src = _GatedSource()
    reader = TileReader(src, workers=1)
    try:
        first = [TileKey(0, 0, 0, x) for x in range(6)]
        reader.want(first)
        while not reader._busy:  # the worker holds the first key at the gate
            threading.Event().wait(0.001)
        reader.want([TileKey(0, 0, 1, 1), TileKey(0, 0, 1, 13)])
        src.gate.set()
        assert reader.wait_idle(5)
        got = {k: int(v[0, 0]) for k, v in reader.collect()}
        assert got == {TileKey(0, 0, 0, 0): 0, TileKey(0, 0, 1, 1): 101}
        assert reader.cancelled == 5 and len(src.read) == 3
        assert TileKey(0, 0, 1, 13) in reader.failed  # reported, not retried
        reader.want([TileKey(0, 0, 1, 13)])
        assert reader.pending == 0
    finally:
        reader.close()


LEVELS = (LevelInfo((1000, 1500)), LevelInfo((500, 750)), LevelInfo((250, 375)))


def test_plan_picks_the_level_and_the_tiles_under_the_screen():
    assert level_for(LEVELS, 0.5) == 0 and level_for(LEVELS, 1.0) == 0
    assert level_for(LEVELS, 2.5) == 1 and level_for(LEVELS, 100) == 2
    vp = Viewport(256, 256, 600, 400, 1.0)  # level 0 x 472..728, y 272..528
    tiles = visible_tiles(LEVELS, 256, 0, vp)
    assert sorted(tiles) == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert tiles[0] == (1, 2)  # the tile under the centre first


def test_the_most_tiles_a_screen_meets_bounds_every_position_and_is_reached():
    for level, scale, size in ((0, 1.0, (300, 200)), (1, 2.0, (256, 256)), (0, 0.7, (97, 61)),
                               (2, 4.0, (1000, 900))):
        most = max_tiles(LEVELS, 128, level, Viewport(*size, 0, 0, scale))
        seen = [len(visible_tiles(LEVELS, 128, level, Viewport(*size, cx, cy, scale)))
                for cx in range(0, 1500, 37) for cy in range(0, 1000, 41)]
        assert max(seen) == most


def test_a_missing_tile_is_drawn_from_its_resident_ancestors_clipped():
    key = TileKey(0, 0, 1, 3)  # level-0 x 768..1024, y 256..512
    def pieces(have):
        got = cover(LEVELS, 256, [key], have.__contains__)
        return list(zip(got.keys, map(tuple, got.rects.tolist())))
    assert pieces({TileKey(2, 0, 0, 1)}) == []  # not the tile over it: nothing to draw from
    assert pieces({TileKey(2, 0, 0, 0)}) == [(TileKey(2, 0, 0, 0),
                                              (768.0, 256.0, 1024.0, 512.0))]
    have = {TileKey(2, 0, 0, 0), TileKey(2, 0, 0, 1), TileKey(1, 0, 0, 1)}
    assert pieces(have) == [(TileKey(1, 0, 0, 1), (768.0, 256.0, 1024.0, 512.0))]
    assert pieces(set()) == []


def _walk(levels, tile, key, resident):
    """The reference: one tile, a level at a time, each coarser tile over it asked."""
    rect = tile_rect(levels, tile, key.level, key.ty, key.tx)
    for level in range(key.level + 1, len(levels)):
        keys = [TileKey(level, key.channel, ty, tx)
                for ty, tx in tiles_in(levels, tile, level, rect)]
        if keys and all(resident(k) for k in keys):
            out = []
            for k in keys:
                r = tile_rect(levels, tile, level, k.ty, k.tx)
                c = (max(rect[0], r[0]), max(rect[1], r[1]), min(rect[2], r[2]),
                     min(rect[3], r[3]))
                if c[0] < c[2] and c[1] < c[3]:
                    out.append((k, c))
            return out
    return []


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([(1000, 1500, 2), (1000, 1500, 3), (777, 2049, 2), (4096, 4096, 2)]),
       st.sampled_from([64, 100, 256]), st.integers(0, 2**32 - 1), st.floats(0.0, 1.0))
def test_many_missing_tiles_are_covered_as_one_at_a_time(pyr, tile, seed, share):
    """Every missing tile of several channels and levels gets the pieces the one-tile walk
    gives, in the order asked, whatever is resident (pyramids of 2x and 3x steps)."""
    h, w, step = pyr
    levels = [LevelInfo((h, w))]
    while min(levels[-1].shape) > tile // 2 and len(levels) < 6:
        y, x = levels[-1].shape
        levels.append(LevelInfo((-(-y // step), -(-x // step))))
    rng = np.random.default_rng(seed)
    every = [TileKey(lv, ch, ty, tx) for lv, info in enumerate(levels) for ch in range(3)
             for ty in range(info.grid(tile)[0]) for tx in range(info.grid(tile)[1])]
    have = {k for k in every if rng.random() < share}
    missing = [k for k in every if k not in have and k.level < len(levels) - 1]
    asked = [missing[i] for i in rng.permutation(len(missing))[:200]]
    pieces = cover(levels, tile, asked, have.__contains__)
    got = list(zip(pieces.keys, map(tuple, pieces.rects.tolist())))
    assert got == [piece for k in asked for piece in _walk(levels, tile, k,
                                                            have.__contains__)]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_covers_kept_between_frames_equal_covers_asked_again(seed):
    """Frames of a view that loads and evicts tiles at every level: the kept answers are
    always those `cover` gives when asked afresh (a coarse tile that came in, or one that
    went, is seen)."""
    rng = np.random.default_rng(seed)
    levels = [LevelInfo((1000, 1500)), LevelInfo((500, 750)), LevelInfo((250, 375)),
              LevelInfo((125, 188))]
    every = [TileKey(lv, ch, ty, tx) for lv, info in enumerate(levels) for ch in range(2)
             for ty in range(info.grid(100)[0]) for tx in range(info.grid(100)[1])]
    slots, covers = SlotCache(int(rng.integers(4, 60))), CoverCache()
    for _ in range(12):
        slots.new_frame()
        for i in rng.choice(len(every), int(rng.integers(0, 12)), replace=False):
            slots.place(every[i])
        level = int(rng.integers(0, 3))
        asked = [k for k in every if k.level == level and k not in slots]
        asked = [asked[i] for i in rng.permutation(len(asked))[:40]]
        keys, rects = covers.cover(levels, 100, asked, slots)
        fresh = cover(levels, 100, asked, slots.__contains__)
        assert keys == fresh.keys and rects == [tuple(r) for r in fresh.rects.tolist()]


def test_slots_evict_the_least_recently_used_never_one_drawn_this_frame():
    cache = SlotCache(2)
    a, b, c = (TileKey(0, 0, 0, x) for x in range(3))
    assert {cache.place(a), cache.place(b)} == {0, 1}
    assert cache.place(c) is None  # both used this frame
    cache.new_frame()
    cache.use(a)
    assert cache.place(c) == cache.slot(c) and b not in cache and cache.evictions == 1


def test_a_resized_slot_cache_keeps_the_most_recently_used_tiles():
    cache = SlotCache(4)
    keys = [TileKey(0, 0, 0, x) for x in range(4)]
    for k in keys:
        cache.place(k)
    cache.new_frame()
    cache.use(keys[0])  # order now 1, 2, 3, 0
    grown, moves = cache.resized(6)
    assert grown.slots == 6 and len(grown) == 4 and len(moves) == 4
    assert sorted(a for a, _ in moves) == [0, 1, 2, 3]
    assert {cache.slot(k): grown.slot(k) for k in keys} == dict(moves)
    shrunk, moves = cache.resized(2)
    assert list(shrunk._where) == [keys[3], keys[0]]  # the two most recent, in order
    assert moves == [(cache.slot(keys[3]), shrunk.slot(keys[3])),
                     (cache.slot(keys[0]), shrunk.slot(keys[0]))]
    shrunk.new_frame()
    assert shrunk.place(keys[1]) == shrunk.slot(keys[1]) and keys[3] not in shrunk  # LRU out


def test_colormaps_and_displays_check_their_values():
    assert lut("gray")[128].tolist() == [128, 128, 128]
    assert lut("#ff0000")[255].tolist() == [255, 0, 0] and lut("red")[0].tolist() == [0, 0, 0]
    assert lut("viridis").shape == (256, 3)
    with pytest.raises(UsageError, match="unknown"):
        lut("no-such-map")
    for bad in ({"low": 5, "high": 5}, {"low": 0, "high": float("nan")},
                {"low": 0, "high": 1, "gamma": 0}, {"low": 0, "high": 1, "colormap": "x"}):
        with pytest.raises(UsageError):
            ChannelDisplay(**bad)
    v = np.array([[0, 100, 200]], np.uint16)
    got = shade([v, v], [ChannelDisplay(0, 200, colormap="red"),
                         ChannelDisplay(0, 200, colormap="green")])
    assert got[0].tolist() == [[0, 0, 0], [128, 128, 0], [255, 255, 0]]


@pytest.mark.parametrize("wanted", [1, 2, 5, 10, 99, 325, 1000, 4096])
def test_the_cache_grid_holds_what_is_wanted_within_what_is_allowed(wanted):
    from engine.science.gpu import slot_grid

    sx, sy = slot_grid(wanted, 10 * wanted, 256, 16384)
    assert wanted <= sx * sy < wanted + sx and abs(sx - sy) <= 1  # a row at most over
    sx, sy = slot_grid(wanted, wanted, 256, 16384)  # allowed exactly: over is not allowed
    assert sx * sy <= wanted
    sx, sy = slot_grid(wanted, 10 * wanted, 256, 1024)  # 4 x 4 slots at most
    assert max(sx, sy) <= 4 and sx * sy >= min(wanted, 16)
