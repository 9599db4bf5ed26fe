"""Virtual textures under faults and after pressure (issue 15): a broken file met by a tile
read is reported once, typed, and read no more; a page cache that cannot hold the view
converges to the same tiles whatever came first; a cache shrunk under pressure grows back to
its full size. Together they make a soaked engine show what a fresh one shows."""
from __future__ import annotations

import logging
import os
import time

import numpy as np
import pytest
from vt_helpers import chain_file, headless_device

from engine import textures
from engine.errors import TextureFormatError
from engine.memory.split import settle_allowance
from engine.streaming.virtual.io import TileSource
from engine.streaming.virtual.keys import level_of, pack as pack_feedback, vt_of
from engine.streaming.virtual.policy import Tier, TilePolicy
from engine.streaming.virtual.system import VirtualTextureSystem
from engine.streaming.virtual.tiles import (
    VirtualLayout,
    Wrap,
    virtual_levels,
)

# Tile-contiguous copies (the default storage) go to a cache folder of each test's own.
pytestmark = [pytest.mark.usefixtures("isolated_cache"), pytest.mark.needs("BC1_RGB sampling")]


def key(vt: int, level: int, x: int = 0, y: int = 0) -> int:
    return int(pack_feedback(np.array([vt]), np.array([level]), np.array([x]),
                             np.array([y]))[0])


def _source(path, use_mmap: bool = True) -> TileSource:
    tf = textures.open(path)
    layout = VirtualLayout(tf.pixel_format, tf.width, tf.height,
                           virtual_levels(tf.pixel_format, tf.width, tf.height, len(tf.levels)),
                           Wrap.REPEAT)
    return TileSource(tf, layout, use_mmap=use_mmap)


def _truncate_by_replace(path) -> None:
    data = path.read_bytes()
    half = path.with_name(path.name + ".half")
    half.write_bytes(data[:len(data) // 2])
    os.replace(half, path)


@pytest.mark.parametrize("use_mmap", [True, False])
@pytest.mark.parametrize("kind", ["vanish", "truncate", "unreadable"])
def test_tile_source_meets_a_damaged_file_after_reopen(tmp_path, kind, use_mmap):
    path = chain_file(tmp_path, f"t_{kind}.ktx2", 512, seed=3)
    src = _source(path, use_mmap)
    try:
        good = src.read_tile(0, 1, 1)
        assert len(good) > 0
        if kind == "vanish":
            path.unlink()
        elif kind == "truncate":
            _truncate_by_replace(path)
        else:
            path.unlink()
            path.mkdir()
        # The open handle still reads the file it opened: the same bytes.
        assert src.read_tile(0, 1, 1) == good
        src.reopen()
        with pytest.raises(TextureFormatError) as err:
            src.read_tile(0, 1, 1)
        assert str(path) in str(err.value)
    finally:
        src.close()


@pytest.mark.slow
def test_broken_file_is_reported_once_and_read_no_more(tmp_path, caplog):
    dev = headless_device()
    try:
        paths = [chain_file(tmp_path, f"v{i}.ktx2", 512, seed=10 + i) for i in range(2)]
        with dev.leak_check():
            vts = VirtualTextureSystem(dev, 1 << 20, latency_ms=None)
            try:
                ids = [vts.register(p) for p in paths]
                assert vts.preload(vts.all_tiles(ids[1], 2), timeout=20)
                paths[0].unlink()
                paths[0].mkdir()
                vts.io.sources[ids[0]].reopen()
                with caplog.at_level(logging.WARNING, "engine.streaming.virtual.system"):
                    # texture 0's tiles cannot come; texture 1's still do
                    assert not vts.preload(np.concatenate([vts.all_tiles(ids[0], 1),
                                                           vts.all_tiles(ids[1], 1)]),
                                           timeout=3)
                reports = [r for r in caplog.records if "stays at its resident tiles" in
                           r.getMessage()]
                assert len(reports) == 1 and str(paths[0]) in reports[0].getMessage()
                assert set(vts.failed) == {ids[0]} and vts.io_errors == 1
                assert all(vts.is_resident(k) for k in vts.all_tiles(ids[1], 1).tolist())
                # Asked again and again: nothing of texture 0 goes to the I/O any more.
                wanted = vts.all_tiles(ids[0], 0)
                failed_before = vts.io.stats().failed
                assert not vts.preload(wanted, timeout=0.3)
                assert vts.stats.requests == 0
                assert vts.io.stats().failed == failed_before
                # its coarsest tile stays: the fallback every lookup reaches
                top = vts.textures[ids[0]].layout.levels - 1
                assert vts.is_resident(vts.key(ids[0], top, 0, 0))
            finally:
                vts.release()
    finally:
        dev.shutdown()


def test_preload_gives_up_once_only_failed_textures_tiles_are_missing(tmp_path):
    """A wait for tiles that can never come (their file broke) ends when the failure is
    known, not at the timeout."""
    dev = headless_device()
    try:
        path = chain_file(tmp_path, "gone.ktx2", 512, seed=12)
        with dev.leak_check():
            vts = VirtualTextureSystem(dev, 1 << 20, latency_ms=None)
            try:
                vt = vts.register(path)
                path.unlink()
                path.mkdir()
                vts.io.sources[vt].reopen()
                start = time.perf_counter()
                assert not vts.preload(vts.all_tiles(vt, 0), timeout=120)
                assert time.perf_counter() - start < 60  # far from the timeout
                assert set(vts.failed) == {vt}
            finally:
                vts.release()
    finally:
        dev.shutdown()


def _run(policy: TilePolicy, frame: int, wanted: dict[int, Tier], arrivals: list[int]) -> None:
    keys = np.array(sorted(wanted), np.uint64)
    tiers = np.array([wanted[int(k)] for k in keys], np.int64)
    missing, _ = policy.plan(frame, keys, tiers)
    order = [k for k in arrivals if k in set(missing.tolist())]
    policy.admit_many(order)


def test_a_full_cache_converges_to_the_same_tiles_whatever_came_first():
    """Sixteen textures want levels 4 and 5 (visible), the cache holds 20: every texture's
    level 5 first, then level 4 by key, from any history. The old rule ("a visible tile never
    evicts a visible one") kept level 4 of some textures and showed others at their tail."""
    wanted = {key(vt, lv): Tier.VISIBLE for vt in range(16) for lv in (4, 5)}
    ends = []
    for seed in range(4):
        rng = np.random.default_rng(seed)
        p = TilePolicy(20, hold_frames=8, grace_frames=2)
        # A history: finer tiles of a random half of the textures came first.
        first = {key(int(vt), 4): Tier.VISIBLE for vt in rng.permutation(16)[:8]}
        _run(p, 1, first, list(first))
        assert p.occupied == 8
        for frame in range(2, 40):
            arrivals = list(wanted)
            rng.shuffle(arrivals)
            _run(p, frame, wanted, arrivals)
        missing, _ = p.plan(40, np.array(sorted(wanted), np.uint64),
                            np.zeros(len(wanted), np.int64))
        assert missing.size == 0  # settled: nothing left that could take a slot
        ends.append(sorted(p.where))
    assert all(e == ends[0] for e in ends)
    held = {(vt_of(k), level_of(k)) for k in ends[0]}
    assert all((vt, 5) in held for vt in range(16))  # every fallback before any detail
    assert sum(1 for _, lv in held if lv == 4) == 4


def test_a_shrunk_cache_grows_back_to_its_full_size():
    # 20 of 24 slots' worth: within the 25% hysteresis, kept without the full size known...
    assert settle_allowance(382_000, 460_800, 10**9) == 382_000
    # ...and taken once the room allows the full size again
    assert settle_allowance(382_000, 460_800, 10**9, full=460_800) == 460_800
    # the room still binding (target below full): the hysteresis holds
    assert settle_allowance(382_000, 420_000, 420_000, full=460_800) == 382_000
    # never above the room
    assert settle_allowance(500_000, 460_800, 470_000, full=460_800) == 460_800
