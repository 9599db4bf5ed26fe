"""The wall benchmarks (issue 12): streaming where the budget binds, each figure against a
baseline in the same run.

(a) the wall demo's scripted flight (overview, dive to one image at full size, pan along its
    row, cuts, zoom out) with the render scale held at 1 and the streamer given a fixed pool
    of tails + f x (peak wanted - tails) for f = 100/50/25/10 %, the peak *wanted* bytes
    measured by an unconstrained streamed flight (budgets set from the all-resident footprint
    never bound: the camera asks for a few % of it). Per budget: PSNR of every frame against
    the all-resident frame (min, median), the screen-weighted coarser-than-wanted fractions,
    frames over the pool (must be 0), evictions and re-uploads; the same flights with two
    baselines run by the same executor (whole textures with LRU eviction, as Panda3D does;
    one global mip bias);
(b) efficiency per segment: resident texture bytes over the screen's own need;
(c) prefetch on vs off: coarser-than-wanted on the pan and zoom segments;
(d) camera cuts: time from a cut until 95% of the visible screen weight is at its wanted
    level, p50/p95, from the OS page cache and from disk (pages dropped with
    posix_fadvise(POSIX_FADV_DONTNEED) per file, checked by timing a read after the drop);
(e) scale: bulk header registration, RAM per texture, streamer registration and per-frame
    CPU at 10,000 textures.

A suite of its own so that the 10,000-texture GPU run (14 GB of files) can be run, and cut
short, apart from the gallery's upload and latency figures.
"""
from __future__ import annotations

import dataclasses
import logging
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine import textures
from engine.app.settings import ProviderFactory
from engine.hosts.run import FrameContext, run_scene
from engine.formats import get as get_format
from engine.gl.device import Device
from engine.memory.sizes import format_bytes
from engine.streaming.levels.streamer import LevelStreamer
from .baselines import BASELINES
from .wall_vt import VtProbe, content_bytes, goal_notes, use_vt_provider, vt_memory_row
from engine.textures.quality import psnr
from engine.textures.transcode import block_compatible, served_format
from .common import SuiteResult, drop_page_cache
from .streaming import IDENTICAL_DB, WallClockPacer, is_software, mib

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------- the wall
# Where the budget binds (issue 12): the wall demo's scripted flight (overview, dive to one
# image at full size, pan along its row, cuts, zoom out) with budgets set from the flight's
# own measured peak *wanted* bytes, our tiered policy against two baselines run by the same
# executor, camera-cut times from RAM and from disk, prefetch on and off, efficiency per
# segment, and the streamer's costs at 10,000 textures.
@dataclass(frozen=True)
class WallProfile:
    name: str
    count: int
    texture_size: int
    size: tuple[int, int]
    frames: int
    cuts: int  # cuts in the quality flights
    cut_flight_cuts: int  # cuts in the flights that time them
    scale_count: int  # textures of the scale measurements
    why: str
    fractions: tuple[float, ...] = (1.0, 0.5, 0.25, 0.1)  # budgets, of the peak wanted
    cut_sources: tuple[str, ...] = ("ram", "disk")
    prefetch_flight: bool = True  # the prefetch-off flight and its rows
    #: which executors fly: "levels" (whole mip levels, `LevelStreamer`) and "virtual"
    #: (every image as tiles of the page cache, `StreamingProvider`), on the same pools
    paths: tuple[str, ...] = ("levels", "virtual")
    #: the whole-level policies flown at each budget (the first is ours)
    policies: tuple[str, ...] = ("tiered", "lru-whole", "global-bias")

    def options(self, cuts: int | None = None) -> dict:
        return {"count": self.count, "texture_size": self.texture_size,
                "cuts": self.cuts if cuts is None else cuts, "frames": self.frames,
                "metrics": False}


WALL_QUICK = WallProfile("quick", 12, 128, (64, 36), 24, 1, 2, 200,
                         "CI smoke run; figures are not meaningful at this size",
                         fractions=(0.25,), cut_sources=("ram",))
WALL_SOFTWARE = WallProfile(
    "software", 256, 512, (384, 216), 810, 3, 8, 10_000,
    "llvmpipe (CI sizes): 256 x 512^2 BC7 at 384x216; the script at its natural speed "
    "(13.5 s at 60 frames a second: new levels fade in over 0.3 s each, as on a GPU)")
WALL_GPU = WallProfile("gpu", 10_000, 1024, (1280, 720), 810, 3, 12, 10_000,
                       "the issue's wall: 10,000 x 1024^2 BC7 (about 14 GB of files)")

POLICIES = WallProfile.policies
PATHS = WallProfile.paths
PSNR_MARGIN_DB = 3.0  # goal: our median at least this far above both baselines at 25%, 10%
PREFETCH_FRACTION = 0.5  # the budget of the prefetch on/off flights
DETERMINISTIC = {"deterministic": True, "pace": False}
BYTES_PER_TEXEL = 1.0  # BC7


def wall_profile(device: Device, quick: bool) -> WallProfile:
    if quick:
        return WALL_QUICK
    return WALL_SOFTWARE if is_software(device) else WALL_GPU


def wall_demo():
    try:
        from engine.demos import DEMOS
    except ImportError as exc:
        raise RuntimeError(f"the wall benchmarks need the demos package ({exc})") from exc
    return DEMOS["wall"]


def use_wall_streamer(policy: str, pool: int, prefetch: bool = True) -> ProviderFactory:
    """A provider factory: a streamer running `policy` ("tiered" or a baseline's name) in
    a fixed pool, passed to the run as `RunSettings.provider` (nothing is registered).

    The pool is `StreamerSettings.fixed_pool_bytes`, not the governor's allowance: the wall
    flights hold the render scale at 1 (no memory reaction), so the pool is the budget the
    texture policy alone must live in, and the pictures differ from the all-resident ones
    only by texture detail."""
    from engine.streaming.levels.state import PolicyConfig

    name = f"bench-wall-{policy}-{pool}-{'pf' if prefetch else 'nopf'}"

    def make(device, settings, clock):
        cfg = dataclasses.replace(settings.streamer, fixed_pool_bytes=pool, policy=PolicyConfig(
            policy=BASELINES.get(policy, policy), prefetch=prefetch))
        if settings.deterministic:  # frame clock and inline reads, as the registry does
            from engine.streaming.inline_io import InlineLevelIO
            return LevelStreamer(device, cfg, clock=clock, io=InlineLevelIO)
        return LevelStreamer(device, cfg)

    make.__name__ = name  # the run summary's provider
    return make


@dataclass
class WallProbe:
    """Per frame of a wall flight: the picture (kept as reference, or scored against it),
    the screen-weighted coverage, cut times, pool keeping, evictions and re-uploads."""

    reference: dict[int, np.ndarray] | None = None
    keep_images: bool = False
    images: dict[int, np.ndarray] = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    tracker: object = None
    frame_tracker: object = None
    finest: np.ndarray | None = None
    last_base: np.ndarray | None = None
    reuploads: int = 0
    refusals: int = 0  # the streamer's cumulative refused loads, at the last frame
    geometry: object = None  # the flight's texture sizes, read once (metrics.texture_geometry)

    def __post_init__(self) -> None:
        from engine.streaming.levels.metrics import CutTracker
        self.tracker = CutTracker()  # wall-clock seconds
        self.frame_tracker = CutTracker()  # frames

    def picture_row(self, ctx: FrameContext) -> dict:
        """The frame's row with what its picture says (kept, scored against the reference);
        both paths' probes start their rows here."""
        image = ctx.renderer.read_output()
        row: dict = {"frame": ctx.frame, "segment": ctx.record.get("wall_segment", ""),
                     "ms": ctx.record["ms"]}
        if self.keep_images:
            self.images[ctx.frame] = image
        if self.reference is not None:
            row["psnr"] = min(psnr(image, self.reference[ctx.frame]), IDENTICAL_DB)
        return row

    def __call__(self, ctx: FrameContext) -> None:
        from engine.streaming.contract import ResidentTexturesSource
        from engine.streaming.levels.metrics import measure_view, texture_geometry

        row = self.picture_row(ctx)
        view = ctx.renderer.frame_view(ctx.scene, ctx.frame, ctx.time)
        count = int(view.texture_ids.max(initial=-1)) + 1
        if self.geometry is None or self.geometry.levels.size != count:
            self.geometry = texture_geometry(ctx.provider, count)
        sampled = None
        if isinstance(ctx.provider, ResidentTexturesSource):  # one array read, not 10,000 calls
            sampled = np.asarray(ctx.provider.resident_textures().min_lod[:count], np.float64)
        cov, _ = measure_view(view, ctx.provider, count, geometry=self.geometry,
                              sampled=sampled)
        row.update(cov.as_record())
        arrived = cov
        if isinstance(ctx.provider, LevelStreamer):
            arrived, _ = measure_view(view, ctx.provider, count, geometry=self.geometry,
                                      resident=ctx.provider.resident_levels())
        row["resident_at_wanted_fraction"] = arrived.at_wanted
        stats = ctx.provider.stats()
        row["resident_bytes"] = int(stats.resident_bytes)
        row["wanted_bytes"] = int(stats.wanted_bytes)
        row["min_bytes"] = int(stats.min_bytes)
        if isinstance(ctx.provider, LevelStreamer):
            streamed = ctx.device.ledger.category_total("texture.streamed")
            pool = ctx.provider.pool_bytes
            # this frame's refusals (the counter is cumulative: read as a total it marked
            # every frame after one refusal as over budget)
            refused = int(stats.budget_violations) - self.refusals
            self.refusals = int(stats.budget_violations)
            row["refused_loads"] = refused
            row["over_budget"] = bool(streamed > pool or stats.peak_bytes > pool or refused)
            row["evictions"] = int(stats.evictions)
            base = ctx.provider.resident_levels()
            if self.finest is None:
                self.finest, self.last_base = base.copy(), base.copy()
            # A load of a level that was resident before (at or coarser than the finest
            # level this texture ever had) is a re-upload: eviction cost paid twice.
            grew = base < self.last_base
            for t in np.flatnonzero(grew):
                lo, hi = int(base[t]), int(self.last_base[t])
                self.reuploads += max(0, hi - max(lo, int(self.finest[t])))
            self.finest = np.minimum(self.finest, base)
            self.last_base = base
            row["reuploads"] = self.reuploads
        cut = bool(ctx.record.get("wall_cut"))
        done_before = len(self.tracker.times)
        self.tracker.update(time.perf_counter(), arrived.at_wanted, cut)
        self.frame_tracker.update(float(ctx.frame), arrived.at_wanted, cut)
        if len(self.tracker.times) > done_before and self.tracker.times[-1] is not None:
            row["cut_to_95_s"] = self.tracker.times[-1]
            row["cut_to_95_frames"] = self.frame_tracker.times[-1]
        self.rows.append(row)


def wall_flight(device: Device, profile: WallProfile, provider: ProviderFactory, *,
                reference: dict[int, np.ndarray] | None = None, keep_images: bool = False,
                cuts: int | None = None, pace: bool = True,
                deterministic: bool = False, cache_dir: Path | None = None,
                virtual: bool = False) -> WallProbe:
    """One wall flight (render scale held at 1); `deterministic`: frame clock and inline
    reads, so the flight depends on the frame number only (tests); `virtual`: the provider
    streams the images as virtual textures (`use_vt_provider`), measured by `VtProbe`."""
    demo = wall_demo()
    options = profile.options(cuts)
    if cache_dir is not None:
        options["cache_dir"] = cache_dir
    probe = WallProbe(reference=reference, keep_images=keep_images)
    start = time.perf_counter()
    vt_probe = VtProbe(probe) if virtual else None
    hooks = [*demo.hooks(options), vt_probe or probe]
    if pace:
        hooks.append(WallClockPacer())
    res = run_scene(demo.factory, frames=profile.frames, size=profile.size,
                    budget=1 << 40, provider=provider, options=options, device=device,
                    on_frame=hooks, react=False, deterministic=deterministic)
    probe.tracker.close()
    probe.frame_tracker.close()
    if res.summary["leaked_objects"]:
        log.error("wall flight %s leaked %d GL objects", provider, res.summary["leaked_objects"])
    probe.leaked = res.summary["leaked_objects"]  # type: ignore[attr-defined]
    probe.virtual = vt_probe.virtual if vt_probe is not None else 0  # type: ignore[attr-defined]
    if vt_probe is not None and vt_probe.virtual < profile.count:
        log.error("virtual wall flight %s: only %d of %d images went virtual", provider,
                  vt_probe.virtual, profile.count)
    log.info("wall flight %s: %d frames in %.1f s", provider, profile.frames,
             time.perf_counter() - start)
    return probe


def _pct(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def _segment_means(rows: Sequence[dict], key: str, segments: Sequence[str]) -> float | None:
    vals = [r[key] for r in rows if r["segment"] in segments and key in r]
    return float(np.mean(vals)) if vals else None


def _flight_row(probe: WallProbe, policy: str, fraction: float | None, pool: int | None,
                prefetch: bool = True) -> dict:
    rows = probe.rows
    scores = [r["psnr"] for r in rows if "psnr" in r]
    # Zoomed in (hold, pan, after cuts) is where the budget binds; the overview and zoom
    # frames are often identical to the reference at every budget and saturate the median.
    zoomed = [r["psnr"] for r in rows if "psnr" in r
              and (r["segment"] in ("hold", "pan") or r["segment"].startswith("cut"))]
    return {
        "part": "wall", "policy": policy + ("" if prefetch else " (no prefetch)"),
        "budget_pct": None if fraction is None else round(fraction * 100),
        "pool_mib": mib(pool),
        # the pool a flight was held at when the asked one is below its floor
        "pool_held_mib": mib(max(r["pool_bytes"] for r in rows))
        if pool is not None and any(r.get("pool_bytes", 0) > pool for r in rows) else None,
        "psnr_min_db": min(scores) if scores else None,
        "psnr_median_db": statistics.median(scores) if scores else None,
        "psnr_mean_db": float(np.mean(scores)) if scores else None,
        "psnr_zoomed_median_db": statistics.median(zoomed) if zoomed else None,
        "coarser_1": float(np.mean([r["coarser_1_fraction"] for r in rows])),
        "coarser_2plus": float(np.mean([r["coarser_2plus_fraction"] for r in rows])),
        "frames_over_budget": sum(bool(r.get("over_budget")) for r in rows),
        "refused_loads": sum(r.get("refused_loads", 0) for r in rows),
        "evictions": rows[-1].get("evictions"),
        "reuploads": rows[-1].get("reuploads"),
        "leaked": getattr(probe, "leaked", None),
    }


def _memory_rows(probe: WallProbe, label: str, content: int, pixels: int) -> list[dict]:
    """The flight's peak resident bytes against the screen and the files on disk."""
    rows = [{"cache_bytes": 0, "table_bytes": 0, "pinned_slots": 0, **r} for r in probe.rows]
    return [vt_memory_row(rows, label, content, pixels, BYTES_PER_TEXEL)] if rows else []


def _efficiency_rows(probe: WallProbe, profile: WallProfile, label: str) -> list[dict]:
    from engine.streaming.levels.metrics import efficiency

    pixels = profile.size[0] * profile.size[1]
    out = []
    for seg in dict.fromkeys(r["segment"] for r in probe.rows):
        rows = [r for r in probe.rows if r["segment"] == seg]
        res = float(np.mean([r["resident_bytes"] for r in rows]))
        above = float(np.mean([r["resident_bytes"] - r["min_bytes"] for r in rows]))
        out.append({"part": "efficiency", "policy": label, "segment": seg, "frames": len(rows),
                    "resident_mib": mib(res),
                    "efficiency": efficiency(int(res), pixels, BYTES_PER_TEXEL),
                    "efficiency_above_tails": efficiency(int(above), pixels, BYTES_PER_TEXEL),
                    "at_wanted": float(np.mean([r["at_wanted_fraction"] for r in rows]))})
    return out


def drop_files_from_page_cache(paths: Sequence[Path]) -> float | None:
    """posix_fadvise(POSIX_FADV_DONTNEED) on every file; returns the seconds a read of all of
    them then takes (compared by the caller with a warm read, to show the drop took effect),
    or None where the OS lacks the call."""
    if not all(drop_page_cache(p) for p in paths):
        return None
    start = time.perf_counter()
    for p in paths:
        with open(p, "rb") as fh:
            while fh.read(1 << 20):
                pass
    seconds = time.perf_counter() - start
    for p in paths:
        drop_page_cache(p)
    return seconds


def _warm_read_seconds(paths: Sequence[Path]) -> float:
    start = time.perf_counter()
    for p in paths:
        with open(p, "rb") as fh:
            while fh.read(1 << 20):
                pass
    return time.perf_counter() - start


def _wall_rows(device: Device, profile: WallProfile,
               checkpoint: Callable[[list[dict], list[str]], None] = lambda rows, notes: None
               ) -> tuple[list[dict], list[str]]:
    """`checkpoint(rows, notes)` runs after every flight, so that a run cut short (a device
    call's time limit) keeps every figure it measured."""
    from engine.demos.wall_assets import wall_textures

    assets = wall_textures(profile.count, profile.texture_size)
    levels, virtual = "levels" in profile.paths, "virtual" in profile.paths
    rows: list[dict] = []
    notes: list[str] = [(f"wall profile '{profile.name}': {profile.count} x "
                         f"{profile.texture_size}^2 BC7, {profile.size[0]}x{profile.size[1]}, "
                         f"{profile.frames} frames, {profile.cuts} cut(s): {profile.why}")]
    served = served_format(get_format("BC7_SRGB"), device.caps.can_sample)
    if virtual and not block_compatible(get_format("BC7_SRGB"), served):
        virtual = False  # this driver holds BC7 as a format of other blocks: no tiles
        notes.append(f"no virtual flights: this driver serves BC7 as {served.name}, which "
                     "has no 4x4 blocks to cut tiles from")
    reference = wall_flight(device, profile, "static", keep_images=True, pace=False)
    ref_images = reference.images
    checkpoint(rows, notes)
    notes.append("policy, budget and prefetch flights are deterministic (frame clock, inline "
                 "reads: the streamer's decisions depend on the frame number only, so policies "
                 "are compared on equal terms and reruns agree; paced flights with I/O threads "
                 "varied by up to 3x in coarser-than-wanted between identical runs on this "
                 "shared machine); the cut flights use the I/O threads and wall-clock time")
    # The flight's own demand: our streamer with a pool nothing binds. It sets the pools of
    # both paths, so it flies whichever paths are asked for.
    free = wall_flight(device, profile, use_wall_streamer("tiered", 1 << 40),
                       reference=ref_images, **DETERMINISTIC)
    peak = max(r["wanted_bytes"] for r in free.rows)
    tails = max(r["min_bytes"] for r in free.rows)
    rows.append({**_flight_row(free, "tiered", None, None), "budget_pct": "unlimited"})
    checkpoint(rows, notes)
    notes.append(f"peak wanted {format_bytes(peak)} of which {format_bytes(tails)} are the "
                 f"always-resident tails; a budget of f% is a pool of tails + f% of the "
                 f"{format_bytes(peak - tails)} above them (the tails alone cannot be cut); "
                 f"both paths fly the same pools")
    content = content_bytes(assets.paths)
    pixels = profile.size[0] * profile.size[1]
    rows += _efficiency_rows(free, profile, "tiered unlimited")
    rows += _memory_rows(free, "tiered unlimited", content, pixels)
    vt: dict[str, WallProbe] = {}

    def fly_virtual(label: str, pool: int) -> WallProbe:
        """One virtual-texture flight and its rows, checkpointed as it lands."""
        probe = wall_flight(device, profile, use_vt_provider(pool), reference=ref_images,
                            virtual=True, **DETERMINISTIC)
        vt[label] = probe
        rows.extend(_efficiency_rows(probe, profile, f"virtual {label}"))
        rows.extend(_memory_rows(probe, f"virtual {label}", content, pixels))
        return probe

    if virtual:
        probe = fly_virtual("unlimited", 1 << 40)
        rows.append({**_flight_row(probe, "virtual", None, None), "budget_pct": "unlimited"})
        checkpoint(rows, notes)
    results: dict[tuple[str, float], dict] = {}
    main: dict[float, WallProbe] = {}
    for fraction in profile.fractions:
        pool = tails + int(fraction * (peak - tails))
        for policy in profile.policies if levels else ():
            probe = wall_flight(device, profile, use_wall_streamer(policy, pool),
                                reference=ref_images, **DETERMINISTIC)
            row = _flight_row(probe, policy, fraction, pool)
            results[(policy, fraction)] = row
            rows.append(row)
            if policy == POLICIES[0]:
                main[fraction] = probe
                rows += _efficiency_rows(probe, profile, f"{policy} {fraction:.0%}")
                rows += _memory_rows(probe, f"{policy} {fraction:.0%}", content, pixels)
            checkpoint(rows, notes)
        if virtual:
            probe = fly_virtual(f"{fraction:.0%}", pool)
            results[("virtual", fraction)] = _flight_row(probe, "virtual", fraction, pool)
            rows.append(results[("virtual", fraction)])
            checkpoint(rows, notes)
    # Goals: PSNR margin over both baselines at 25% and 10%, worst frame no worse.
    for fraction in [f for f in (0.25, 0.1) if f in profile.fractions]:
        ours = results.get((POLICIES[0], fraction))
        for base in POLICIES[1:]:
            other = results.get((base, fraction))
            if ours is None or other is None:
                continue
            margin = (ours["psnr_median_db"] or 0) - (other["psnr_median_db"] or 0)
            worst = (ours["psnr_min_db"] or 0) - (other["psnr_min_db"] or 0)
            zoomed = ((ours["psnr_zoomed_median_db"] or 0)
                      - (other["psnr_zoomed_median_db"] or 0))
            notes.append(f"goal at {fraction:.0%}: median PSNR >= {PSNR_MARGIN_DB:g} dB above "
                         f"{base}: {'met' if margin >= PSNR_MARGIN_DB else 'NOT met'} "
                         f"({margin:+.1f} dB; zoomed-in frames {zoomed:+.1f} dB); worst frame "
                         f"no worse: {'met' if worst >= 0 else 'NOT met'} ({worst:+.1f} dB)")
    mid = PREFETCH_FRACTION if PREFETCH_FRACTION in main else min(main, default=None)
    notes.append("efficiency = resident texture bytes / (output pixels x 1 byte per BC7 "
                 "texel); 'above tails' leaves out the always-resident tails of every texture; "
                 "a virtual flight's resident bytes are its page cache (allocated whole), page "
                 "table and LOD proxy; vt-memory: the flight's peak of them and the files' "
                 "bytes on disk over it (content_to_resident)")
    if virtual:
        notes.append("virtual flights: coarser-than-wanted is read from the feedback pass "
                     "(per pixel the tile its lookup wants, against the level the page table "
                     "shows), the whole-level flights' from the CPU estimator per texture")
        for label, probe in vt.items():
            pan = _segment_means(probe.rows, "at_wanted_fraction", ("pan",))
            if pan is not None:
                rows.append({"part": "pan", "policy": f"virtual {label}",
                             "coarser_than_wanted": 1 - pan})
        for fraction, probe in main.items():
            pan = _segment_means(probe.rows, "at_wanted_fraction", ("pan",))
            if pan is not None:
                rows.append({"part": "pan", "policy": f"tiered {fraction:.0%}",
                             "coarser_than_wanted": 1 - pan})
    # Prefetch off, same budget: pan and zoom segments.
    if profile.prefetch_flight and levels and mid is not None:
        pool = tails + int(mid * (peak - tails))
        nopf = wall_flight(device, profile, use_wall_streamer("tiered", pool, prefetch=False),
                           reference=ref_images, **DETERMINISTIC)
        rows.append(_flight_row(nopf, "tiered", mid, pool, prefetch=False))
        for label, segs in (("pan", ("pan",)), ("zoom", ("dive", "zoom-out"))):
            on = 1 - (_segment_means(main[mid].rows, "at_wanted_fraction", segs) or 1)
            off = 1 - (_segment_means(nopf.rows, "at_wanted_fraction", segs) or 1)
            # The same on what is resident: the sampled figure includes the 0.3 s/level fade-in,
            # which starts when a level arrives, prefetched or not.
            on_r = 1 - (_segment_means(main[mid].rows, "resident_at_wanted_fraction", segs) or 1)
            off_r = 1 - (_segment_means(nopf.rows, "resident_at_wanted_fraction", segs) or 1)
            rows.append({"part": "prefetch", "segment": label, "budget_pct": round(mid * 100),
                         "coarser_with": on, "coarser_without": off,
                         "ratio": (on / off) if off else None,
                         "not_resident_with": on_r, "not_resident_without": off_r,
                         "resident_ratio": (on_r / off_r) if off_r else None})
        other = [r["psnr"] for r in main[mid].rows
                 if r["segment"] not in ("pan", "dive", "zoom-out") and "psnr" in r]
        other_off = [r["psnr"] for r in nopf.rows
                     if r["segment"] not in ("pan", "dive", "zoom-out") and "psnr" in r]
        if other and other_off:
            notes.append(f"prefetch elsewhere: median PSNR {statistics.median(other):.1f} dB "
                         f"with, {statistics.median(other_off):.1f} dB without")
        checkpoint(rows, notes)
    # Cuts: many of them, from the page cache (RAM) and from disk (dropped first), on each
    # path; the virtual path's tile-contiguous copies are made before (and dropped too).
    pool = peak + (peak >> 2)
    # the virtual path's cuts first: a run cut short by its time box keeps those (the
    # whole-level path's cut figures exist from earlier runs)
    cut_paths = [p for p in reversed(PATHS) if p in profile.paths
                 and (p != "virtual" or virtual)]
    tiled = wall_tiled_copies(device, assets.paths) if virtual and profile.cut_sources else []
    if tiled:
        notes.append(f"tile-contiguous copies of the wall: {len(tiled)} files")
    files = list(assets.paths) + tiled
    warm = _warm_read_seconds(files) if profile.cut_sources else 0.0
    for source in profile.cut_sources:
        for path in cut_paths:
            if source == "disk":
                cold = drop_files_from_page_cache(files)
                if cold is None:
                    notes.append("page cache could not be dropped: no 'disk' cut figures")
                    break
                notes.append(f"page cache dropped with posix_fadvise(POSIX_FADV_DONTNEED) per "
                             f"file: reading all {len(files)} files took {cold:.2f} s after "
                             f"the drop vs {warm:.2f} s warm")
            else:
                _warm_read_seconds(files)
            name = use_vt_provider(pool) if path == "virtual" else \
                use_wall_streamer("tiered", pool)
            probe = wall_flight(device, profile, name, cuts=profile.cut_flight_cuts,
                                virtual=path == "virtual")
            times = probe.tracker.finished()
            rows.append({"part": "cut", "path": path, "source": source,
                         "cuts": len(probe.tracker.times), "reached_95": len(times),
                         "p50_ms": (_pct(times, 50) or 0) * 1e3,
                         "p95_ms": (_pct(times, 95) or 0) * 1e3, "pool_mib": mib(pool),
                         "frames_over_budget": sum(bool(r.get("over_budget"))
                                                   for r in probe.rows),
                         "leaked": probe.leaked})
            checkpoint(rows, notes)
    notes.append("cut: wall-clock time from the frame a cut lands on until 95% of the visible "
                 "screen weight has its wanted level resident (whole levels: "
                 "metrics.level_deficit on the resident level, the 0.3 s-per-level fade-in "
                 "comes on top; virtual: the feedback of a frame drawn after the cut), pool "
                 "125% of peak wanted; 'ram' reads come from the OS page cache")
    over = sum(r.get("frames_over_budget", 0) for r in rows)
    notes.append(f"frames over budget across every flight: {over} (goal 0)")
    notes += goal_notes(rows)
    return rows, notes


def wall_tiled_copies(device: Device, paths: Sequence[Path]) -> list[Path]:
    """Make the tile-contiguous copies of the wall's files now (what the virtual path's
    first flights start in the background), so that the cut flights read them; their
    paths, for the page-cache drop."""
    from engine.streaming.virtual.system import VirtualTextureSystem

    start = time.perf_counter()
    vts = VirtualTextureSystem(device, 0, io_workers=0)
    try:
        for p in paths:
            vts.register(p)
        if vts.io.tiled is not None:
            while not vts.io.tiled.idle():
                time.sleep(0.05)
        out = [s.tiled_path for s in vts.io.sources if s.tiled_path is not None]
    finally:
        vts.release()
    log.info("tiled copies of %d files ready in %.1f s", len(paths), time.perf_counter() - start)
    return out


def _wall_scale_rows(device: Device, profile: WallProfile) -> tuple[list[dict], list[str]]:
    import tracemalloc

    from .headers import HeaderTable
    from .scaling import measure, scaling_textures

    paths = scaling_textures(profile.scale_count)
    # imports, first-call costs and a cold page cache out of the timing (a first pass over
    # freshly generated files read them from disk: 1.6 s on llvmpipe's machine vs 0.08 warm)
    HeaderTable.from_files(paths)
    start = time.perf_counter()
    table = HeaderTable.from_files(paths)
    seconds = time.perf_counter() - start
    del table
    tracemalloc.start()
    table = HeaderTable.from_files(paths)
    heap = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    start = time.perf_counter()
    for p in paths:
        textures.open(p)
    reader = time.perf_counter() - start
    frames, warmup = (10, 3) if profile.scale_count < 1000 else (60, 10)
    row = measure(device, profile.scale_count, frames, warmup)
    rows = [{"part": "scale", "textures": len(table), "headers_s": seconds,
             "reader_s": reader, "header_table_bytes_per_texture": heap / len(table),
             "streamer_register_s": row["register_s"],
             "streamer_rss_bytes_per_texture": (row["rss_mib"] or 0) * (1 << 20) / len(table),
             "streamer_frame_ms_p50": row["begin_frame_ms"],
             "streamer_frame_ms_p95": row["begin_frame_p95_ms"]}]
    notes = [("scale: headers_s = bulk header registration (bench.headers.HeaderTable, "
             "numpy columns) of every file, reader_s = engine.textures.open per file; "
             "streamer_register_s = LevelStreamer.register_many of every file in one batch "
             "(header, tail read and GPU tail of each); "
             "streamer frame = begin_frame on the scaling bench's grid camera")]
    return rows, notes


def run(device: Device, quick: bool = False) -> SuiteResult:
    result = SuiteResult("wall")
    profile = wall_profile(device, quick)
    for part in (lambda: _wall_rows(device, profile), lambda: _wall_scale_rows(device, profile)):
        rows, notes = part()
        result.rows += rows
        result.notes += notes
    return result


def _fractions(text: str) -> tuple[float, ...]:
    """argparse type: budgets as fractions of the peak wanted, each in (0, 1]."""
    import argparse

    try:
        values = tuple(float(f) for f in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not comma-separated numbers: {text!r}") from None
    if not values or not all(0 < v <= 1 for v in values):
        raise argparse.ArgumentTypeError(f"fractions must lie in (0, 1], got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    """`python -m lab.wall`: the suite with a chosen subset of its flights, the JSON
    rewritten after every flight (the full GPU suite takes longer than one device call)."""
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m lab.wall")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--fractions", type=_fractions,
                    help="comma-separated budgets, of the peak wanted (0.25,0.1)")
    ap.add_argument("--cut-sources", help="comma-separated: ram, disk")
    ap.add_argument("--no-prefetch-flight", action="store_true")
    ap.add_argument("--paths", help="comma-separated executors to fly: levels, virtual "
                    "(default both, on the same pools)")
    ap.add_argument("--policies", help="comma-separated whole-level policies at each budget "
                    f"(default {','.join(POLICIES)}; the first is ours)")
    ap.add_argument("--frames", type=int, help="frames of each flight (the script is "
                    "stretched to them; default the profile's)")
    ap.add_argument("--count", type=int, help="images on the wall (default the profile's)")
    ap.add_argument("--texture-size", type=int, help="image edge in texels (a power of two)")
    ap.add_argument("--output", help="output size WxH (default the profile's)")
    ap.add_argument("--parts", default="flights,scale",
                    help="which parts, in this order: flights, scale (default both)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    device = Device.headless()
    profile = wall_profile(device, args.quick)
    if args.fractions:
        profile = dataclasses.replace(profile, fractions=args.fractions)
    if args.cut_sources is not None:
        profile = dataclasses.replace(
            profile, cut_sources=tuple(c for c in args.cut_sources.split(",") if c))
    if args.no_prefetch_flight:
        profile = dataclasses.replace(profile, prefetch_flight=False)
    if args.paths is not None:
        paths = tuple(p for p in args.paths.split(",") if p)
        if not paths or not set(paths) <= set(PATHS):
            ap.error(f"--paths: choose from {', '.join(PATHS)}, got {args.paths!r}")
        profile = dataclasses.replace(profile, paths=paths)
    if args.policies is not None:
        policies = tuple(p for p in args.policies.split(",") if p)
        if not set(policies) <= set(POLICIES) or (policies and policies[0] != POLICIES[0]):
            ap.error(f"--policies: {POLICIES[0]} first, then any of {', '.join(POLICIES[1:])}; "
                     f"got {args.policies!r}")
        profile = dataclasses.replace(profile, policies=policies)
    if args.output is not None:
        try:
            w, h = (int(v) for v in args.output.lower().split("x"))
        except ValueError:
            ap.error(f"--output must be WxH, got {args.output!r}")
        if w < 1 or h < 1:
            ap.error(f"--output must be positive, got {args.output!r}")
        profile = dataclasses.replace(profile, size=(w, h))
    for name, value in (("frames", args.frames), ("count", args.count),
                        ("texture_size", args.texture_size)):
        if value is not None:
            if value < 1:
                ap.error(f"--{name.replace('_', '-')} must be positive, got {value}")
            profile = dataclasses.replace(profile, **{name: value})
    out = {"machine": {"renderer": device.caps.renderer, "gl_version": device.caps.gl_version},
           "profile": dataclasses.asdict(profile), "rows": [], "notes": []}

    def save(rows: list[dict], notes: list[str]) -> None:
        out["rows"], out["notes"] = list(rows), list(notes)
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2))
    rows: list[dict] = []
    notes: list[str] = []
    try:
        for part in args.parts.split(","):
            if part == "flights":
                more, more_notes = _wall_rows(
                    device, profile, lambda r, n: save(rows + r, notes + n))
            elif part == "scale":
                more, more_notes = _wall_scale_rows(device, profile)
            else:
                ap.error(f"unknown part {part!r}")
            rows, notes = rows + more, notes + more_notes
            save(rows, notes)
    finally:
        device.shutdown()
    for note in out["notes"]:
        print("note:", note)
    print(json.dumps(out["rows"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
