"""Tile-contiguous copies (engine/textures/tiled.py, streaming/virtual/io.py TiledCache):
made once in the background, byte-identical tiles to the strided reads, one read a tile,
supercompressed files included, stale or broken copies never used; on by default in the
engine's cache folder, degrading to the files' own reads where it cannot be written; a
copy baked beside the file used first."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest
from vt_helpers import bc7_file, chain_file

from engine import textures
from engine.errors import TextureFormatError
from engine.streaming.virtual import io as vt_io
from engine.streaming.virtual.io import TiledCache, TileIO, TileSource
from engine.streaming.virtual.tiles import VirtualLayout, Wrap, virtual_levels
from engine.textures.tiled import (
    TiledFile,
    TiledHeader,
    sidecar_path,
    write_sidecar,
    write_tiled,
)


def _source(path, wrap=Wrap.REPEAT):
    tf = textures.open(path)
    lay = VirtualLayout(tf.pixel_format, tf.width, tf.height,
                        virtual_levels(tf.pixel_format, tf.width, tf.height, len(tf.levels)),
                        wrap)
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
    path = chain_file(tmp_path, f"t_{supercompression}.ktx2", 512, seed=4,
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


def test_a_reopen_drops_a_copy_of_what_the_path_no_longer_holds(tmp_path):
    """A file replaced (or removed) under a running engine: after `reopen` the reads see what
    the path holds now, not the copy made from the old file; an unchanged file keeps it."""
    path = chain_file(tmp_path, "r.ktx2", 256, seed=6)
    cache = TiledCache(tmp_path / "cache")
    src = _source(path)
    try:
        cache.add(src)
        _wait(cache)
        src.reopen()
        assert src.tiled  # same file: the copy stays
        chain_file(tmp_path, "r.ktx2", 256, seed=7)  # new content at the same path
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        src.reopen()
        assert not src.tiled
        assert src.read_tile(0, 0, 0) == _source(path).read_tile(0, 0, 0)
        cache.add(src)  # made again from the new file
        _wait(cache)
        assert src.tiled and cache.made == 2
        path.unlink()
        src.reopen()
        assert not src.tiled
        with pytest.raises(TextureFormatError):
            src.read_tile(0, 0, 0)
    finally:
        src.close()
        cache.close()


def test_bad_tiled_files_are_typed_errors(tmp_path):
    bad = tmp_path / "bad.vttiles"
    bad.write_bytes(b"nonsense")
    with pytest.raises(TextureFormatError):
        TiledFile(bad)
    header = TiledHeader(16, 4, "", {})
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


def test_the_default_is_tiled_copies_in_the_engine_cache(tmp_path, isolated_cache):
    path = chain_file(tmp_path, "d.ktx2", 512, seed=6)
    io = TileIO(workers=0)
    try:
        src = io.add(textures.open(path), _source(path).layout)
        assert io.tiled is not None and io.tiled.folder == isolated_cache / "vt_tiles"
        _wait(io.tiled)
        assert src.tiled and src.tiled_path.parent == isolated_cache / "vt_tiles"
        assert src.read_tile(0, 1, 2) == _source(path).read_tile(0, 1, 2)
    finally:
        io.close()


def test_an_unwritable_cache_reads_the_files_with_one_warning(tmp_path, monkeypatch, caplog):
    path = chain_file(tmp_path, "u.ktx2", 256, seed=7)
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"")
    monkeypatch.setenv("ENGINE_CACHE", str(blocker / "cache"))  # cannot be made
    with caplog.at_level("WARNING", logger="engine.streaming.virtual.io"):
        io = TileIO(workers=0)
        try:
            srcs = [io.add(textures.open(path), _source(path).layout) for _ in range(3)]
            assert io.tiled.disabled and io.tiled.idle()
            assert not any(s.tiled for s in srcs)
            assert srcs[0].read_tile(0, 1, 1) == _source(path).read_tile(0, 1, 1)
        finally:
            io.close()
    assert len([r for r in caplog.records if "not made" in r.getMessage()]) == 1


def test_a_read_only_cache_still_serves_its_copies(tmp_path, monkeypatch):
    old, new = chain_file(tmp_path, "o.ktx2", 256, seed=8), chain_file(tmp_path, "n.ktx2", 256,
                                                                   seed=9)
    folder = tmp_path / "cache"
    cache = TiledCache(folder)
    cache.add(_source(old))
    _wait(cache)
    cache.close()
    # Running as root, a chmod would not stop writes: the folder check says read-only.
    monkeypatch.setattr(vt_io, "_writable", lambda folder: "read-only file system")
    cache = TiledCache(folder)
    try:
        a, b = _source(old), _source(new)
        cache.add(a)
        cache.add(b)
        assert cache.disabled and cache.idle()
        assert a.tiled and not b.tiled
        assert b.read_tile(0, 0, 0) == _source(new).read_tile(0, 0, 0)
    finally:
        cache.close()


def test_a_baked_sidecar_is_used_at_once(tmp_path):
    path = chain_file(tmp_path, "s.ktx2", 512, seed=10)
    assert write_sidecar(path) > 0 and sidecar_path(path).is_file()
    cache = TiledCache(tmp_path / "cache")
    try:
        src, plain = _source(path), _source(path)
        cache.add(src)
        assert src.tiled and cache.idle() and cache.made == 0
        assert src.tiled_path == sidecar_path(path)
        lay = src.layout
        for level in range(lay.levels):
            gx, gy = lay.grid(level)
            assert src.read_tile(level, gx - 1, gy - 1) == plain.read_tile(level, gx - 1,
                                                                           gy - 1)
        clamp = _source(path, Wrap.CLAMP)  # other borders: not the sidecar's
        cache.add(clamp)
        _wait(cache)
        assert clamp.tiled_path != sidecar_path(path) and cache.made == 1
    finally:
        cache.close()


def test_bake_writes_the_tiled_copy_of_a_texture_that_will_go_virtual(tmp_path):
    from engine.textures.bake import bake_image
    from engine.textures.tiled import BAKE_MIN_SIZE
    rng = np.random.default_rng(3)
    big = rng.integers(0, 256, (8, BAKE_MIN_SIZE, 4), np.uint8)
    res = bake_image(big, tmp_path / "big.ktx2", fmt="bc1")
    small = bake_image(big[:, :BAKE_MIN_SIZE // 2], tmp_path / "small.ktx2", fmt="bc1")
    assert sidecar_path(res.output).is_file() and not sidecar_path(small.output).exists()
    assert res.bytes == os.path.getsize(res.output)
    src = _source(res.output)
    cache = TiledCache(tmp_path / "cache")
    try:
        cache.add(src)
        assert src.tiled and src.tiled_path == sidecar_path(res.output)
    finally:
        cache.close()
        src.close()


@pytest.mark.slow
def test_neighbours_in_a_row_come_in_one_read_and_none_is_lost(tmp_path):
    from engine.streaming.virtual import keys as tile_keys
    path = chain_file(tmp_path, "r.ktx2", 1024, seed=11)  # 8 x 8 tiles at level 0
    plain = _source(path)
    io = TileIO(workers=0, tiled_dir=tmp_path / "cache")
    try:
        src = io.add(textures.open(path), plain.layout)
        _wait(io.tiled)
        row = [tile_keys.pack_one(0, 0, x, 3) for x in range(8)]
        for i, k in enumerate(row):
            io.request(k, float(-i))
        got = {int(r.level): r.data for r in io.poll(1 << 10)}
        assert src._tiled.reads == 1  # eight tiles, one pread
        assert all(got[k] == plain.read_tile(0, x, 3) for x, k in enumerate(row))
        # A neighbour read with another tile and then cancelled is still delivered.
        for k in row[:4]:
            io.request(k, 1.0)
        first = io.poll(1)
        assert len(first) == 1 and src._tiled.reads == 2
        io.retain([])
        rest = io.poll(1 << 10)
        assert sorted(int(r.level) for r in first + rest) == sorted(row[:4])
        assert src._tiled.reads == 2
    finally:
        io.close()
        plain.close()


def test_thousands_of_sources_under_a_low_descriptor_limit(tmp_path):
    """Each virtual texture keeps its file open and mapped while it is read: a process
    allowed 64 descriptors (soft and hard) reads a tile of each of 150 textures, then of
    each again, the least recently read sources giving theirs up; the soft limit of a
    process allowed more is raised to its hard limit."""
    import subprocess
    import sys

    chain_file(tmp_path, "t.ktx2", 64)
    code = f"""
import os, resource, shutil
from pathlib import Path
from engine import textures
from engine.streaming.descriptors import raise_open_file_limit
from engine.streaming.virtual.io import OPEN_SOURCES, TileSource
from engine.streaming.virtual.tiles import VirtualLayout, Wrap, virtual_levels
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
src = Path({str(tmp_path)!r}) / "t.ktx2"
sources = []
for i in range(150):
    p = src.with_name(f"t{{i}}.ktx2")
    shutil.copy(src, p)
    tf = textures.open(p)
    lay = VirtualLayout(tf.pixel_format, tf.width, tf.height,
                        virtual_levels(tf.pixel_format, tf.width, tf.height, len(tf.levels)),
                        Wrap.REPEAT)
    s = TileSource(tf, lay)
    s.read_tile(0, 0, 0)
    sources.append(s)
tiles = [s.read_tile(0, 0, 0) for s in sources]
print(len(set(tiles)), len(os.listdir("/proc/self/fd")) <= 64, OPEN_SOURCES.limit)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "True", "10"]
    raised = subprocess.run(
        [sys.executable, "-c", "import resource\n"
         "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
         "resource.setrlimit(resource.RLIMIT_NOFILE, (min(64, hard), hard))\n"
         "from engine.streaming.descriptors import raise_open_file_limit\n"
         "print(raise_open_file_limit() == hard)"], capture_output=True, text=True, timeout=60)
    assert raised.stdout.split() == ["True"], raised.stderr[-2000:]


def test_a_plain_level_is_copied_a_tile_row_at_a_time(tmp_path, monkeypatch):
    """The tiled copy of a huge texture holds one tile row's blocks, never a whole level:
    the same records as cutting whole levels, from reads of at most a band each."""
    from engine.textures.tiled import (
        BORDER_TEXELS,
        TILE_TEXELS,
        cut_slot,
        level_blocks,
        tile_grid,
        tile_records,
    )
    from engine.memory.sizes import mip_dims
    path = chain_file(tmp_path, "rows.ktx2", 1024, seed=6)
    tf = textures.open(path)
    fmt = tf.pixel_format
    levels = virtual_levels(fmt, tf.width, tf.height, len(tf.levels))
    want = []
    for level in range(levels):
        w, h = mip_dims(tf.width, tf.height, level)
        blocks = level_blocks(fmt, w, h, tf.read_level(level))
        gx, gy = tile_grid(w, h)
        want += [cut_slot(fmt, w, h, x, y, Wrap.REPEAT, blocks)
                 for y in range(gy) for x in range(gx)]
    reads: list[int] = []
    original = type(tf).read_block_rows

    def counted(self, level, row0, count):
        data = original(self, level, row0, count)
        reads.append(len(data))
        return data

    def whole(*_a, **_k):
        raise AssertionError("a whole level was read")

    monkeypatch.setattr(type(tf), "read_block_rows", counted)
    monkeypatch.setattr(type(tf), "read_level", whole)
    assert list(tile_records(tf, levels, Wrap.REPEAT)) == want
    band_rows = (TILE_TEXELS + 2 * BORDER_TEXELS) // fmt.block_h
    assert reads and max(reads) <= band_rows * (tf.width // fmt.block_w) * fmt.block_bytes


def test_block_rows_outside_a_level_or_of_a_supercompressed_one_are_refused(tmp_path):
    pytest.importorskip("zstandard")
    plain = textures.open(bc7_file(tmp_path, "p.ktx2", 256, seed=7))
    assert len(plain.read_block_rows(0, 63, 1)) == 64 * 16
    with pytest.raises(ValueError, match="outside"):
        plain.read_block_rows(0, 63, 2)
    packed = textures.open(bc7_file(tmp_path, "z.ktx2", 256, seed=7, supercompression="zstd"))
    with pytest.raises(ValueError, match="plain image"):
        packed.read_block_rows(0, 0, 1)


def test_a_damaged_record_reads_from_the_file_and_the_copy_is_made_again(tmp_path, caplog):
    """64 KiB overwritten in the middle of a tiled copy: the records there fail their
    checksum, so the tiles come from the file (the same bytes, never noise), one warning
    names the copy and it is made again."""
    import logging
    import random

    path = chain_file(tmp_path, "d.ktx2", 512, seed=8)
    cache = TiledCache(tmp_path / "cache")
    src, plain = _source(path), _source(path)
    try:
        cache.add(src)
        _wait(cache)
        copy = src.tiled_path
        data = bytearray(copy.read_bytes())
        mid = len(data) // 2
        data[mid:mid + 65536] = random.Random(35).randbytes(65536)
        copy.write_bytes(bytes(data))
        caplog.set_level(logging.WARNING, "engine.streaming.virtual.io")
        lay = plain.layout
        keys = [(lv, x, y) for lv in range(lay.levels) for y in range(lay.grid(lv)[1])
                for x in range(lay.grid(lv)[0])]
        assert all(src.read_tile(*k) == plain.read_tile(*k) for k in keys)
        _wait(cache)
        assert cache.made == 2 and src.tiled
        assert all(src.read_tile(*k) == plain.read_tile(*k) for k in keys)
        said = [r.message for r in caplog.records if "is damaged" in r.message]
        assert len(said) == 1 and "checksum differs" in said[0]
    finally:
        cache.close()
        src.close()
        plain.close()


def _edit(path, st, tmp_path) -> None:
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # "edited": a new mtime


def _replace_keeping_times(path, st, tmp_path) -> None:
    """`cp -p` / `touch -r`: same size and mtime, new content; the inode and change time
    tell the copy is stale."""
    os.replace(chain_file(tmp_path, "other.ktx2", 256, seed=10), path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (os.stat(path).st_size, os.stat(path).st_mtime_ns) == (st.st_size, st.st_mtime_ns)


@pytest.mark.parametrize("change", [_edit, _replace_keeping_times])
def test_a_changed_source_is_converted_again(tmp_path, change):
    path = chain_file(tmp_path, "p.ktx2", 256, seed=9)
    cache = TiledCache(tmp_path / "cache")
    try:
        src = _source(path)
        cache.add(src)
        _wait(cache)
        change(path, os.stat(path), tmp_path)
        assert not src._tiled.matches(path)
        src2 = _source(path)
        cache.add(src2)
        _wait(cache)
        assert cache.made == 2 and src2.tiled
        assert src2.read_tile(0, 0, 0) == _source(path).read_tile(0, 0, 0)
        src.close()
        src2.close()
    finally:
        cache.close()


def test_a_full_disk_mid_run_reads_the_files_as_they_are(tmp_path, caplog, monkeypatch):
    """The cache folder fills while a copy is written: its temporary file is removed, one
    warning names $ENGINE_CACHE, no more copies are made and the tiles come from the file."""
    import errno
    import logging

    from engine.textures import tiled as tiled_mod

    def full(*args, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tiled_mod, "commit", full)
    caplog.set_level(logging.WARNING)
    folder = tmp_path / "cache"
    cache = TiledCache(folder)
    sources = [_source(chain_file(tmp_path, f"f{i}.ktx2", 256, seed=11 + i)) for i in range(2)]
    try:
        for src in sources:
            cache.add(src)
            _wait(cache)
        assert cache.disabled and cache.made == 0 and not any(s.tiled for s in sources)
        assert list(folder.iterdir()) == []
        plain = _source(sources[0].path)
        assert sources[0].read_tile(0, 1, 1) == plain.read_tile(0, 1, 1)
        plain.close()
        said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(said) == 1 and "$ENGINE_CACHE" in said[0]
        assert "continues without caching" in said[0]
    finally:
        cache.close()
        for src in sources:
            src.close()
