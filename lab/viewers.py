"""Viewers side by side on the same data (issue 23): the engine, napari and fastplotlib.

    python -m lab bench viewers                      (sizes chosen by the renderer)
    python -m lab.viewers --photos 1000 --huge 32768x32768 --json out.json

Data, generated once into the cache ($ENGINE_CACHE/bench-viewers): N phone-like JPEGs
(4000x3000 by default, distinct files of a few distinct pictures) and one huge image, a tiled
TIFF (512^2 tiles, deflate) with its pyramid in SubIFDs (halving down to 1024), which
napari reads as a multiscale image through tifffile's zarr store and dask, fastplotlib as one
whole array (it has no pyramid), and the engine as any other file (by strips where libvips
is installed).

Each viewer runs each data set in its own process (lab.viewer_children), the same
moves in each: first frame of everything fitted; zooms onto photographs (or to one image
pixel per screen pixel at three points of the huge image), each timed until its detail is
on screen; a pan of fixed steps, each frame timed. The engine runs the photographs twice
with its own cache: cold (nothing encoded yet) and warm (the same process start with the
thumbnails and the zoomed photographs already encoded), and the huge image the same way;
its zoom latency is reported apart for zooms onto images already encoded and not yet
encoded (read from the cache at the moment of each zoom).

Per run: GPU memory of the process (NVML's per-process figure, sampled by this process
every 0.1 s, where NVML sees the child; elsewhere the engine's ledger and the peers' texture
bytes computed from what they allocate, see viewer_children), peak RSS (VmHWM), time from
process start to first frame, time to full detail after a zoom, frame time while panning
(median, p95). A peer that cannot run (not installed, no display, no adapter, crash,
timeout) is a row saying so, with the reason.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from engine.gl.device import Device
from engine.textures.cachedir import cache_root
from engine.view.wall import ENCODERS
from .common import SuiteResult
from .streaming import is_software

log = logging.getLogger(__name__)

VIEWERS = ("engine", "napari", "fastplotlib")
PARTS = ("photos", "huge")
#: Goals (issue 23), engine against each peer in the same run.
PHOTO_MEMORY_GOAL = 0.10     # engine GPU memory <= 1/10 of a peer's, photographs
PHOTO_FIRST_FRAME_GOAL = 5.0  # a first frame at least 5x sooner
ZOOM_ENCODED_P95_S = 0.3
ZOOM_NOT_ENCODED_P95_S = 1.0
NVML_EVERY_S = 0.1
MiB = 1 << 20


@dataclass(frozen=True)
class ViewersProfile:
    name: str
    photos: int
    photo_size: tuple[int, int]
    huge: tuple[int, int]
    zooms: int            # photographs zoomed onto, spread over the set
    pan_frames: int
    size: tuple[int, int] = (1280, 720)
    photo_budget_mib: int = 256
    huge_budget_mib: int = 128
    timeout_s: float = 240.0  # per child process
    wait_s: float = 30.0      # per zoom, before it counts as not reached
    pan_zoom_steps: float = 4.0  # the pan's zoom: wheel steps of 1.2 in from fitting all
    encoder: str = "cpu"  # where the engine encodes full detail (ImageWall's `encoder`)


QUICK = ViewersProfile("quick", 6, (640, 480), (2048, 1536), 2, 5, size=(320, 180),
                       timeout_s=90.0, wait_s=15.0)
SOFTWARE = ViewersProfile("software", 50, (4000, 3000), (20000, 15000), 8, 40)
GPU = ViewersProfile("gpu", 1000, (4000, 3000), (32768, 32768), 12, 90, timeout_s=75.0,
                     wait_s=20.0)


def viewers_profile(device: Device, quick: bool) -> ViewersProfile:
    if quick:
        return QUICK
    return SOFTWARE if is_software(device) else GPU


# ---------------------------------------------------------------------------- data
def _picture(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """A photograph-like RGB image: smooth colour fields, edges and a little sensor grain,
    so JPEG's file size and decode cost are those of a phone picture, not of a flat one."""
    from PIL import Image

    small = rng.integers(0, 255, (max(2, height // 64), max(2, width // 64), 3), np.uint8)
    im = np.asarray(Image.fromarray(small).resize((width, height), Image.Resampling.BICUBIC),
                    np.int16)
    ys = (np.arange(height) // max(1, height // 30))[:, None]
    xs = (np.arange(width) // max(1, width // 40))[None, :]
    im += (((xs + ys) % 2) * 24).astype(np.int16)[..., None]
    im += rng.integers(-8, 9, (height, width, 1), dtype=np.int16)
    return np.clip(im, 0, 255).astype(np.uint8)


def make_photos(folder: Path, count: int, size: tuple[int, int], distinct: int = 4
                ) -> list[Path]:
    """`count` JPEGs of `size`: `distinct` pictures, each file its own bytes (a JPEG comment
    after SOI), so every file is its own cache entry and its own decode. Kept when present."""
    from PIL import Image

    width, height = size
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"p{i:05d}.jpg" for i in range(count)]
    if all(p.is_file() for p in paths):
        return paths
    rng = np.random.default_rng(23)
    bases = []
    for k in range(min(distinct, count)):
        tmp = folder / f".base{k}.jpg"
        Image.fromarray(_picture(rng, width, height)).save(tmp, quality=90)
        bases.append(tmp.read_bytes())
        tmp.unlink()
    for i, p in enumerate(paths):
        data = bases[i % len(bases)]
        note = f"copy {i}".encode()
        tmp = p.with_suffix(".tmp")
        tmp.write_bytes(data[:2] + b"\xff\xfe" + (len(note) + 2).to_bytes(2, "big") + note
                        + data[2:])
        tmp.replace(p)
    return paths


TILE = 512
#: In the huge image's file name: a changed picture is made anew, not found in the cache.
HUGE_VERSION = 2


def _huge_tile(ys: np.ndarray, xs: np.ndarray, width: int, height: int) -> np.ndarray:
    """The huge image at rows `ys` and columns `xs` (full-image coordinates): per-pixel noise
    and a fine pattern (detail only a sharp view shows: a coarser level averages the noise
    away), colour ramps and corner markers (which way up it is)."""
    y, x = ys[:, None], xs[None, :]
    t = np.empty((len(ys), len(xs), 3), np.uint8)
    noise = ((x * 2654435761 + y * 40503) >> 11) & 127  # a hash: no two neighbours alike
    t[..., 0] = (x * 127 // max(1, width - 1) + noise).astype(np.uint8)
    t[..., 1] = (y * 255 // max(1, height - 1)).astype(np.uint8)
    t[..., 2] = ((x ^ y) & 255).astype(np.uint8)
    q = min(width, height) // 8
    for (cy, cx), colour in (((0, 0), (255, 0, 0)), ((0, 1), (0, 255, 0)),
                             ((1, 0), (0, 0, 255)), ((1, 1), (255, 255, 0))):
        rows = (ys >= height - q) if cy else (ys < q)
        cols = (xs >= width - q) if cx else (xs < q)
        if rows.any() and cols.any():
            t[np.ix_(rows, cols)] = colour
    return t


def _tiles(width: int, height: int, step: int):
    """The tiles of the pyramid level that samples every `step`-th pixel, row-major (each
    level point-sampled from the full image's pattern: cheap, and exact enough)."""
    lw, lh = -(-width // step), -(-height // step)
    for ty in range(0, lh, TILE):
        ys = np.arange(ty, min(lh, ty + TILE), dtype=np.int64) * step
        for tx in range(0, lw, TILE):
            xs = np.arange(tx, min(lw, tx + TILE), dtype=np.int64) * step
            yield _huge_tile(ys, xs, width, height)


def make_huge(path: Path, size: tuple[int, int]) -> Path:
    """The huge image: a tiled, deflated TIFF with its pyramid as SubIFDs, written tile by
    tile (memory does not grow with it). Kept when present."""
    import tifffile

    if path.is_file():
        return path
    width, height = size
    steps = [1]
    while max(width, height) // (steps[-1] * 2) >= 1024:
        steps.append(steps[-1] * 2)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.tif")
    opts = {"tile": (TILE, TILE), "compression": "zlib", "compressionargs": {"level": 1},
            "photometric": "rgb", "dtype": np.uint8}
    with tifffile.TiffWriter(tmp, bigtiff=width * height * 3 > 2 ** 31) as tif:
        tif.write(_tiles(width, height, 1), shape=(height, width, 3),
                  subifds=len(steps) - 1, **opts)
        for s in steps[1:]:
            tif.write(_tiles(width, height, s),
                      shape=(-(-height // s), -(-width // s), 3), subfiletype=1, **opts)
    tmp.replace(path)
    return path


# ---------------------------------------------------------------------------- children
def _gpu_sampler(pid: int):
    """NVML's per-process bytes of `pid`, or the reason there is none."""
    from engine.memory.nvml import NvmlProbe, NvmlUnavailable

    probe = NvmlProbe.open(pid=pid)
    if isinstance(probe, NvmlUnavailable):
        return None, probe.reason
    return probe, None


@dataclass
class Display:
    """The X display a Qt peer draws on: the user's, or an Xvfb started for the run."""

    env: dict[str, str]
    process: subprocess.Popen | None = None
    note: str = ""

    def close(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None


def qt_display() -> Display:
    """A display for napari: $DISPLAY when set, else a private Xvfb where installed, else
    Qt's offscreen platform (napari's GL canvas may not draw there)."""
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return Display({})
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        return Display({"QT_QPA_PLATFORM": "offscreen"}, note="no display and no Xvfb: "
                       "Qt's offscreen platform")
    r, w = os.pipe()
    proc = subprocess.Popen([xvfb, "-displayfd", str(w), "-screen", "0", "2560x1600x24",
                             "-nolisten", "tcp"], pass_fds=(w,), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    os.close(w)
    with os.fdopen(r) as pipe:
        number = pipe.readline().strip()
    if not number:
        proc.kill()
        proc.wait()
        return Display({"QT_QPA_PLATFORM": "offscreen"}, note="Xvfb did not start: Qt's "
                       "offscreen platform")
    return Display({"DISPLAY": f":{number}"}, proc, note=f"Xvfb :{number}")


def run_child(viewer: str, spec: dict[str, Any], timeout_s: float, work: Path,
              env: dict[str, str] | None = None,
              module: str = "lab.viewer_children") -> dict[str, Any]:
    """One viewer on one data set in its own process (`python -m module VIEWER SPEC OUT`);
    its figures, NVML's bytes where NVML sees it, and why it did not finish where it did
    not."""
    tag = f"{viewer}-{spec['part']}-{spec.get('run', '')}"
    spec_path, out = work / f"{tag}.spec.json", work / f"{tag}.json"
    out.unlink(missing_ok=True)
    child_env = {**os.environ, **(env or {})}
    child_env.setdefault("XDG_RUNTIME_DIR", str(work))
    spec = {**spec, "spawn": time.time()}
    spec_path.write_text(json.dumps(spec))
    err_path = work / f"{tag}.stderr"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", module, viewer,
                                 str(spec_path), str(out)], stdout=err, stderr=err,
                                env=child_env, start_new_session=True)
        sampler, nvml_reason = _gpu_sampler(proc.pid)
        nvml_peak: int | None = None
        deadline = time.monotonic() + timeout_s
        timed_out = False
        try:
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    timed_out = True
                    os.killpg(proc.pid, 9)
                    proc.wait()
                    break
                if sampler is not None:
                    reading = sampler.read()
                    used = getattr(reading, "self_bytes", None)
                    if used is not None:
                        nvml_peak = max(nvml_peak or 0, int(used))
                time.sleep(NVML_EVERY_S)
        finally:
            if sampler is not None:
                sampler.close()
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
    try:
        result = json.loads(out.read_text())
    except (OSError, ValueError):
        result = {"viewer": viewer, "part": spec["part"], "available": False}
    result["run"] = spec.get("run", "")
    result["nvml_peak_bytes"] = nvml_peak
    if nvml_peak is None:
        result["nvml"] = nvml_reason or "NVML did not list the process"
    tail = " | ".join(err_path.read_text(errors="replace").strip().splitlines()[-6:])[-400:]
    if timed_out:
        result["status"] = f"timed out after {timeout_s:.0f} s"
    elif not result.get("available", True):
        result["status"] = f"unavailable: {result.get('reason')}"
    elif result.get("done"):  # every figure written; a crash after that is said, not lost
        result["status"] = "ok" if proc.returncode == 0 else \
            f"ok, then exit {proc.returncode} at shutdown: {tail}"
    else:
        result["status"] = f"exit {proc.returncode}: {tail}"
    return result


def finished(r: dict[str, Any]) -> bool:
    """Whether a child wrote all its figures (whatever happened at its exit)."""
    return bool(r.get("done"))


# ---------------------------------------------------------------------------- the suite
def _pct(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def _mib(n: int | None) -> float | None:
    return None if n is None else n / MiB


def _gpu_bytes(r: dict[str, Any]) -> tuple[int | None, str]:
    if r.get("nvml_peak_bytes") is not None:
        return r["nvml_peak_bytes"], "NVML per process"
    return r.get("gpu_bytes_peak"), r.get("gpu_bytes_source", "")


def source_sharpness(size: tuple[int, int], point: Sequence[float],
                     out: tuple[int, int]) -> float:
    """viewer_children.sharpness of the huge image itself, one pixel per pixel, in an
    output-sized window centred on `point`: what a viewer showing full detail there shows."""
    from .viewer_children import sharpness

    width, height = size
    w, h = out
    x0, y0 = int(round(point[0] - w / 2)), int(round(point[1] - h / 2))
    ys = np.clip(np.arange(y0, y0 + h), 0, height - 1)
    xs = np.clip(np.arange(x0, x0 + w), 0, width - 1)
    return sharpness(_huge_tile(ys, xs, width, height))


def add_sharpness(r: dict[str, Any], profile: ViewersProfile) -> None:
    """Each one-to-one zoom's sharpness over the source's at the same point (1: all the
    source's detail on screen; below 1: a coarser level, or blur)."""
    for z in r.get("zooms", []):
        if "sharpness" in z and z.get("point") is not None:
            ref = source_sharpness(profile.huge, z["point"], profile.size)
            z["sharpness_of_source"] = z["sharpness"] / ref if ref else None


def on_screen_s(z: dict[str, Any]) -> float:
    """Seconds from a zoom until its detail is on screen: the engine's settled picture
    (`shown_s`), else the time to the level (a peer's draw that has it)."""
    return float(z.get("shown_s", z["seconds"]))


def result_row(r: dict[str, Any]) -> dict[str, Any]:
    zooms = [on_screen_s(z) for z in r.get("zooms", []) if z.get("reached")]
    gpu, source = _gpu_bytes(r)
    rss = r.get("vmhwm_bytes")
    return {"part": r["part"], "viewer": r["viewer"] + (f" ({r['run']})" if r["run"] else ""),
            "status": r["status"], "first_frame_s": r.get("first_frame_s"),
            "zoom_to_detail_s_p50": _pct(zooms, 50), "zoom_to_detail_s_p95": _pct(zooms, 95),
            "zooms_reached": f"{len(zooms)}/{len(r.get('zooms', []))}",
            "sharpness_of_source": _pct([z["sharpness_of_source"] for z in r.get("zooms", [])
                                         if z.get("sharpness_of_source") is not None], 50),
            "pan_ms_p50": r.get("pan_ms_p50"), "pan_ms_p95": r.get("pan_ms_p95"),
            "gpu_mib": _mib(gpu), "gpu_source": source,
            "gpu_textures_mib": _mib(r.get("gpu_texture_bytes_peak")), "rss_mib": _mib(rss),
            "workers_rss_mib": _mib(r.get("workers_maxrss_bytes")),
            "over_budget_frames": r.get("over_budget_frames")}


def zoom_rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The engine's zoom latency per data set, apart for zooms onto detail already encoded
    and not yet encoded: p50/p95 of the seconds until the wanted level is resident, and until
    it is on screen (faded in and drawn; the goal's figure). Zooms that never got there
    within the wait count as the wait, so they weigh on p95."""
    rows = []
    for part in PARTS:
        for encoded, label in ((True, "encoded already"), (False, "not yet encoded")):
            secs = [on_screen_s(z) for r in results if r["viewer"] == "engine" and
                    r["part"] == part for z in r.get("zooms", [])
                    if z.get("encoded") == encoded]
            missed = sum(1 for r in results if r["viewer"] == "engine" and r["part"] == part
                         for z in r.get("zooms", [])
                         if z.get("encoded") == encoded and not z.get("reached"))
            if not secs:
                continue
            arrived = [z["seconds"] for r in results if r["viewer"] == "engine" and
                       r["part"] == part for z in r.get("zooms", [])
                       if z.get("encoded") == encoded]
            goal = ZOOM_ENCODED_P95_S if encoded else ZOOM_NOT_ENCODED_P95_S
            p95 = _pct(secs, 95)
            rows.append({"part": part, "viewer": f"engine zoom, {label}", "zooms": len(secs),
                         "not_reached": missed, "level_resident_s_p50": _pct(arrived, 50),
                         "level_resident_s_p95": _pct(arrived, 95), "zoom_s_p50": _pct(secs, 50),
                         "zoom_s_p95": p95, "goal_p95_s": goal,
                         "met": bool(p95 is not None and p95 <= goal and not missed)})
    return rows


def goal_notes(results: Sequence[dict[str, Any]], timeout_s: float) -> list[str]:
    """The issue's goals against each peer, as met/missed with the figures. A child cut
    short still counts for what it wrote: a peer with no first frame within the timeout is
    at least that slow, its GPU memory so far a lower bound (the ratio an upper bound)."""
    notes = []
    by = {(r["viewer"], r["part"], r["run"]): r for r in results}
    for part in PARTS:
        eng = by.get(("engine", part, "cold"))
        if eng is None or eng.get("first_frame_s") is None:
            continue
        for peer in VIEWERS[1:]:
            p = by.get((peer, part, ""))
            if p is None:
                continue
            if not finished(p):
                notes.append(f"{part}: {peer}: {p['status']}" + (
                    f" (loaded {p['loaded']} in {p['loaded_s']:.1f} s)" if p.get("loaded")
                    else ""))
                if not p.get("available", True):
                    continue
            bound = "" if finished(p) else "at most "
            p_gpu, p_src = _gpu_bytes(p)
            e_gpu, e_src = _gpu_bytes(eng)
            if p.get("nvml_peak_bytes") is None and eng.get("gpu_texture_bytes_peak"):
                # like for like: a peer's texture bytes against the engine's
                e_gpu, e_src = eng["gpu_texture_bytes_peak"], "engine ledger, textures"
            if e_gpu and p_gpu:
                ratio = e_gpu / p_gpu
                want = PHOTO_MEMORY_GOAL if part == "photos" else 1.0
                notes.append(f"{part}: GPU memory engine/{peer} = {bound}{ratio:.3g} (engine "
                             f"{e_gpu / MiB:.1f} MiB, {e_src}; {peer} {p_gpu / MiB:.1f} MiB, "
                             f"{p_src}); goal <= {want:g}: "
                             f"{'met' if ratio <= want else 'missed'}")
            if part == "photos":
                first = p.get("first_frame_s")
                least = "" if first is not None else "at least "
                first = timeout_s if first is None else first
                speed = first / eng["first_frame_s"]
                notes.append(f"photos: first frame {peer}/engine (cold) = {least}{speed:.3g}x "
                             f"({first:.2f} s vs {eng['first_frame_s']:.2f} s); goal >= "
                             f"{PHOTO_FIRST_FRAME_GOAL:g}x: "
                             f"{'met' if speed >= PHOTO_FIRST_FRAME_GOAL else 'missed'}")
            if part == "huge":
                # every zoom, one that never got there counted at the wait (a lower bound)
                ez = [on_screen_s(z) for z in eng.get("zooms", [])]
                pz = [on_screen_s(z) for z in p.get("zooms", []) if z.get("reached")]
                missed = sum(1 for z in eng.get("zooms", []) if not z.get("reached"))
                if ez and pz:
                    e50, p50 = float(np.median(ez)), float(np.median(pz))
                    notes.append(f"huge: time to sharp after a zoom, median: engine (cold) "
                                 f"{e50:.3g} s ({missed} of {len(ez)} not reached), {peer} "
                                 f"{p50:.3g} s; goal no slower: "
                                 f"{'met' if e50 <= p50 and not missed else 'missed'}")
                es = [z["sharpness_of_source"] for z in eng.get("zooms", [])
                      if z.get("sharpness_of_source") is not None]
                ps = [z["sharpness_of_source"] for z in p.get("zooms", [])
                      if z.get("sharpness_of_source") is not None]
                if es and ps:
                    e50, p50 = float(np.median(es)), float(np.median(ps))
                    notes.append(f"huge: sharpness at one to one after the wait, of the "
                                 f"source's, median: engine (cold) {e50:.3g}, {peer} "
                                 f"{p50:.3g}; goal at least as sharp: "
                                 f"{'met' if e50 >= p50 else 'missed'}")
    return notes


def run_viewers(profile: ViewersProfile, viewers: Sequence[str] = VIEWERS,
                parts: Sequence[str] = PARTS, data: Path | None = None,
                on_result: Callable[[SuiteResult, list[dict[str, Any]]], None] | None = None
                ) -> tuple[SuiteResult, list[dict[str, Any]]]:
    """Make or find the data, run every viewer on every part, each in its own process;
    the table's rows and notes, and each child's raw figures."""
    data = data or cache_root() / "bench-viewers"
    res = SuiteResult("viewers")
    pw, ph = profile.photo_size
    start = time.perf_counter()
    photos = make_photos(data / f"photos-{profile.photos}-{pw}x{ph}", profile.photos,
                         profile.photo_size) if "photos" in parts else []
    huge = make_huge(data / f"huge{HUGE_VERSION}-{profile.huge[0]}x{profile.huge[1]}.tif",
                     profile.huge) \
        if "huge" in parts else None
    res.notes.append(f"profile {profile.name}: {asdict(profile)}; data made or found in "
                     f"{time.perf_counter() - start:.1f} s under {data}")
    step = max(1, profile.photos // max(1, profile.zooms))
    base = {"size": list(profile.size), "photo_size": list(profile.photo_size),
            "photos": [str(p) for p in photos], "huge": str(huge) if huge else None,
            "zoom_targets": [(i * step + step // 2) % max(1, profile.photos)
                             for i in range(profile.zooms)],
            "pan_frames": profile.pan_frames, "wait_s": profile.wait_s,
            "pan_zoom_steps": profile.pan_zoom_steps,
            "workers": max(1, (os.cpu_count() or 2) - 1), "max_pixels": 1 << 33,
            "encoder": profile.encoder}
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="viewers-") as tmp:
        work = Path(tmp)
        cache = work / "engine-cache"
        display: Display | None = None
        try:
            for part in parts:
                mib = profile.photo_budget_mib if part == "photos" else profile.huge_budget_mib
                spec = {**base, "part": part, "cache": str(cache), "budget": f"{mib}MiB"}
                for viewer in viewers:
                    runs = ("cold", "warm") if viewer == "engine" else ("",)
                    env: dict[str, str] = {}
                    if viewer == "napari":
                        if display is None:
                            display = qt_display()
                            if display.note:
                                res.notes.append(f"napari: {display.note}")
                        env = display.env
                    for run in runs:
                        log.info("viewers: %s %s %s", viewer, part, run)
                        r = run_child(viewer, {**spec, "run": run}, profile.timeout_s, work,
                                      env)
                        add_sharpness(r, profile)
                        results.append(r)
                        res.rows.append(result_row(r))
                        if on_result is not None:
                            on_result(res, results)
        finally:
            if display is not None:
                display.close()
    res.rows.extend(zoom_rows(results))
    photo_bytes = profile.photos * pw * ph * 4
    res.notes.append(f"photos: {profile.photos} x {pw}x{ph} = {photo_bytes / MiB:.0f} MiB as "
                     f"RGBA8 textures, {photo_bytes / MiB / profile.photo_budget_mib:.1f}x "
                     f"the engine's {profile.photo_budget_mib} MiB budget; huge: "
                     f"{profile.huge[0]}x{profile.huge[1]} = "
                     f"{profile.huge[0] * profile.huge[1] * 4 / MiB:.0f} MiB as RGBA8, "
                     f"budget {profile.huge_budget_mib} MiB")
    res.notes.append("frame times: the engine's is its loop step (GPU finished); napari's a "
                     "canvas screenshot and fastplotlib's an offscreen draw, both with the "
                     "readback of the frame; first frame: from process start")
    res.notes.extend(goal_notes(results, profile.timeout_s))
    return res, results


def run(device: Device, quick: bool = False) -> SuiteResult:
    return run_viewers(viewers_profile(device, quick))[0]


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected WIDTHxHEIGHT") from None
    if w < 1 or h < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: sides must be >= 1")
    return w, h


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"{text!r}: seconds must be > 0 and finite")
    return value


def _names(allowed: Sequence[str]):
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(n for n in text.split(",") if n)
        bad = [n for n in names if n not in allowed]
        if bad or not names:
            raise argparse.ArgumentTypeError(f"{text!r}: comma-separated, of "
                                             f"{', '.join(allowed)}")
        return names
    return parse


def main(argv: list[str] | None = None) -> int:
    """`python -m lab.viewers`: the suite with its sizes chosen (the device stage
    sets them to fit one call), the JSON rewritten after every child."""
    from engine.cli_args import output_file, positive_int
    from .harness import rows_table

    ap = argparse.ArgumentParser(prog="python -m lab.viewers",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="CI sizes")
    ap.add_argument("--photos", type=positive_int, help="photographs (default by renderer: "
                    f"{SOFTWARE.photos} on llvmpipe, {GPU.photos} on a GPU)")
    ap.add_argument("--photo-size", type=_size, help="WxH of each photograph (4000x3000)")
    ap.add_argument("--huge", type=_size, help="WxH of the huge image (default "
                    f"{SOFTWARE.huge[0]}x{SOFTWARE.huge[1]} on llvmpipe, "
                    f"{GPU.huge[0]}x{GPU.huge[1]} on a GPU)")
    ap.add_argument("--zooms", type=positive_int, help="photographs zoomed onto")
    ap.add_argument("--pan-frames", type=positive_int, help="frames of the timed pan")
    ap.add_argument("--timeout", type=_seconds, help="seconds per child process")
    ap.add_argument("--viewers", type=_names(VIEWERS), default=VIEWERS,
                    help=f"comma-separated, of {', '.join(VIEWERS)} (default all)")
    ap.add_argument("--parts", type=_names(PARTS), default=PARTS,
                    help=f"comma-separated, of {', '.join(PARTS)} (default both)")
    ap.add_argument("--data", type=Path, help="where the data is made (default the cache)")
    ap.add_argument("--encoder", choices=ENCODERS, help="where the engine encodes full "
                    "detail (default cpu)")
    ap.add_argument("--json", type=output_file, help="write rows, notes and raw figures")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    device = Device.headless()
    try:
        profile = viewers_profile(device, args.quick)
        machine = {"renderer": device.caps.renderer, "gl_version": device.caps.gl_version,
                   "cpu_count": os.cpu_count()}
    finally:
        device.shutdown()
    changes = {k: v for k, v in (("photos", args.photos), ("photo_size", args.photo_size),
                                 ("huge", args.huge), ("zooms", args.zooms),
                                 ("pan_frames", args.pan_frames),
                                 ("timeout_s", args.timeout), ("encoder", args.encoder))
               if v is not None}
    profile = replace(profile, **changes)

    def save(res: SuiteResult, raw: list[dict[str, Any]]) -> None:
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(
                {"machine": machine, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "rows": res.rows, "notes": res.notes,
                 "raw": raw}, indent=1))

    res, raw = run_viewers(profile, args.viewers, args.parts, args.data, on_result=save)
    save(res, raw)
    print(f"== viewers ({machine['renderer']})")
    print(rows_table(res.rows))
    for note in res.notes:
        print(f"  note: {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
