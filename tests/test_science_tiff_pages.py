"""TIFF tiles read straight from the file (engine.science.tiff_pages): the same values as
tifffile's own reads, concurrently, locally and over HTTP byte ranges; what the direct path
cannot take goes through the zarr store. No GL."""
from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import numpy as np
import pytest

tifffile = pytest.importorskip("tifffile")
pytest.importorskip("zarr")

from science_helpers import pyramid, write_ome_tiff, write_slide  # noqa: E402
from streaming_helpers import run_threads  # noqa: E402

from engine.errors import ImageSourceError  # noqa: E402
from engine.science.readers import open_tiff  # noqa: E402
from engine.science.tiff_pages import TiffLevel  # noqa: E402
from lab.http_files import served  # noqa: E402


def ome_levels(dtype: str = "uint16") -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    if dtype == "float32":
        data = rng.normal(0, 1000, (3, 300, 420)).astype(np.float32)
    else:
        data = rng.integers(0, 65536, (3, 300, 420), dtype=np.uint16)
    return [lv.astype(dtype) for lv in pyramid(data, 2)]


def tiles_of(source, level: int, channel: int):
    rows, cols = source.levels[level].grid(source.tile)
    for ty in range(rows):
        for tx in range(cols):
            yield ty, tx


def expected(levels: list[np.ndarray], level: int, channel: int, ty: int, tx: int,
             tile: int, channel_last: bool = False) -> np.ndarray:
    lv = levels[level]
    ys, xs = slice(ty * tile, (ty + 1) * tile), slice(tx * tile, (tx + 1) * tile)
    return lv[ys, xs, channel] if channel_last else lv[channel, ys, xs]


def direct_reads(source) -> int:
    return sum(a.direct for a in source._arrays)


@pytest.mark.parametrize("dtype", ["uint16", "float32"])
def test_every_tile_of_an_ome_tiff_equals_the_array(tmp_path: Path, dtype: str) -> None:
    levels = ome_levels(dtype)
    path = write_ome_tiff(tmp_path / "a.ome.tif", levels, tile=128)
    source = open_tiff(str(path))
    try:
        assert all(isinstance(a, TiffLevel) and a._tiles is not None for a in source._arrays)
        count = 0
        for level in range(len(levels)):
            for c in range(3):
                for ty, tx in tiles_of(source, level, c):
                    got = source.read_tile(level, c, ty, tx)
                    want = expected(levels, level, c, ty, tx, source.tile)
                    assert got.dtype == want.dtype and np.array_equal(got, want)
                    count += 1
        assert direct_reads(source) == count  # no tile went through the zarr store
    finally:
        source.close()


def test_an_rgb_slide_reads_each_sample_from_its_tile(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    base = rng.integers(0, 256, (300, 420, 3), dtype=np.uint8)
    levels = [base, base[::2, ::2].copy()]
    source = open_tiff(str(write_slide(tmp_path / "s.svs", levels)))
    try:
        assert source.channels == 3
        for level in range(2):
            for c in range(3):
                for ty, tx in tiles_of(source, level, c):
                    want = expected(levels, level, c, ty, tx, source.tile, channel_last=True)
                    assert np.array_equal(source.read_tile(level, c, ty, tx), want)
        assert direct_reads(source) > 0
    finally:
        source.close()


def test_reads_that_are_not_one_tile_go_through_the_store(tmp_path: Path) -> None:
    levels = ome_levels()
    source = open_tiff(str(write_ome_tiff(tmp_path / "a.ome.tif", levels, tile=128)))
    try:
        level0 = source._arrays[0]
        part = level0[1, 10:200, 100:140]  # inside two tiles, aligned to none
        assert np.array_equal(part, levels[0][1, 10:200, 100:140]) and level0.direct == 0
    finally:
        source.close()


def test_a_tile_the_writer_left_out_reads_as_zero(tmp_path: Path) -> None:
    def tiles():
        yield np.full((128, 128), 5, np.uint16)
        yield None
        for _ in range(4):
            yield np.full((128, 128), 7, np.uint16)
    path = tmp_path / "holes.tif"
    tifffile.imwrite(path, tiles(), shape=(256, 384), dtype="uint16", tile=(128, 128),
                     compression="zlib")
    source = open_tiff(str(path))
    try:
        assert not source.read_tile(0, 0, 0, 1).any()
        assert (source.read_tile(0, 0, 1, 2) == 7).all()
    finally:
        source.close()


def test_strips_are_read_through_the_store(tmp_path: Path) -> None:
    data = np.arange(300 * 200, dtype=np.uint16).reshape(300, 200)
    path = tmp_path / "strips.tif"
    tifffile.imwrite(path, data, rowsperstrip=16)
    source = open_tiff(str(path))
    try:
        assert source._arrays[0]._tiles is None
        assert np.array_equal(source.read_tile(0, 0, 0, 0), data[:256, :200])
    finally:
        source.close()


def test_many_threads_read_the_right_tiles(tmp_path: Path) -> None:
    levels = ome_levels()
    source = open_tiff(str(write_ome_tiff(tmp_path / "a.ome.tif", levels, tile=128)))
    keys = [(lv, c, ty, tx) for lv in range(len(levels)) for c in range(3)
            for ty, tx in tiles_of(source, lv, c)]

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for i in rng.integers(0, len(keys), 200):
            lv, c, ty, tx = keys[int(i)]
            assert np.array_equal(source.read_tile(lv, c, ty, tx),
                                  expected(levels, lv, c, ty, tx, source.tile))
    try:
        errors = run_threads(worker, 6)
        assert not errors, errors
    finally:
        source.close()


def test_a_cut_file_is_a_typed_error_naming_the_tile(tmp_path: Path) -> None:
    levels = ome_levels()
    path = tmp_path / "z.tif"
    tifffile.imwrite(path, levels[0], tile=(128, 128), compression="zlib",
                     photometric="minisblack", metadata={"axes": "CYX"})
    with tifffile.TiffFile(path) as tif:
        page = tif.series[0].levels[0].pages[0]
        offset = int(page.dataoffsets[0])
    raw = bytearray(path.read_bytes())
    raw[offset:offset + 64] = b"\xff" * 64  # the first tile's zlib stream, broken
    path.write_bytes(bytes(raw))
    source = open_tiff(str(path))
    try:
        with pytest.raises(ImageSourceError, match=r"level 0 tile \(0, 0\) of channel 0"):
            source.read_tile(0, 0, 0, 0)
        assert np.array_equal(source.read_tile(0, 0, 0, 1), expected(levels, 0, 0, 0, 1, 128))
    finally:
        source.close()


def test_over_http_tiles_are_byte_ranges(tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    levels = ome_levels()
    write_ome_tiff(tmp_path / "a.ome.tif", levels, tile=128)
    with served(tmp_path) as base:
        source = open_tiff(f"{base}/a.ome.tif")
        try:
            tiles = list(tiles_of(source, 0, 2))
            for ty, tx in tiles:
                assert np.array_equal(source.read_tile(0, 2, ty, tx),
                                      expected(levels, 0, 2, ty, tx, source.tile))
            assert direct_reads(source) == len(tiles) == 12
        finally:
            source.close()


class _WholeFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_a_server_without_ranges_is_read_through_the_store(tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    levels = ome_levels()
    write_ome_tiff(tmp_path / "a.ome.tif", levels, tile=128)
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_WholeFiles, directory=str(tmp_path)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        source = open_tiff(f"http://127.0.0.1:{httpd.server_address[1]}/a.ome.tif")
        try:
            assert np.array_equal(source.read_tile(1, 0, 0, 1), expected(levels, 1, 0, 0, 1, 128))
            assert direct_reads(source) == 0
        finally:
            source.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_a_tile_claiming_gigabytes_is_a_typed_error_not_an_allocation(tmp_path: Path) -> None:
    """A damaged or hostile tile table: the byte count is checked against what a tile can
    take before anything is read."""
    levels = ome_levels()
    path = tmp_path / "z.tif"
    tifffile.imwrite(path, levels[0], tile=(128, 128), compression="zlib",
                     photometric="minisblack", metadata={"axes": "CYX"})
    source = open_tiff(str(path))
    try:
        level0 = source._arrays[0]
        level0._tiles.counts[0, 0] = 1 << 40
        with pytest.raises(ImageSourceError, match=r"level 0 tile \(0, 0\).*claims"):
            source.read_tile(0, 0, 0, 0)
        assert np.array_equal(source.read_tile(0, 0, 0, 1), expected(levels, 0, 0, 0, 1, 128))
    finally:
        source.close()
