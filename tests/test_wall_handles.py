"""Open-file LRU and bulk header registration (engine/streaming/handles.py): no GL."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from streaming_helpers import run_threads

from engine import textures
from engine.errors import TextureFormatError
from engine.formats import get as get_format
from engine.memory.sizes import level_bytes
from lab.headers import PREFIX_BYTES, HeaderTable
from engine.streaming.handles import HandleCache, read_level
from engine.textures.ktx2_write import write_ktx2


def make_files(directory: Path, count: int, size: int = 64, seed: int = 0,
               **kw) -> list[Path]:
    """`count` BC7 KTX2 files with random blocks (content does not matter here)."""
    fmt = get_format("BC7_SRGB")
    rng = np.random.default_rng(seed)
    levels = int(np.log2(size)) + 1
    paths = []
    for i in range(count):
        data = [rng.integers(0, 256, level_bytes(fmt, max(1, size >> k), max(1, size >> k)),
                             np.uint8).tobytes() for k in range(levels)]
        path = directory / f"t{i:05d}.ktx2"
        write_ktx2(path, "BC7_SRGB", size, size, data, **kw)
        paths.append(path)
    return paths


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else -1


def test_header_table_matches_the_reader(tmp_path: Path) -> None:
    paths = make_files(tmp_path, 6, 64)
    (tmp_path / "z").mkdir()
    paths += make_files(tmp_path / "z", 2, 32, seed=1, supercompression="zstd")
    table = HeaderTable.from_files(paths)
    assert table.special == (6, 7)  # zstd goes through the reader
    handles = HandleCache(4)
    for t, path in enumerate(paths):
        tf = textures.open(path)
        assert (table.width[t], table.height[t], table.levels[t]) == (tf.width, tf.height,
                                                                      len(tf.levels))
        assert table.formats[table.fmt[t]] == tf.pixel_format.name
        for lvl in range(len(tf.levels)):
            assert table.read_level(t, lvl, handles) == tf.read_level_all(lvl)
            assert read_level(tf, lvl, handles) == tf.read_level_all(lvl)
    handles.close()


def test_bad_files_raise_the_readers_typed_error(tmp_path: Path) -> None:
    good = make_files(tmp_path, 3)
    bad = tmp_path / "bad.ktx2"
    bad.write_bytes(good[0].read_bytes()[:200])  # level index points past the end
    with pytest.raises(TextureFormatError):
        HeaderTable.from_files([*good, bad])
    junk = tmp_path / "junk.ktx2"
    junk.write_bytes(b"not a texture")
    with pytest.raises(TextureFormatError):
        HeaderTable.from_files([junk])


def test_open_files_stay_bounded_and_reads_stay_right(tmp_path: Path) -> None:
    paths = make_files(tmp_path, 40, 32)
    table = HeaderTable.from_files(paths)
    expected = {t: textures.open(p).read_level_all(0) for t, p in enumerate(paths)}
    before = open_fds()
    handles = HandleCache(max_open=5)
    peak = [0]

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for t in rng.integers(0, 40, 300):
            assert table.read_level(int(t), 0, handles) == expected[int(t)]
            peak[0] = max(peak[0], handles.open_count)

    errors = run_threads(worker, 4)
    assert not errors, errors
    # At most max_open cached, plus at most one doomed descriptor per reading thread.
    assert peak[0] <= 5 + 4
    assert handles.hits > 0 and handles.opens >= 40
    handles.close()
    if before >= 0:
        assert open_fds() == before  # nothing leaked


def test_registration_reads_headers_only(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """2,000 plain files: the bulk parse never goes through the per-file reader and reads one
    fixed prefix per file (its speed against the reader is the bench's figure, at 10,000)."""
    paths = make_files(tmp_path, 2000, 16)
    opened: list[object] = []
    read: list[int] = []
    real_readv = os.readv
    monkeypatch.setattr(textures, "open", lambda *a, **k: opened.append(a))

    def counting_readv(fd: int, buffers: list) -> int:
        got = real_readv(fd, buffers)
        read.append(got)
        return got

    monkeypatch.setattr(os, "readv", counting_readv)
    table = HeaderTable.from_files(paths)
    assert len(table) == 2000 and not table.special and not opened
    assert len(read) == 2000 and max(read) <= PREFIX_BYTES
    assert table.nbytes / len(table) < 64 * 8  # columns, not objects
