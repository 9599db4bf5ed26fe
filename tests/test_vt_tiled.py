"""Tile-contiguous copies (engine/textures/tiled.py, streaming/virtual/io.py TiledCache):
made once in the background, byte-identical tiles to the strided reads, one read a tile,
supercompressed files included, stale or broken copies never used."""
from __future__ import annotations

import os
import time

import pytest
from vt_helpers import bc7_file

from engine import textures
from engine.errors import TextureFormatError
from engine.streaming.virtual.io import TiledCache, TileSource
from engine.streaming.virtual.tiles import VirtualLayout, Wrap, virtual_levels
from engine.textures.tiled import TiledFile, TiledHeader, write_tiled


def _source(path, wrap=Wrap.REPEAT):
    tf = textures.open(path)
    lay = VirtualLayout(tf.pixel_format, tf.width, tf.height,
                        virtual_levels(tf.pixel_format, tf.width, tf.height, len(tf.levels)),
                        wrap, 1024)
    return TileSource(tf, lay)


def _wait(cache, seconds=20.0):
    end = time.perf_counter() + seconds
    while not cache.idle():
        assert time.perf_counter() < end, "tiled copy not made in time"
        time.sleep(0.01)


@pytest.mark.parametrize("supercompression", [None, "zstd"])
@pytest.mark.parametrize("wrap", [Wrap.REPEAT, Wrap.CLAMP])
def test_tiled_copy_reads_the_same_tiles_in_one_read_each(tmp_path, supercompression, wrap):
    if supercompression:
        pytest.importorskip("zstandard")
    path = bc7_file(tmp_path, f"t_{supercompression}.ktx2", 512, seed=4,
                    supercompression=supercompression)
    plain, tiled = _source(path, wrap), _source(path, wrap)
    cache = TiledCache(tmp_path / "cache")
    try:
        cache.add(tiled)
        _wait(cache)
        assert tiled.tiled and cache.made == 1
        lay = plain.layout
        for level in range(lay.levels):
            gx, gy = lay.grid(level)
            for y in range(gy):
                for x in range(gx):
                    assert tiled.read_tile(level, x, y) == plain.read_tile(level, x, y)
        assert tiled._tiled.reads == lay.entry_count  # one pread a tile
        # A second source of the same file finds the copy at once: nothing made again.
        again = _source(path, wrap)
        cache.add(again)
        assert again.tiled and cache.idle() and cache.made == 1
        again.close()
    finally:
        cache.close()
        plain.close()
        tiled.close()


def test_a_changed_source_is_converted_again(tmp_path):
    path = bc7_file(tmp_path, "c.ktx2", 256, seed=5)
    cache = TiledCache(tmp_path / "cache")
    try:
        src = _source(path)
        cache.add(src)
        _wait(cache)
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # "edited"
        src2 = _source(path)
        cache.add(src2)
        _wait(cache)
        assert cache.made == 2 and src2.tiled
        src.close()
        src2.close()
    finally:
        cache.close()


def test_bad_tiled_files_are_typed_errors(tmp_path):
    bad = tmp_path / "bad.vttiles"
    bad.write_bytes(b"nonsense")
    with pytest.raises(TextureFormatError):
        TiledFile(bad)
    header = TiledHeader(16, 4, 0, 0, {})
    path = write_tiled(tmp_path / "ok.vttiles", header, [bytes([i]) * 16 for i in range(4)])
    f = TiledFile(path)
    assert f.read(2) == bytes([2]) * 16
    with pytest.raises(ValueError):
        f.read(4)
    f.close()
    with open(path, "r+b") as fh:  # cut the last record short
        fh.truncate(os.path.getsize(path) - 1)
    with pytest.raises(TextureFormatError):
        TiledFile(path)
    with pytest.raises(ValueError):  # the writer checks the count: no half file appears
        write_tiled(tmp_path / "short.vttiles", header, [b"\0" * 16])
    assert not (tmp_path / "short.vttiles").exists()
