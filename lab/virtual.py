"""Virtual texturing benchmark: a wall of large BC7 textures seen through a small page cache.

The flight: a camera cuts between random stops in front of a wall of textured panels, dollies
10% closer to its target over the first half of each stop's `hold` frames and then holds
still, so each stop's last frame is a settled view. Only GPU feedback drives residency.
Measured in one run, side by side:
  - content to budget: bytes of the textures on disk over the cache allowance;
  - budget: frames whose virtual-texture memory (cache + table, as ledgered) exceeded the
    allowance (goal 0);
  - quality: PSNR of each stop's settled (last) frame against the same view drawn from fully
    resident textures with GL trilinear filtering (goal >= 38 dB); the reference uploads only
    the panels in view, so it runs where the whole set could not be resident;
  - camera cut: wall time from a cut until 95% of the feedback pixels (of a readback made
    after the cut) find their wanted tile resident, p50/p95; files are dropped from the OS
    page cache first (posix_fadvise), so the first reads come from disk;
  - efficiency: bytes of the tiles the screen asked for (visible tier) and of the whole
    cache, against the screen's own need (output pixels x bytes per texel) and against the
    whole-level floor on the same views (per visible texture every level from the finest one
    the feedback asked for: what whole-level streaming must hold at least);
  - cost: CPU ms per frame of feedback readback + reduction + planning + page-table update,
    GPU ms of the feedback pass (GL timer queries around its clear, draw and PBO copy,
    collected frames late: p50/p95), tiles uploaded per frame and tile upload throughput
    against a synchronous upload loop. `python -m lab.vt_cpu` replays the same
    flight's feedback through the CPU path alone.

Tiles are read from tile-contiguous copies in the cache folder (one positioned read a tile,
made before the flight on first use and kept; `--no-tiled` reads the files as they are).

`--quick`: 16 textures of 1024^2 through 1 MiB at 192x108, 3 stops (a smoke run). Default:
64 of 4096^2 through 3 MiB at 480x270 (llvmpipe). The full size for a GPU is set with
`python -m lab.virtual --textures 200 --size 4096 --allowance 192MiB
--output 3840x2160` (see `main`).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import statistics
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from engine import textures
from engine.cli_args import size_arg
from engine.formats import PixelFormat
from engine.formats import get as get_format
from engine.gl.device import Device
from engine.gl.timing import GpuTimer
from engine.gl.upload import upload_texture_file
from engine.gl.vt import VT_CATEGORY, QuadBatch, set_wrap
from engine.memory.sizes import format_bytes, level_bytes, mip_dims, parse_bytes
from engine.streaming.virtual.quads import QuadRenderer, view_projection, wall
from engine.streaming.virtual.system import VirtualTextureSystem
from engine.textures.transcode import block_compatible, served_format
from .vt_phases import PhaseClock
from engine.streaming.virtual.keys import unpack as unpack_keys
from engine.streaming.virtual.tiles import SLOT_TEXELS, slot_bytes
from engine.textures.quality import psnr
from .common import SuiteResult, drop_page_cache

log = logging.getLogger(__name__)

PSNR_GOAL_DB = 38.0
CUT_GOAL_MS = 300.0
EFFICIENCY_GOAL = 3.0
IDENTICAL_DB = 100.0


@dataclass(frozen=True)
class VirtualProfile:
    textures: int = 64
    size: int = 4096
    allowance: int = 3 << 20
    output: tuple[int, int] = (480, 270)
    stops: int = 12
    hold: int = 30
    feedback_scale: float = 0.25
    max_uploads: int = 32
    upload_ms: float | None = None  # per-frame upload budget (None: max_uploads tiles)
    io_workers: int = 2
    tiled: bool = True  # read tile-contiguous copies (made before the flight), not the files
    max_distance: float = 2.5  # farthest camera stop, in panel widths (farther: more panels)
    seed: int = 13
    files: tuple[str, ...] = ()  # KTX2 files to use instead of the gallery's
    dump: str = ""  # a folder for each stop's settled frame and its reference (PNG)
    #: "gpu" / "cpu": where the feedback is reduced ("": as the device profile says)
    feedback_reduce: str = ""

    @staticmethod
    def quick() -> VirtualProfile:
        return VirtualProfile(textures=16, size=1024, allowance=1 << 20, output=(192, 108),
                              stops=3, hold=12)


def gallery_paths(count: int, size: int) -> list[Path]:
    """The gallery's generated textures (the user cache), as the virtual benches read them."""
    from engine.demos.gallery_assets import gallery_textures

    return list(gallery_textures(count, size).paths)


def _visible_quads(vertices: np.ndarray, view_proj) -> list[int]:
    """Quads with any part inside the view (conservative: the clip-space box of corners)."""
    m = np.array(view_proj.to_list(), np.float64)  # column-major rows = columns
    pos = np.c_[vertices[:, :3], np.ones(len(vertices))] @ m
    out = []
    for q in range(len(vertices) // 6):
        c = pos[q * 6:(q + 1) * 6]
        w = c[:, 3]
        if (w <= 1e-6).all():
            continue
        w = np.maximum(w, 1e-6)
        x, y = c[:, 0] / w, c[:, 1] / w
        if x.max() >= -1 and x.min() <= 1 and y.max() >= -1 and y.min() <= 1:
            out.append(q)
    return out


def _whole_level_floor(vts: VirtualTextureSystem, files) -> int:
    """Bytes whole-level streaming must hold for the newest feedback: per texture seen, its
    levels from the finest one asked for down to the smallest."""
    keys, _ = vts.last_feedback
    if keys.size == 0:
        return 0
    vt, level, _, _ = unpack_keys(keys)
    total = 0
    for v in np.unique(vt):
        tf = files[int(v)]
        finest = int(level[vt == v].min())
        total += sum(level_bytes(tf.pixel_format, *mip_dims(tf.width, tf.height, i))
                     for i in range(finest, len(tf.levels)))
    return total


def _raw_upload_ceiling(device: Device, vts: VirtualTextureSystem, fmt: PixelFormat,
                        seconds: float = 0.5) -> float:
    """Bytes/s of synchronous uploads of real level-0 tiles (real blocks: a driver may
    transcode on upload) from client memory, then glFinish, with no I/O running."""
    src = vts.io.sources[0]
    gx, gy = src.layout.grid(0)
    tiles = [src.read_tile(0, i % gx, (i // gx) % gy) for i in range(16)]
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        batch = [(i % vts.cache.slots, tiles[(n + i) % len(tiles)]) for i in range(16)]
        vts.cache.upload_tiles(batch)
        n += len(batch)
        device.finish()
    rate = n * slot_bytes(fmt) / (time.perf_counter() - t0)
    vts.cache.uploads -= n
    vts.cache.uploaded_bytes -= n * slot_bytes(fmt)
    return rate


def stop_views(rng: np.random.Generator, half_w: float, half_h: float, hold: int,
               aspect: float, max_distance: float = 2.5) -> list:
    """One stop of the flight: a random target on the wall and `hold` view-projections.
    The camera dollies 10% closer over the first half of the stop, then holds still, so
    the stop's last frame is a settled view; the camera stands 0.35 to `max_distance`
    panel widths from the wall. Shared with the CPU replay (vt_cpu.py), so both see the
    same frames for a seed."""
    tx, ty = rng.uniform(-half_w, half_w), rng.uniform(-half_h, half_h)
    dist = rng.uniform(0.35, max_distance)
    side = rng.uniform(-0.8, 0.8) * dist
    eye0 = np.array([tx + side, ty + rng.uniform(-0.3, 0.3) * dist, dist])
    target = np.array((tx, ty, 0.0))
    return [view_projection(tuple(target + (eye0 - target) * (
        1 - 0.2 * min(h, hold // 2) / hold)), tuple(target), aspect) for h in range(hold)]


def wall_extent(count: int) -> tuple[int, int]:
    """Columns and rows of the bench's wall of `count` panels (about 16:9)."""
    columns = max(1, round(math.sqrt(count * 16 / 9)))
    return columns, -(-count // columns)


def rank_percentile(values: list[float], q: float) -> float:
    """The q-th percentile by nearest rank (a measured value, not an interpolation); NaN of
    nothing."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def run_profile(device: Device, prof: VirtualProfile) -> SuiteResult:
    res = SuiteResult("virtual")
    paths = [Path(f) for f in prof.files][:prof.textures] if prof.files else \
        gallery_paths(prof.textures, prof.size)
    files = [textures.open(p) for p in paths]
    content = sum(sum(lv.nbytes for lv in tf.levels) for tf in files)
    rng = np.random.default_rng(prof.seed)
    vts = VirtualTextureSystem(device, prof.allowance, max_uploads=prof.max_uploads,
                               upload_budget_ms=prof.upload_ms, io_workers=prof.io_workers,
                               tiled_dir=prof.tiled,
                               feedback_reduce=(prof.feedback_reduce == "gpu"
                                                if prof.feedback_reduce else None))
    renderer = QuadRenderer(device, prof.output, feedback_scale=prof.feedback_scale)
    quads = None
    refs: OrderedDict[int, object] = OrderedDict()
    fb_timer = GpuTimer(device, label="bench.vt.feedback")
    fb_gpu: list[tuple[int, float]] = []
    fb_skipped: set[int] = set()
    phases = PhaseClock(vts)
    try:
        t0 = time.perf_counter()
        ids = [vts.register(p) for p in paths]
        register_s = time.perf_counter() - t0
        tiling_s = 0.0
        if vts.io.tiled is not None:  # copies made once (cached); the flight reads them
            t1 = time.perf_counter()
            while not vts.io.tiled.idle():
                time.sleep(0.01)
            tiling_s = time.perf_counter() - t1
        dropped = drop_page_cache(*paths, *[s.tiled_path for s in vts.io.sources
                                            if s.tiled_path is not None])
        columns, rows = wall_extent(len(ids))
        verts = wall(columns, rows, ids, size=1.0, gap=0.1)
        quads = QuadBatch(device, verts, label="bench.vt.wall")
        vts.fit_screen(*prof.output)  # as the provider does each frame
        vts.update()
        fmt = vts.fmt
        aspect = prof.output[0] / prof.output[1]
        half_w, half_h = columns * 1.1 / 2, rows * 1.1 / 2
        frame, over, frame_ms, cpu_ms, tiles, cut_ms, psnrs = 0, 0, [], [], [], [], []
        cut_frames: list[float] = []
        panels: list[int] = []
        stop_notes: list[str] = []
        eff_rows = []
        cache_b: list[int] = []  # the page cache and table, every frame
        screen_need = prof.output[0] * prof.output[1] * fmt.block_bytes / (
            fmt.block_w * fmt.block_h)
        upload_bytes, upload_s = 0, 0.0
        for stop in range(prof.stops):
            views = stop_views(rng, half_w, half_h, prof.hold, aspect, prof.max_distance)
            cut_frame, t_cut, reached, reached_frames = frame, time.perf_counter(), None, None
            for h, vp in enumerate(views):
                tf0 = time.perf_counter()
                # Wait for the previous frame's passes first: a software rasterizer would
                # otherwise charge that wait to the first upload into the busy cache.
                device.finish()
                vts.begin_frame(frame)
                st = vts.update()
                image = renderer.draw_virtual(vts, quads, vp, read=h == prof.hold - 1)
                # The feedback pass (clear, draw, start of the PBO copy) between timer
                # queries; results are collected frames later, never waited for.
                fb_gpu.extend(fb_timer.poll())  # before begin(), which would poll them away
                fb_timer.begin(frame)
                if not renderer.draw_feedback(vts, quads, vp, frame):
                    fb_skipped.add(frame)
                fb_timer.end()
                frame_ms.append((time.perf_counter() - tf0) * 1e3)
                cache_b.append(vts.nbytes)
                cpu_ms.append(st.feedback_ms + st.table_ms)
                phases.frame_done(cpu_ms[-1], feedback_ms=st.feedback_ms,
                                  update_ms=st.update_ms)
                tiles.append(st.tiles_uploaded)
                upload_bytes += st.bytes_uploaded
                upload_s += st.upload_ms / 1e3
                held = device.ledger.category_total(VT_CATEGORY)
                if vts.nbytes > prof.allowance or held > prof.allowance:
                    over += 1
                device.end_frame(frame)
                if reached is None and vts.feedback_frame >= cut_frame and \
                        vts.wanted_resident_fraction() >= 0.95:
                    reached = (time.perf_counter() - t_cut) * 1e3
                    reached_frames = frame - cut_frame + 1
                frame += 1
            cut_ms.append(reached if reached is not None else float("inf"))
            cut_frames.append(reached_frames if reached_frames is not None else float("inf"))
            # Settled: score the stop's last frame against fully resident textures.
            visible = _visible_quads(verts, vp)
            panels.append(len(visible))
            for q in visible:
                v = ids[q % len(ids)]
                if v not in refs:
                    needed = {ids[k % len(ids)] for k in visible}
                    for old in [k for k in refs if k not in needed][:max(0, len(refs) - 11)]:
                        device.release(refs.pop(old))
                    lay = vts.textures[v].layout
                    tex = upload_texture_file(device, files[v], last_level=lay.levels - 1,
                                              category="texture.static", label="bench.vt.ref")
                    set_wrap(device, tex, True)
                    refs[v] = tex
                refs.move_to_end(v)
            ref_img = _draw_visible_reference(renderer, quads, vp, refs, ids, visible)
            db = psnr(image[..., :3], ref_img[..., :3])
            psnrs.append(min(db, IDENTICAL_DB))
            pst = vts.policy.stats()
            stop_notes.append(f"stop {stop}: {len(visible)} panels, psnr {db:.1f} dB, wanted "
                              f"resident {vts.wanted_resident_fraction():.2f}, tiles "
                              f"{pst.occupied}/{pst.slots} ({pst.visible} visible), missing "
                              f"{pst.wanted_missing}, feedback keys {vts.last_feedback[0].size}")
            if prof.dump:
                from PIL import Image
                Path(prof.dump).mkdir(parents=True, exist_ok=True)
                step = max(1, prof.output[0] // 1920)  # keep the files small
                for tag, img in (("vt", image), ("ref", ref_img)):
                    Image.fromarray(np.ascontiguousarray(img[::step, ::step, :3])).save(
                        Path(prof.dump) / f"stop{stop}_{tag}.png")
            visible_tiles = vts.visible_tile_count()
            eff_rows.append({"visible_tiles_bytes": visible_tiles * slot_bytes(fmt),
                             "whole_level_floor": _whole_level_floor(vts, files)})
        device.finish()
        fb_gpu.extend(fb_timer.poll())
        fb_ms = [ms for f, ms in fb_gpu if f not in fb_skipped]
        raw_rate = _raw_upload_ceiling(device, vts, fmt)
        vis_b = [r["visible_tiles_bytes"] for r in eff_rows]
        whole_b = [r["whole_level_floor"] for r in eff_rows]
        stream_rate = upload_bytes / upload_s if upload_s > 0 else float("nan")
        res.rows.append({
            "textures": len(ids), "size": prof.size, "content": format_bytes(content),
            "allowance": format_bytes(prof.allowance),
            "content_to_budget": round(content / prof.allowance, 1),
            "cache_slots": vts.cache.slots, "output": f"{prof.output[0]}x{prof.output[1]}",
            "frames": frame, "frames_over_budget": over,
            "psnr_settled_min_db": round(min(psnrs), 2),
            "psnr_settled_median_db": round(statistics.median(psnrs), 2),
            "cut_to_95pct_p50_ms": round(rank_percentile(cut_ms, 50), 1),
            "cut_to_95pct_p95_ms": round(rank_percentile(cut_ms, 95), 1),
            "cut_to_95pct_p50_frames": rank_percentile(cut_frames, 50),
            "cut_to_95pct_p95_frames": rank_percentile(cut_frames, 95),
            "visible_tiles_over_screen_need_median": round(statistics.median(vis_b)
                                                           / screen_need, 2),
            "cache_over_screen_need_median": round(statistics.median(cache_b) / screen_need, 2),
            "cache_over_screen_need_max": round(max(cache_b) / screen_need, 2),
            "cache_resizes": vts.resizes,
            "whole_level_floor_over_screen_need_median": round(statistics.median(whole_b)
                                                               / screen_need, 2),
            "cpu_feedback_table_ms_p50": round(rank_percentile(cpu_ms, 50), 3),
            "cpu_feedback_table_ms_p95": round(rank_percentile(cpu_ms, 95), 3),
            "cpu_feedback_table_ms_p99": round(rank_percentile(cpu_ms, 99), 3),
            "psnr_settled_per_stop_db": [round(p, 1) for p in psnrs],
            "panels_per_stop": panels,
            "cut_to_95pct_per_stop_ms": [round(c, 1) if math.isfinite(c) else None
                                         for c in cut_ms],
            "visible_tiles_over_screen_need_max": round(max(vis_b) / screen_need, 2),
            "feedback_gpu_ms_p50": round(rank_percentile(fb_ms, 50), 3),
            "feedback_gpu_ms_p95": round(rank_percentile(fb_ms, 95), 3),
            "feedback_gpu_samples": len(fb_ms),
            "feedback_size": "x".join(map(str, renderer.feedback_size)),
            "frame_ms_p50": round(rank_percentile(frame_ms, 50), 1),
            "tiles_per_frame_p50": rank_percentile(tiles, 50), "tiles_per_frame_max": max(tiles),
            "tile_upload_MBps": round(stream_rate / 1e6, 1),
            "raw_upload_MBps": round(raw_rate / 1e6, 1),
            "upload_over_raw": round(stream_rate / raw_rate, 2),
            "register_ms_per_texture": round(register_s * 1e3 / len(ids), 2),
            "tiled_reads": vts.io.tiled is not None,
            "tiled_copies_made_s": round(tiling_s, 2),
            "feedback_reduced_on": "gpu" if vts.feedback.reducer is not None else "cpu",
            "cpu_worst_frames": phases.worst(),
        })
        res.notes.append(
            f"goals: frames over budget 0 ({'met' if over == 0 else 'NOT met'}); settled "
            f"PSNR >= {PSNR_GOAL_DB} dB ({'met' if min(psnrs) >= PSNR_GOAL_DB else 'NOT met'});"
            f" cut to 95% p95 <= {CUT_GOAL_MS:.0f} ms "
            f"({'met' if rank_percentile(cut_ms, 95) <= CUT_GOAL_MS else 'NOT met'}); visible tiles <= "
            f"{EFFICIENCY_GOAL}x screen need "
            f"({'met' if statistics.median(vis_b) <= EFFICIENCY_GOAL * screen_need else 'NOT met'})")
        res.notes.append(f"per stop PSNR dB: {[round(p, 1) for p in psnrs]}; cut ms: "
                         f"{[round(c) if math.isfinite(c) else 'never' for c in cut_ms]}")
        res.notes.extend(stop_notes)
        totals = vts.history
        res.notes.append(f"tiles uploaded {sum(t.tiles_uploaded for t in totals)}, "
                         f"deferred (no slot yet) {sum(t.deferred for t in totals)}, evicted "
                         f"{sum(t.evictions for t in totals)}; I/O {vts.io.stats()}")
        res.notes.append("files dropped from the OS page cache before the run: "
                         f"{'yes' if dropped else 'no (no posix_fadvise)'}; the flight moves "
                         "at frame pace, not wall-clock pace (a software rasterizer is slow)")
        res.notes.append(f"slot = {SLOT_TEXELS}^2 texels ({slot_bytes(fmt)} bytes of "
                         f"{fmt.name}); whole-level floor = every level from the finest one "
                         f"the feedback asked for, per visible texture")
    finally:
        phases.close()
        fb_timer.release()
        for tex in refs.values():
            device.release(tex)
        if quads is not None:
            quads.release()
        renderer.release()
        vts.release()
    return res


def _draw_visible_reference(renderer: QuadRenderer, quads: QuadBatch, vp, refs, ids,
                            visible: list[int]) -> np.ndarray:
    """The reference frame: only the quads in view, each from its resident texture."""
    prog = renderer.reference_prog
    renderer.target.begin()
    prog["u_view_proj"].write(vp.to_bytes())
    if "u_texture" in prog:
        prog["u_texture"].value = 0
    for q in visible:
        refs[ids[q % len(ids)]].use(0)
        quads.draw(prog, q, 1)
    return renderer.target.read()


def run(device: Device, quick: bool = False) -> SuiteResult:
    """The harness entry: the quick smoke profile or the llvmpipe-sized default; nothing
    where the driver holds BC7 in a format without 4x4 blocks (no tiles to cut)."""
    bc7 = get_format("BC7_SRGB")
    served = served_format(bc7, device.caps.can_sample)
    if not block_compatible(bc7, served):
        res = SuiteResult("virtual")
        res.rows.append({"part": "skipped", "why": f"BC7 is served as {served.name}"})
        res.notes.append(f"no virtual textures on this driver: it serves BC7 as {served.name},"
                         " which has no 4x4 blocks to cut tiles from")
        return res
    return run_profile(device, VirtualProfile.quick() if quick else VirtualProfile())


def add_profile_args(p: argparse.ArgumentParser, d: VirtualProfile) -> None:
    """The flight's options, shared by this bench and the CPU replay (lab.vt_cpu)."""
    p.add_argument("--quick", action="store_true")
    p.add_argument("--textures", type=int, default=d.textures)
    p.add_argument("--size", type=int, default=d.size)
    p.add_argument("--allowance", type=parse_bytes, default=d.allowance)
    p.add_argument("--output", type=size_arg, default=d.output)
    p.add_argument("--stops", type=int, default=d.stops)
    p.add_argument("--hold", type=int, default=d.hold)
    p.add_argument("--max-uploads", type=int, default=d.max_uploads)
    p.add_argument("--upload-ms", type=float, default=d.upload_ms,
                   help="tile upload budget per frame in ms (measured cost of recent uploads;"
                        " at most --max-uploads tiles); default: --max-uploads tiles")
    p.add_argument("--feedback-scale", type=float, default=d.feedback_scale)
    p.add_argument("--max-distance", type=float, default=d.max_distance,
                   help="farthest camera stop in panel widths (about 8 shows a 200-panel "
                        "wall whole)")
    p.add_argument("--json")


def profile_from_args(a: argparse.Namespace, **extra) -> VirtualProfile:
    """The profile the shared options (and `extra` fields) describe."""
    return VirtualProfile(textures=a.textures, size=a.size, allowance=a.allowance,
                          output=a.output, stops=a.stops, hold=a.hold,
                          feedback_scale=a.feedback_scale, max_uploads=a.max_uploads,
                          upload_ms=a.upload_ms, max_distance=a.max_distance, **extra)


def write_doc(doc: dict, path: str | None) -> None:
    """Print a bench's JSON document, and write it to `path` when one was given."""
    text = json.dumps(doc, indent=2)
    print(text)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)


def main(argv: list[str] | None = None) -> int:
    """Run with any size: `python -m lab.virtual --textures 200 --size 4096
    --allowance 192MiB --output 3840x2160 --json out.json`."""
    p = argparse.ArgumentParser(prog="python -m lab.virtual")
    add_profile_args(p, VirtualProfile())
    p.add_argument("--io-workers", type=int, default=VirtualProfile().io_workers)
    p.add_argument("--no-tiled", action="store_true",
                   help="read the files as they are (strided/mapped), not tile-contiguous "
                        "copies in the cache folder")
    p.add_argument("--files", nargs="*", default=(),
                   help="power-of-two BC7 KTX2 files to use instead of the gallery's")
    p.add_argument("--dump", default="", help="folder for per-stop PNGs (virtual, reference)")
    p.add_argument("--feedback-reduce", choices=("gpu", "cpu"), default="",
                   help="reduce the feedback on the GPU (compute) or the CPU; default: as "
                        "the device profile says (the GPU where compute runs on one)")
    a = p.parse_args(argv)
    if a.quick:
        prof = dataclasses.replace(VirtualProfile.quick(), files=tuple(a.files), dump=a.dump,
                                   tiled=not a.no_tiled, feedback_reduce=a.feedback_reduce)
    else:
        prof = profile_from_args(a, io_workers=a.io_workers, files=tuple(a.files), dump=a.dump,
                                 tiled=not a.no_tiled, feedback_reduce=a.feedback_reduce)
    device = Device.headless()
    try:
        out = run_profile(device, prof)
    finally:
        device.shutdown()
    write_doc({"renderer": device.caps.renderer, "profile": asdict(prof), "rows": out.rows,
               "notes": out.notes}, a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
