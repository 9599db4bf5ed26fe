"""Tile geometry, borders, page table, feedback reduction and tile reads (pure, no GL)."""
from __future__ import annotations

import numpy as np
import pytest

from engine.formats import get
from engine.memory.sizes import mip_dims
from engine.streaming.virtual.io import TileSource
from engine.streaming.virtual.keys import pack as pack_feedback, unpack as unpack_feedback
from engine.streaming.virtual.pagetable import CHUNK_TEXTURES, DIRECTORY_WORDS, PageTable
from engine.streaming.virtual.policy import Tier
from engine.streaming.virtual.requests import expand_requests, reduce_feedback
from engine.streaming.virtual.tiles import (
    SLOT_TEXELS,
    VirtualLayout,
    Wrap,
    column_runs,
    cut_tile,
    level_blocks,
    slot_bytes,
    unpack_entry,
    virtual_levels,
)
from engine.textures import open as open_texture
from engine.textures.ktx2_write import write_ktx2

BC7 = get("BC7")


def _numbered_level(fmt, w, h):
    """A level whose every block holds its own (row, col) in its first 4 bytes."""
    nbx, nby = -(-w // fmt.block_w), -(-h // fmt.block_h)
    blocks = np.zeros((nby, nbx, fmt.block_bytes), np.uint8)
    r, c = np.mgrid[0:nby, 0:nbx]
    blocks[..., 0], blocks[..., 1] = r & 255, r >> 8
    blocks[..., 2], blocks[..., 3] = c & 255, c >> 8
    return blocks.tobytes()


def _rc(slot: bytes, fmt):
    b = np.frombuffer(slot, np.uint8).reshape(SLOT_TEXELS // 4, SLOT_TEXELS // 4,
                                              fmt.block_bytes).astype(np.int64)
    return b[..., 0] + (b[..., 1] << 8), b[..., 2] + (b[..., 3] << 8)


def test_geometry_of_a_2048_bc7_texture():
    lay = VirtualLayout(BC7, 2048, 2048, virtual_levels(BC7, 2048, 2048, 12), Wrap.REPEAT)
    assert lay.levels == 10  # 2048 .. 4 texels: the last level at least one block
    assert [lay.grid(i) for i in range(lay.levels)] == \
        [(16, 16), (8, 8), (4, 4), (2, 2)] + [(1, 1)] * 6
    assert lay.entry_count == 256 + 64 + 16 + 4 + 6
    starts = lay.level_starts()  # the record order of a tiled copy
    assert starts[0] == 0 and starts[1] == 256 and starts[-1] == lay.entry_count - 1
    assert slot_bytes(BC7) == 136 * 136  # one byte per texel
    npot = VirtualLayout(BC7, 1000, 600, 3, Wrap.CLAMP)  # any size: GL's level sizes
    assert [npot.grid(i) for i in range(3)] == [(8, 5), (4, 3), (2, 2)]
    wide = VirtualLayout(BC7, 65536, 65536, 15, Wrap.CLAMP)  # 512 tiles a side
    assert wide.grid(0) == (512, 512)
    with pytest.raises(ValueError):  # more tiles along a side than a key can name
        VirtualLayout(BC7, 128 * 4096 + 1, 64, 3, Wrap.CLAMP)


@pytest.mark.parametrize("wrap", [Wrap.REPEAT, Wrap.CLAMP])
def test_borders_come_from_the_neighbouring_blocks(wrap):
    lay = VirtualLayout(BC7, 512, 256, virtual_levels(BC7, 512, 256, 10), wrap)
    data = _numbered_level(BC7, 512, 256)  # 128 x 64 blocks, tiles 4 x 2
    nbx, nby = 128, 64
    for x, y in [(0, 0), (3, 1), (1, 0), (2, 1)]:
        rows, cols = _rc(cut_tile(lay, 0, x, y, data), BC7)
        for i in range(34):
            for j in (0, 1, 16, 32, 33):
                want_r, want_c = y * 32 - 1 + i, x * 32 - 1 + j
                if wrap == Wrap.REPEAT:
                    want_r, want_c = want_r % nby, want_c % nbx
                else:
                    want_r, want_c = min(max(want_r, 0), nby - 1), min(max(want_c, 0), nbx - 1)
                assert (rows[i, j], cols[i, j]) == (want_r, want_c)


def test_small_levels_are_one_tile_with_a_zero_tail():
    lay = VirtualLayout(BC7, 256, 256, virtual_levels(BC7, 256, 256, 9), Wrap.REPEAT)
    w, h = mip_dims(256, 256, 2)  # 64 x 64: 16 x 16 blocks
    slot = cut_tile(lay, 2, 0, 0, _numbered_level(BC7, w, h))
    b = np.frombuffer(slot, np.uint8).reshape(34, 34, 16)
    rows, cols = _rc(slot, BC7)
    assert cols[1, 1:17].tolist() == list(range(16)) and cols[1, 0] == 15 and cols[1, 17] == 0
    assert rows[0, 5] == 15 and rows[17, 5] == 0
    assert not b[18:].any() and not b[:, 18:].any()


def test_column_runs():
    assert column_runs(np.array([127, 0, 1, 2, 3, 0])) == [(0, 127, 1), (1, 0, 4), (5, 0, 1)]
    assert column_runs(np.array([5, 6, 7])) == [(0, 5, 3)]


def test_page_table_points_missing_tiles_at_the_finest_resident_ancestor():
    table = PageTable()
    lay = VirtualLayout(BC7, 1024, 1024, virtual_levels(BC7, 1024, 1024, 11), Wrap.REPEAT)
    vt = table.add(lay)
    top = lay.levels - 1
    table.set_residency(vt, {(top, 0, 0): 7})
    for lvl in range(lay.levels):
        gx, gy = lay.grid(lvl)
        slots, levels = unpack_entry(table.lookup(vt, lvl, gx - 1, gy - 1))
        assert (int(slots), int(levels)) == (7, top)
    # Only the coarsest level holds entries: the descriptor (2 words, a level word each)
    # and one entry, where a dense table held 20 descriptor words and 90 entries.
    assert lay.entry_count == 90
    assert table.level_blocks(vt) == [top]
    assert table.live == DIRECTORY_WORDS + CHUNK_TEXTURES + 2 + lay.levels + 1
    table.take_dirty()
    # Level 1 tile (2, 3) and level 0 tile (1, 1) resident: both levels get blocks.
    n = table.set_residency(vt, {(top, 0, 0): 7, (1, 2, 3): 11, (0, 1, 1): 12})
    assert n == 1 + 4 + 1  # the level-1 entry, its four children, the level-0 entry
    assert table.level_blocks(vt) == [0, 1, top]
    assert table.take_dirty()  # the blocks and the level words go up
    assert unpack_entry(table.lookup(vt, 0, 4, 6))[0] == 11  # child of (1, 2, 3)
    assert unpack_entry(table.lookup(vt, 0, 5, 7))[1] == 1
    assert unpack_entry(table.lookup(vt, 0, 1, 1))[0] == 12
    assert unpack_entry(table.lookup(vt, 0, 0, 0))[0] == 7
    assert unpack_entry(table.lookup(vt, 2, 1, 1))[0] == 7  # level 2 has no block
    # The last level-0 tile leaves: its block goes back, lookups read level 1's.
    table.set_residency(vt, {(top, 0, 0): 7, (1, 2, 3): 11})
    assert table.level_blocks(vt) == [1, top]
    assert unpack_entry(table.lookup(vt, 0, 4, 6))[0] == 11
    assert unpack_entry(table.lookup(vt, 0, 1, 1))[0] == 7
    with pytest.raises(ValueError):
        table.set_residency(vt, {(0, 0, 0): 1})
    # A second texture: the directory names its descriptor, which names its size.
    lay2 = VirtualLayout(BC7, 256, 200, 7, Wrap.CLAMP)
    assert table.add(lay2) == 1
    desc = int(table.words[table.directory_index(1)])
    assert table.words[desc:desc + 2].tolist() == [255 | (7 << 24), 199 | (int(Wrap.CLAMP) << 24)]


def test_feedback_reduction_and_ancestors():
    keys = pack_feedback(np.array([0, 0, 1, 0]), np.array([0, 0, 2, 0]),
                         np.array([5, 5, 1, 6]), np.array([3, 3, 0, 3]))
    image = np.concatenate([keys, np.zeros(10, np.uint64)])
    uniq, counts = reduce_feedback(image)
    assert uniq.size == 3 and sorted(counts.tolist()) == [1, 1, 2]
    req = expand_requests(uniq, counts, np.array([4, 4]))
    vt, lvl, x, y = unpack_feedback(req.keys)
    table = {(int(a), int(b), int(c), int(d)): (int(t), int(p))
             for a, b, c, d, t, p in zip(vt, lvl, x, y, req.tiers, req.pixels, strict=True)}
    assert table[(0, 0, 5, 3)] == (Tier.VISIBLE, 2)
    assert table[(0, 1, 2, 1)] == (Tier.VISIBLE, 2)  # parent of (5, 3) only: (6, 3)'s is (3, 1)
    assert table[(0, 1, 3, 1)] == (Tier.VISIBLE, 1)
    assert table[(0, 2, 1, 0)] == (Tier.PREFETCH, 3)
    assert table[(0, 3, 0, 0)] == (Tier.PREFETCH, 3)
    assert table[(1, 2, 1, 0)] == (Tier.VISIBLE, 1)
    assert table[(1, 3, 0, 0)] == (Tier.VISIBLE, 1)
    assert (0, 4, 0, 0) not in table  # beyond the texture's levels
    # With the grids, a tile outside its level's grid (a corrupt key) is dropped.
    grids = np.ones((2, 16, 2), np.int64)
    grids[:, 0] = (8, 8)
    grids[:, 1] = (4, 4)
    grids[:, 2] = (2, 2)
    bad = pack_feedback(np.array([0, 0]), np.array([0, 2]), np.array([3, 5]), np.array([3, 0]))
    req2 = expand_requests(bad, np.array([1, 1]), np.array([4, 4]), grids)
    _, lv2, x2, _ = unpack_feedback(req2.keys)
    assert (0, 3) in set(zip(lv2.tolist(), x2.tolist(), strict=True))  # the valid one stays
    assert (2, 5) not in set(zip(lv2.tolist(), x2.tolist(), strict=True))
    # Keys of textures that do not exist (stale feedback) are dropped.
    assert len(expand_requests(pack_feedback(np.array([9]), np.array([0]), np.array([0]),
                                             np.array([0])), np.array([1]),
                               np.array([4, 4]))) == 0


@pytest.mark.parametrize(("supercompression", "use_mmap", "span"),
                         [(None, True, 0), (None, False, 0), (None, False, 1 << 19),
                          ("zstd", True, 0)])
@pytest.mark.parametrize("wrap", [Wrap.REPEAT, Wrap.CLAMP])
def test_tile_reads_equal_tiles_cut_from_whole_levels(tmp_path, supercompression, use_mmap,
                                                      span, wrap, monkeypatch):
    """Every read path gives the tile cut from the whole level: the mapped gather, one pread
    per block row (span 0), and one pread of the rows' whole span where they are
    consecutive (the default)."""
    from engine.streaming.virtual import io as vt_io

    monkeypatch.setattr(vt_io, "SPAN_BYTES", span)
    fmt = BC7
    levels = [_numbered_level(fmt, *mip_dims(512, 512, i)) for i in range(10)]
    rng = np.random.default_rng(1)
    levels = [bytes(np.frombuffer(lv, np.uint8) ^ rng.integers(0, 256, len(lv), np.uint8)
                    .astype(np.uint8)) for lv in levels]
    path = tmp_path / "t.ktx2"
    write_ktx2(path, "BC7", 512, 512, levels, supercompression=supercompression)
    tf = open_texture(path)
    lay = VirtualLayout(fmt, 512, 512, virtual_levels(fmt, 512, 512, 10), wrap)
    src = TileSource(tf, lay, use_mmap=use_mmap)
    try:
        for lvl in range(lay.levels):
            gx, gy = lay.grid(lvl)
            for y in range(gy):
                for x in range(gx):
                    whole = cut_tile(lay, lvl, x, y, tf.read_level(lvl))
                    assert src.read_tile(lvl, x, y) == whole
        tiles = sum(lay.grid(lvl)[0] * lay.grid(lvl)[1] for lvl in range(lay.levels))
        if supercompression is None and not use_mmap and span == 0:
            assert src.reads >= 34 * 16  # one pread per block row at least
        elif supercompression is None and not use_mmap:
            assert src.reads >= tiles
            inner = TileSource(tf, lay)  # an inner tile's rows are consecutive: one read
            try:
                assert inner.read_tile(0, 1, 1) == cut_tile(lay, 0, 1, 1, tf.read_level(0))
                assert inner.reads == 1
            finally:
                inner.close()
    finally:
        src.close()


def test_level_blocks_checks_size():
    with pytest.raises(ValueError):
        level_blocks(BC7, 8, 8, b"\0" * 10)


def test_run_based_reduction_equals_unique_on_random_images():
    rng = np.random.default_rng(5)
    for _ in range(20):
        h, w = int(rng.integers(1, 40)), int(rng.integers(1, 60))
        img = rng.integers(0, 6, (h, w)).astype(np.uint64)
        img = np.repeat(img, int(rng.integers(1, 4)), axis=1)  # runs, as real images have
        keys, counts = reduce_feedback(img)
        flat = img[img != 0]
        want_k, want_c = np.unique(flat, return_counts=True)
        assert keys.tolist() == want_k.tolist() and counts.tolist() == want_c.tolist()
