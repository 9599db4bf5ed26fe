"""Sparse pages or the page cache for virtual-texture tiles: what a camera cut costs the render
thread each way, on the same tiles in one run.

The page cache (engine/gl/vt.py) writes each 136^2 slot (a 128^2 tile and its 4-texel border)
into one atlas texture: one glCompressedTexSubImage2D a tile. A sparse backend would give each
virtual texture its own ARB_sparse_texture texture and, for a tile whose page is not
committed yet, commit the page (glTexPageCommitmentARB) before writing the 128^2 tile into it;
when the pool is full it decommits the oldest pages. Both run on the render thread, so their
cost is what a frame pays. Pages hold page_w x page_h texels (256^2 for BC7 on the H200: four
tiles), so the sparse path also commits memory that holds tiles nobody asked for.

Each cut asks for `--panels` rectangles of 1..3 x 1..3 neighbouring tiles at random places in
random textures (about four tiles a panel, as a cut of the virtual bench's second profile).
Reported per path: ms per cut (commit, decommit and upload apart, with glFinish), p50 / p95 /
worst; bytes committed per cut; the frames a cut takes at an upload budget of `--frame-ms`.

    python -m lab.vt_sparse_probe OUT.json [--textures 64 --size 4096 --cuts 24]

Writes {"available": false, "reason": ...} where the driver has no ARB_sparse_texture.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs, np.float64), q)) if xs else 0.0


def _summary(xs: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(xs) if xs else 0.0, "p95": _pct(xs, 95),
            "max": max(xs) if xs else 0.0}


def _cuts(rng: np.random.Generator, cuts: int, panels: int, textures: int, tiles_per_side: int
          ) -> list[list[tuple[int, int, int]]]:
    out = []
    for _ in range(cuts):
        want: list[tuple[int, int, int]] = []
        seen: set[tuple[int, int, int]] = set()
        for _ in range(panels):
            t = int(rng.integers(textures))
            w, h = int(rng.integers(1, 4)), int(rng.integers(1, 4))
            x0 = int(rng.integers(0, tiles_per_side - w + 1))
            y0 = int(rng.integers(0, tiles_per_side - h + 1))
            for y in range(y0, y0 + h):
                for x in range(x0, x0 + w):
                    if (t, x, y) not in seen:
                        seen.add((t, x, y))
                        want.append((t, x, y))
        out.append(want)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--textures", type=int, default=64)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--cuts", type=int, default=24)
    ap.add_argument("--panels", type=int, default=83)
    ap.add_argument("--pool-mib", type=int, default=40, help="the page cache's size, and the "
                    "sparse path's committed-bytes ceiling")
    ap.add_argument("--frame-ms", type=float, default=2.0)
    args = ap.parse_args()

    from engine import formats
    from engine.gl import constants as K
    from engine.gl import sparse
    from engine.gl.device import Device
    from engine.gl.vt import PageCache, cache_grid
    from engine.textures.tiled import SLOT_TEXELS, TILE_TEXELS

    device = Device.headless()
    info = {"renderer": device.caps.renderer,
            "textures": args.textures, "size": args.size, "cuts": args.cuts,
            "panels": args.panels, "pool_mib": args.pool_mib}
    if not device.caps.sparse_texture:
        info.update(available=False, reason="the driver has no ARB_sparse_texture")
        _write(args.out, info)
        device.shutdown()
        return 0
    fmt = formats.get("BC7")
    raw = device._raw  # a probe of raw GL calls; the engine's own code goes through engine/gl
    page_w, page_h = sparse.page_size(device, fmt)
    tps = args.size // TILE_TEXELS
    tile_bytes = (TILE_TEXELS // 4) ** 2 * 16
    slot_bytes = (SLOT_TEXELS // 4) ** 2 * 16
    pool = args.pool_mib << 20
    rng = np.random.default_rng(7)
    cuts = _cuts(rng, args.cuts, args.panels, args.textures, tps)
    tile = bytes(rng.integers(0, 256, tile_bytes, np.uint8))
    slot = bytes(rng.integers(0, 256, slot_bytes, np.uint8))
    info.update(available=True, page=[page_w, page_h], tile_bytes=tile_bytes,
                slot_bytes=slot_bytes, tiles_per_cut=_summary([len(c) for c in cuts]))

    # --- the page cache: one atlas, LRU slots
    sx, sy = cache_grid(pool // slot_bytes, SLOT_TEXELS, device.caps.max_texture_size)
    cache = PageCache(device, fmt, sx, sy, SLOT_TEXELS, label="probe.cache")
    next_slot = 0
    cache_ms, cache_tile_us = [], []
    for want in cuts:
        device.finish()
        t0 = time.perf_counter()
        for _ in want:
            a = time.perf_counter()
            cache.upload_tiles([(next_slot, slot)])
            cache_tile_us.append((time.perf_counter() - a) * 1e6)
            next_slot = (next_slot + 1) % cache.slots
        device.finish()
        cache_ms.append((time.perf_counter() - t0) * 1e3)
    cache.release()

    # --- sparse: a texture a virtual texture, pages committed on demand, oldest decommitted
    texs = [sparse.sparse_texture(device, fmt, args.size, args.size, 1, label=f"probe.sparse{i}")[0]
            for i in range(args.textures)]
    committed: dict[tuple[int, int, int], None] = {}  # insertion order = age
    max_pages = pool // sparse.PAGE_BYTES
    sparse_ms, commit_us, decommit_us, upload_us, pages_per_cut, decommits_per_cut = \
        [], [], [], [], [], []
    ppt_x, ppt_y = max(1, page_w // TILE_TEXELS), max(1, page_h // TILE_TEXELS)
    raw.glPixelStorei(K.UNPACK_ALIGNMENT, 1)
    for want in cuts:
        device.finish()
        t0 = time.perf_counter()
        new_pages, dropped = 0, 0
        for t, x, y in want:
            page = (t, x // ppt_x, y // ppt_y)
            tex = texs[t]
            raw.glBindTexture(K.TEXTURE_2D, tex.glo)
            if page in committed:
                committed.pop(page)
            else:
                while len(committed) >= max_pages:
                    ot, opx, opy = next(iter(committed))
                    del committed[(ot, opx, opy)]
                    raw.glBindTexture(K.TEXTURE_2D, texs[ot].glo)
                    a = time.perf_counter()
                    raw.glTexPageCommitmentARB(K.TEXTURE_2D, 0, opx * page_w, opy * page_h, 0,
                                               page_w, page_h, 1, 0)
                    decommit_us.append((time.perf_counter() - a) * 1e6)
                    dropped += 1
                    raw.glBindTexture(K.TEXTURE_2D, tex.glo)
                a = time.perf_counter()
                raw.glTexPageCommitmentARB(K.TEXTURE_2D, 0, page[1] * page_w, page[2] * page_h, 0,
                                           page_w, page_h, 1, 1)
                commit_us.append((time.perf_counter() - a) * 1e6)
                new_pages += 1
            committed[page] = None
            a = time.perf_counter()
            raw.glCompressedTexSubImage2D(K.TEXTURE_2D, 0, x * TILE_TEXELS, y * TILE_TEXELS,
                                          TILE_TEXELS, TILE_TEXELS, fmt.gl_internal, tile_bytes,
                                          tile)
            upload_us.append((time.perf_counter() - a) * 1e6)
        raw.glBindTexture(K.TEXTURE_2D, 0)
        device.finish()
        sparse_ms.append((time.perf_counter() - t0) * 1e3)
        pages_per_cut.append(new_pages)
        decommits_per_cut.append(dropped)
    raw.glPixelStorei(K.UNPACK_ALIGNMENT, 4)
    device.check_errors("sparse probe")
    for tex in texs:
        device.release(tex)

    per_cut_tiles = [len(c) for c in cuts]
    cache_bytes = [n * slot_bytes for n in per_cut_tiles]
    sparse_bytes = [n * sparse.PAGE_BYTES for n in pages_per_cut]
    # the first cuts fill an empty pool; the steady state is after it is full
    steady = slice(max(1, len(cuts) // 3), None)
    info["page_cache"] = {"cut_ms": _summary(cache_ms[steady]),
                          "tile_upload_us": _summary(cache_tile_us),
                          "bytes_per_cut": _summary(cache_bytes[steady]),
                          "frames_per_cut_at_budget":
                              _summary([m / args.frame_ms for m in cache_ms[steady]])}
    info["sparse"] = {"cut_ms": _summary(sparse_ms[steady]),
                      "commit_us": _summary(commit_us), "decommit_us": _summary(decommit_us),
                      "tile_upload_us": _summary(upload_us),
                      "pages_committed_per_cut": _summary(pages_per_cut[steady]),
                      "pages_decommitted_per_cut": _summary(decommits_per_cut[steady]),
                      "bytes_per_cut": _summary(sparse_bytes[steady]),
                      "frames_per_cut_at_budget":
                          _summary([m / args.frame_ms for m in sparse_ms[steady]])}
    info["ratio_sparse_to_cache_cut_ms_p50"] = (
        info["sparse"]["cut_ms"]["p50"] / max(1e-9, info["page_cache"]["cut_ms"]["p50"]))
    info["ratio_sparse_to_cache_bytes_p50"] = (
        info["sparse"]["bytes_per_cut"]["p50"] / max(1, info["page_cache"]["bytes_per_cut"]["p50"]))
    info["leaks"] = len(device.shutdown())
    _write(args.out, info)
    return 0


def _write(path: str, info: dict) -> None:
    with open(path, "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    sys.exit(main())
