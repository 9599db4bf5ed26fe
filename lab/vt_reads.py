"""Tile reads side by side: today's mapped gather, strided positioned reads, and the
tile-contiguous copy (one pread a tile), from cold and warm files, with a pool of threads
as the virtual texture system reads them.

Why: a gather from a mapping faults its pages in holding the GIL, so a pool of readers
reads a cold file one page at a time; a positioned read releases the GIL, and a tile stored
contiguously is one of them instead of 34+. "Cold" drops the files' pages from the OS page
cache first (posix_fadvise DONTNEED: clean pages go, no root needed; a virtual machine's
host may still hold them, which the figures then understate).

    python -m lab.vt_reads --files 24 --size 2048 --tiles 800 --threads 2 12

Reported per mode, state and thread count: tiles/s (median of `--repeats`), and the ratio to
the mapped gather in the same run.

A second table ("cuts") reads what a camera cut asks for, through the system's own `TileIO`
(its worker pool and queue): per file a rectangle of neighbouring tiles, all asked for at
once, most wanted first. It compares the mapped gather, the tiled copy read a tile at a
time (`run_tiles` 1), and the tiled copy with neighbours batched into one read (the
default `RUN_TILES`).
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from engine import textures
from engine.streaming.virtual import keys as tile_keys
from engine.streaming.virtual.io import RUN_TILES, TiledCache, TileIO, TileSource
from engine.streaming.virtual.tiles import VirtualLayout, Wrap, virtual_levels
from engine.textures.ktx2_write import write_ktx2
from .common import drop_page_cache
from .virtual import write_doc

MODES = ("mapped", "pread_rows", "tiled")
CUT_MODES = ("mapped", "tiled_each", "tiled_runs")


def _make_files(folder: Path, count: int, size: int, seed: int) -> list[Path]:
    """`count` BC7 files of random blocks (reads do not look at the content)."""
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(count):
        path = folder / f"r{i:03d}.ktx2"
        levels = int(np.log2(size)) + 1
        chain = [rng.integers(0, 256, max(1, (size >> lv) // 4) ** 2 * 16,
                              dtype=np.uint8).tobytes() for lv in range(levels)]
        write_ktx2(path, "BC7", size, size, chain)
        paths.append(path)
    return paths


def _sources(paths: list[Path], mode: str) -> list[TileSource]:
    out = []
    for i, p in enumerate(paths):
        tf = textures.open(p)
        lay = VirtualLayout(tf.pixel_format, tf.width, tf.height,
                            virtual_levels(tf.pixel_format, tf.width, tf.height,
                                           len(tf.levels)), Wrap.REPEAT)
        out.append(TileSource(tf, lay, use_mmap=mode == "mapped"))
    return out


def _time_reads(sources: list[TileSource], tiles: list[tuple[int, int, int, int]],
                threads: int) -> float:
    """Seconds to read every tile with `threads` readers."""
    def one(t):
        vt, level, x, y = t
        return len(sources[vt].read_tile(level, x, y))

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(one, tiles))
    assert total > 0
    return time.perf_counter() - t0


def _cut_keys(layouts: list[VirtualLayout], rng: np.random.Generator,
              panel: int) -> list[int]:
    """Keys of one cut: per file a `panel` x `panel` rectangle of level 0 or 1 tiles at a
    random place (what a panel on screen asks for), in the order the requests rank them."""
    out = []
    for vt, lay in enumerate(layouts):
        level = int(rng.integers(0, min(2, lay.levels)))
        gx, gy = lay.grid(level)
        w, h = min(panel, gx), min(panel, gy)
        x0, y0 = int(rng.integers(0, gx - w + 1)), int(rng.integers(0, gy - h + 1))
        out += [tile_keys.pack_one(vt, level, x, y) for y in range(y0, y0 + h)
                for x in range(x0, x0 + w)]
    rng.shuffle(out)
    return out


def _time_cut(io: TileIO, keys: list[int]) -> float:
    """Seconds until every tile of the cut arrived through `io`."""
    t0 = time.perf_counter()
    for i, k in enumerate(keys):
        io.request(k, float(len(keys) - i))
    want = set(keys)
    while want:
        for res in io.poll(1 << 30):
            assert res.ok, res.error
            want.discard(int(res.level))
        time.sleep(0.0002)
    return time.perf_counter() - t0


def _cut_rows(paths: list[Path], folder: Path, threads: list[int], repeats: int,
              panel: int, seed: int) -> list[dict]:
    rows = []
    for state in ("cold", "warm"):
        for n in threads:
            row: dict = {"state": state, "threads": n}
            for mode in CUT_MODES:
                io = TileIO(workers=n, tiled_dir=False if mode == "mapped" else folder)
                for i, p in enumerate(paths):
                    tf = textures.open(p)
                    io.add(tf, VirtualLayout(tf.pixel_format, tf.width, tf.height,
                                             virtual_levels(tf.pixel_format, tf.width,
                                                            tf.height, len(tf.levels)),
                                             Wrap.REPEAT))
                if io.tiled is not None:
                    while not io.tiled.idle():
                        time.sleep(0.01)
                io.run_tiles = 1 if mode == "tiled_each" else RUN_TILES
                files = paths + [s.tiled_path for s in io.sources if s.tiled_path]
                rng = np.random.default_rng(seed)
                secs, count = [], 0
                for _ in range(repeats):
                    keys = _cut_keys([s.layout for s in io.sources], rng, panel)
                    count = len(keys)
                    if state == "cold":
                        drop_page_cache(*files)
                    else:
                        _time_cut(io, keys)
                    secs.append(_time_cut(io, keys))
                row[f"{mode}_tiles_per_s"] = round(count / statistics.median(secs))
                if mode != "mapped":
                    reads = sum(s._tiled.reads for s in io.sources if s._tiled)
                    row[f"{mode}_reads_per_tile"] = round(
                        reads / (count * repeats * (1 if state == "cold" else 2)), 2)
                io.close()
            base = row["mapped_tiles_per_s"]
            for mode in CUT_MODES[1:]:
                row[f"{mode}_over_mapped"] = round(row[f"{mode}_tiles_per_s"] / base, 2)
            rows.append(row)
    return rows


def run(files: int, size: int, tile_count: int, threads: list[int], repeats: int,
        seed: int, panel: int = 6) -> dict:
    with tempfile.TemporaryDirectory(prefix="vt_reads_") as tmp:
        folder = Path(tmp)
        paths = _make_files(folder, files, size, seed)
        cache = TiledCache(folder / "tiles")
        tiled = _sources(paths, "tiled")
        for src in tiled:
            cache.add(src)
        while not cache.idle():
            time.sleep(0.01)
        copies = [src.tiled_path for src in tiled]
        rng = np.random.default_rng(seed + 1)
        lay = tiled[0].layout
        tiles = []
        for _ in range(tile_count):  # the detail levels, where most of a cut's tiles are
            level = int(rng.integers(0, min(3, lay.levels)))
            gx, gy = lay.grid(level)
            tiles.append((int(rng.integers(files)), level, int(rng.integers(gx)),
                          int(rng.integers(gy))))
        rows = []
        for state in ("cold", "warm"):
            for n in threads:
                row = {"state": state, "threads": n}
                for mode in MODES:
                    secs = []
                    for _ in range(repeats):
                        srcs = tiled if mode == "tiled" else _sources(paths, mode)
                        if state == "cold":
                            drop_page_cache(*paths, *copies)
                        else:
                            _time_reads(srcs, tiles, n)
                        secs.append(_time_reads(srcs, tiles, n))
                        if srcs is not tiled:
                            for s in srcs:
                                s.close()
                    row[f"{mode}_tiles_per_s"] = round(tile_count / statistics.median(secs))
                base = row["mapped_tiles_per_s"]
                for mode in MODES[1:]:
                    row[f"{mode}_over_mapped"] = round(row[f"{mode}_tiles_per_s"] / base, 2)
                rows.append(row)
        source_bytes = sum(os.path.getsize(p) for p in paths)
        tiled_bytes = sum(os.path.getsize(p) for p in copies)
        for src in tiled:
            src.close()
        cache.close()
        cuts = _cut_rows(paths, folder / "tiles", threads, repeats, panel, seed + 2)
    return {"files": files, "size": size, "tiles": tile_count, "repeats": repeats,
            "tiled_over_source_bytes": round(tiled_bytes / source_bytes, 2), "rows": rows,
            "cut_panel_tiles": panel, "run_tiles": RUN_TILES, "cuts": cuts}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.vt_reads")
    p.add_argument("--files", type=int, default=24)
    p.add_argument("--size", type=int, default=2048)
    p.add_argument("--tiles", type=int, default=800)
    p.add_argument("--threads", type=int, nargs="+", default=[2, 12])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--panel", type=int, default=6,
                   help="tiles a side of each file's rectangle in the cut table")
    p.add_argument("--json")
    a = p.parse_args(argv)
    write_doc(run(a.files, a.size, a.tiles, a.threads, a.repeats, a.seed, a.panel), a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
