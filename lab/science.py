"""The engine's ScienceView beside napari on one generated 4-channel uint16 OME-Zarr
(issue 37), in one run.

    python -m lab.science --size 4096 --json out.json       (llvmpipe)
    python -m lab.science --size 16384 --screen 1920x1080   (a GPU)

The image (zarr v3, OME-NGFF 0.5, 256^2 chunks, levels halving down to 512) is written once
into the cache ($ENGINE_CACHE/bench-science), a row of chunks at a time in one process a
core, so memory does not grow with it: smooth structure plus noise, as a fluorescence
image. Each viewer runs in its own
process (lab.science_children): first frame of the whole image, then zooms to one
image pixel per screen pixel at fixed points, each timed until all four channels show level
0 completely, then a pan at one to one, a frame a step. `--layers N` opens the image N
times as N layers (4N channels, each layer read and cached on its own). Per viewer: process
start to first frame, zoom-to-sharp p50/p95, pan frame p50/p95 (and the engine's CPU and GPU
parts of it), peak GPU bytes (engine: its ledger, by category; napari: its texture uploads,
and apart the framebuffer its canvas draws into and the driver's census of every GL object
its canvas's share group holds, Qt's own included, sampled after each zoom; NVML's
per-process figure where it sees the child) and peak RSS. `--sources disk,http` runs the
engine a second time on the same image served over HTTP by a server this process starts on
localhost (the reads go through fsspec, as a user's remote store would); with `tiff`, on the
same image written as an OME-TIFF (zlib tiles, SubIFD levels); with `tiff-http`, on that
OME-TIFF over HTTP (a byte range a tile).
"""
from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from engine.science.pyramid import reduce2x2
from engine.textures.cachedir import cache_root
from .http_files import served
from .viewer_children import _percentile
from .viewers import qt_display, run_child

log = logging.getLogger(__name__)

CHANNELS = 4
CHUNK = 256
LIMITS = (8000.0, 56000.0)


def _band(c: int, y0: int, rows: int, width: int, rng: np.random.Generator) -> np.ndarray:
    yy = np.arange(y0, y0 + rows, dtype=np.float32)[:, None]
    xx = np.arange(width, dtype=np.float32)[None]
    f = 1.0 / (40 + 25 * c)
    base = np.sin(xx * f + c) * np.cos(yy * f * 1.3) + 0.5 * np.sin((xx + yy) * f * 0.21)
    noise = rng.standard_normal((rows, width), dtype=np.float32) * 0.2
    return np.clip((base + noise + 1.7) / 3.4 * 65535, 0, 65535).astype(np.uint16)


def _write_rows(path: str, level: int, y0: int) -> None:
    """One row of chunks (CHUNK rows, every channel) of `level`: generated for level 0 (its
    noise seeded by the row, so the image does not depend on the order rows are written),
    the 2x2 reduction of the two rows under it for the others."""
    import zarr

    done = Path(path) / "rows" / f"{level}-{y0}"
    if done.exists():
        return
    target = zarr.open_array(f"{path}/{level}", mode="r+")
    if level == 0:
        rows = min(CHUNK, target.shape[1] - y0)
        rng = np.random.default_rng((37, y0))
        target[:, y0:y0 + rows] = np.stack([_band(c, y0, rows, target.shape[2], rng)
                                            for c in range(CHANNELS)])
    else:
        fine = zarr.open_array(f"{path}/{level - 1}", mode="r")[:, 2 * y0:2 * (y0 + CHUNK)]
        target[:, y0:y0 + fine.shape[1] // 2] = np.stack(
            [reduce2x2(ch, np.dtype("uint16")) for ch in fine])
    done.write_text("")


def make_image(root: Path, size: int) -> tuple[Path, int]:
    """The OME-Zarr of `size`^2 (written once, by rows of chunks in one process a core, each
    level after the one it is reduced from; a finished marker says it is whole, and an
    interrupted run goes on from the rows it wrote) and its level count."""
    import zarr

    path = root / f"science-{size}.ome.zarr"
    levels = 1
    while size >> levels >= 512:
        levels += 1
    if (path / "done").exists():
        return path, levels
    if (path / "rows").is_dir():
        group = zarr.open_group(str(path), mode="r+")
    else:
        group = zarr.open_group(str(path), mode="w", zarr_format=3)
        for i in range(levels):
            group.create_array(str(i), shape=(CHANNELS, size >> i, size >> i),
                               chunks=(1, CHUNK, CHUNK), dtype="uint16")
        (path / "rows").mkdir()
    # spawned, not forked: zarr's event-loop thread does not survive a fork
    with ProcessPoolExecutor(os.cpu_count(), mp_context=get_context("spawn")) as pool:
        for i in range(levels):
            list(pool.map(_write_rows, itertools.repeat(str(path)), itertools.repeat(i),
                          range(0, size >> i, CHUNK)))
    axes = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"},
            {"name": "x", "type": "space"}]
    group.attrs["ome"] = {"version": "0.5", "multiscales": [
        {"axes": axes, "datasets": [{"path": str(i)} for i in range(levels)]}]}
    (path / "done").write_text("")
    return path, levels


#: the engine's runs after the OME-Zarr from disk, by `--sources` name
OTHER_SOURCES = ("tiff", "http", "tiff-http")
#: the sources each viewer reads (napari: through zarr, local or over fsspec's HTTP, and
#: tifffile's zarr store of a local OME-TIFF)
SOURCES_READ = {"engine": ("disk", *OTHER_SOURCES), "engine-bc4": ("disk", *OTHER_SOURCES),
                "napari": ("disk", "http", "tiff")}


def make_tiff(root: Path, size: int) -> Path:
    """The same image as an OME-TIFF (256^2 zlib tiles, the reduced levels as SubIFDs),
    written tile by tile from the OME-Zarr's levels (made first)."""
    import tifffile
    import zarr

    zpath, levels = make_image(root, size)
    path = root / f"science-{size}.ome.tif"
    done = root / f"science-{size}.ome.tif.done"
    if done.exists():
        return path
    group = zarr.open_group(str(zpath), mode="r")

    def tiles(level: int) -> Iterator[np.ndarray]:
        a = group[str(level)]
        for c in range(CHANNELS):
            for y0 in range(0, a.shape[1], CHUNK):
                band = a[c, y0:y0 + CHUNK]
                for x0 in range(0, a.shape[2], CHUNK):
                    yield band[:, x0:x0 + CHUNK]

    opts = {"tile": (CHUNK, CHUNK), "dtype": "uint16", "compression": "zlib",
            "compressionargs": {"level": 1}, "maxworkers": os.cpu_count()}
    with tifffile.TiffWriter(path, bigtiff=True, ome=True) as tw:
        tw.write(tiles(0), shape=(CHANNELS, size, size), subifds=levels - 1,
                 metadata={"axes": "CYX"}, **opts)
        for i in range(1, levels):
            tw.write(tiles(i), shape=(CHANNELS, size >> i, size >> i), subfiletype=1, **opts)
    done.write_text("")
    return path


def summarise(result: dict[str, Any]) -> dict[str, Any]:
    zooms = [z["seconds"] for z in result.get("zooms", []) if z.get("reached")]
    pan = result.get("pan_ms", [])
    cpu = result.get("pan_cpu_ms", [])
    gpu = result.get("pan_gpu_ms", [])
    paced = result.get("paced_pan_ms", [])
    return {"viewer": result.get("viewer"), "source": result.get("source", "disk"),
            "available": result.get("available", False),
            "reason": result.get("reason"), "first_frame_s": result.get("first_frame_s"),
            "first_complete_s": result.get("first_complete_s"),
            "zooms_reached": f"{len(zooms)}/{len(result.get('zooms', []))}",
            "zoom_sharp_p50_s": _percentile(zooms, 50), "zoom_sharp_p95_s": _percentile(zooms, 95),
            "pan_frame_ms_p50": _percentile(pan, 50), "pan_frame_ms_p95": _percentile(pan, 95),
            "pan_cpu_ms_p50": _percentile(cpu, 50), "pan_cpu_ms_p95": _percentile(cpu, 95),
            "pan_gpu_ms_p50": _percentile(gpu, 50), "pan_gpu_ms_p95": _percentile(gpu, 95),
            "paced_pan_ms_p50": _percentile(paced, 50),
            "paced_pan_ms_p95": _percentile(paced, 95),
            "paced_pan_over_60hz": sum(ms > 1e3 / 60 for ms in paced) if paced else None,
            "gpu_bytes_peak": result.get("gpu_bytes_peak"),
            "gpu_bytes_by_category": result.get("gpu_bytes_by_category"),
            "framebuffer_bytes": (result.get("framebuffer") or {}).get("bytes"),
            "gpu_census_peak_bytes": (result.get("gpu_census") or {}).get("bytes"),
            "nvml_peak_bytes": result.get("nvml_peak_bytes"),
            "rss_peak_bytes": result.get("vmhwm_bytes")}


def run(size: int, screen: tuple[int, int], zooms: int, budget: str, viewers: list[str],
        timeout_s: float, wait_s: float, sources: tuple[str, ...] = ("disk",),
        layers: int = 1, checkpoint: Path | None = None) -> dict[str, Any]:
    """Each viewer and source in a child; with `checkpoint`, the rows so far are written
    there after each, so a run cut off by its time box still leaves what it measured."""
    root = cache_root() / "bench-science"
    root.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    path, levels = make_image(root, size)
    made_s = time.perf_counter() - start
    spec = {"part": "science", "path": str(path), "levels": levels, "shape": [size, size],
            "channels": CHANNELS, "size": list(screen), "zooms": zooms, "budget": budget,
            "limits": list(LIMITS), "wait_s": wait_s, "layers": layers}
    rows: list[dict[str, Any]] = []
    out = {"image": {"size": size, "channels": CHANNELS, "dtype": "uint16", "levels": levels,
                     "made_s": round(made_s, 2)}, "layers": layers,
           "screen": list(screen), "budget": budget, "viewers": rows,
           "date": time.strftime("%Y-%m-%d")}

    def save() -> None:
        if checkpoint is not None:
            checkpoint.write_text(json.dumps(out, indent=1))

    def add(result: dict[str, Any]) -> None:
        rows.append({**summarise(result), "raw": result})
        save()

    with tempfile.TemporaryDirectory(prefix="bench-science-") as work:
        def child(viewer: str, source: str, where: str) -> None:
            display = qt_display() if viewer == "napari" else None
            try:
                result = run_child(viewer, {**spec, "path": where}, timeout_s, Path(work),
                                   env=display.env if display else None,
                                   module="lab.science_children")
                add({**result, "source": source})
            finally:
                if display is not None:
                    display.close()

        if "disk" in sources:
            for viewer in viewers:
                child(viewer, "disk", str(path))
        others = [s for s in OTHER_SOURCES if s in sources]
        if others:
            tiff = make_tiff(root, size) if {"tiff", "tiff-http"} & set(others) else None
            with served(root) as base:
                where = {"http": f"{base}/{path.name}",
                         "tiff": str(tiff), "tiff-http": f"{base}/{tiff.name if tiff else ''}"}
                for source in others:
                    for viewer in viewers:
                        if source in SOURCES_READ[viewer]:
                            child(viewer, source, where[source])
    save()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.science", description=__doc__)
    p.add_argument("--size", type=int, default=4096, help="image edge in pixels")
    p.add_argument("--screen", default="1280x720", help="output WIDTHxHEIGHT")
    p.add_argument("--zooms", type=int, default=8, help="zooms to 1:1 timed")
    p.add_argument("--budget", default="256MiB", help="the engine's budget")
    p.add_argument("--viewers", default="engine,napari")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds a viewer may take")
    p.add_argument("--wait", type=float, default=20.0, help="seconds a zoom may take")
    p.add_argument("--sources", default="disk", help="disk, with http: the engine again "
                   "on the image served over HTTP from localhost; with tiff: on the same "
                   "image as an OME-TIFF; with tiff-http: that OME-TIFF over HTTP (byte "
                   "ranges)")
    p.add_argument("--layers", type=int, default=1, help="the image opened this many times, "
                   "as layers (5: 20 channels)")
    p.add_argument("--json", type=Path, help="write the results here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    w, h = (int(v) for v in args.screen.lower().split("x"))
    out = run(args.size, (w, h), args.zooms, args.budget, args.viewers.split(","),
              args.timeout, args.wait, tuple(args.sources.split(",")), args.layers, args.json)
    print(json.dumps([{k: v for k, v in r.items() if k != "raw"} for r in out["viewers"]],
                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
