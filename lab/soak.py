"""The soak: a long run under random pressure and injected faults, checked for what must hold.

`run_soak(device, factory, options, settings)` drives one FrameLoop (headless) for
`settings.frames` frames in three phases:

1. warm-up (`warmup_frames`): the budget already moves, no faults yet; at its end the
   process's resident memory (RSS, /proc/self/statm) is the baseline.
2. faults: every `budget_every` frames the budget jumps to a random point between the
   scene's floor (what cannot be given up: fixed allocations, the render targets at the
   resolution controller's smallest scale, every texture's mip tail) and its ceiling
   (everything at full detail), through `governor.set_budget` from a frame hook; every
   `io_fault_every` frames one texture file (in the soak's own copy of the textures) is made
   to fail: deleted, truncated to half, or replaced by a folder (unreadable even for root,
   where chmod 000 is not); with virtual textures in the scene, one virtual texture's file
   too, while its tiles are read (`_Faults.inject_tile_io`: the tile source then opens the
   path again); reads wait `io_latency_ms`; and each allocation of a streamed texture or a
   render target fails as GL_OUT_OF_MEMORY with probability `oom_probability`
   (`device.fault_injector`).
3. quiet (`quiet_frames`): no new faults, the budget back at the ceiling.
4. settle: the budget stays where the quiet phase left it, the camera stands at the last
   frame's view, and frames run until the provider has nothing pending and the render scale
   holds (`settle`); a fresh engine is then started at that budget, render scale and view and
   settled the same way, and the two pictures are compared.

What is checked (SoakReport.checks), all of it printed by the CLI:
- no frame over budget (the ledger total at the end of each frame, against the budget it ran
  under), and no refused streamer op (the plan never promised more than the pool);
- no GL object leaked once the run's objects are released;
- RSS growth from the end of warm-up to the end below `rss_growth_limit` (5%): records are
  bounded (`keep_frames`, the ledger's history_limit), so 100,000 frames cost what 10,000 do;
- every injected fault reported exactly once, as the engine's fault events (`Device.faults`)
  tell: each texture whose read failed (seen through the streamer's level files, which the
  soak wraps) is reported by the streamer in exactly one event and counted once in
  `io_errors`; every streamed texture
  hit by an injected OOM is reported (marked failed) exactly once; every failed render-target
  allocation is answered by a fallback (the resolution controller's out-of-memory ceiling);
  faults that no read ever met (the texture was not read again) are listed, not counted;
  each virtual texture whose tile read met its damaged file is reported once (a TILE_READ
  event) and counted once in the system's `io_errors`;
- recovery (`last_frame`): both runs settled, no pure-black pixels beyond the clean run's,
  and the same picture: at most 0.1% of pixels off by more than 5/255 (Filament's rule). The
  clean run reads no tiles of the virtual textures the soak broke either (a broken file is
  a condition, not history). Where whole-level textures failed (kept at a coarser level for
  good, which a fresh engine does not know), PSNR >= `min_psnr_db` instead.
  Why not "resident >= wanted" against an all-resident picture: a page cache sized to the
  screen cannot hold every tile a view of many textures wants (the wall's overview), so what
  a user can expect is the picture a fresh start gives under the same budget and view. The
  render scale is the soak's settled one in both runs: after an injected OOM the resolution
  controller holds a lower ceiling for `oom_hold_frames` (600), which is the designed answer.
"""
from __future__ import annotations

import logging
import math
import os
import re
import shutil
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import FaultEvent, FaultKind
from engine.gl.device import Device
from engine.memory.governor import above_tail_at_full_scale, budget_range, fixed_usage
from engine.streaming.contract import VirtualTextureHost
from engine.streaming.handles import LevelFiles
from engine.streaming.levels.streamer import LevelStreamer
from engine.streaming.provider import StreamingProvider
from engine.streaming.settings import StreamerSettings
from engine.app.loop import FrameContext, FrameLoop, SceneFactory, make_governor
from engine.hosts.run import finish_run
from engine.app.settings import RunSettings

log = logging.getLogger(__name__)
TARGET_LABEL = re.compile(r"texture 'scene\.(?P<name>\w+)'")
STREAMED_LABEL = re.compile(r"'(?P<key>[^'@]+)@(?P<level>\d+)'")
IO_FAULTS = ("vanish", "truncate", "unreadable")


@dataclass(frozen=True)
class SoakSettings:
    frames: int = 10_000
    size: tuple[int, int] = (320, 180)
    seed: int = 1
    provider: str = "streaming"
    warmup_frames: int | None = None  # default: frames // 10, at least 30
    quiet_frames: int | None = None  # default: frames // 10, 30..300
    budget_every: int = 20
    io_fault_every: int = 120
    oom_probability: float = 0.05
    io_latency_ms: tuple[float, float] | None = (0.0, 3.0)
    resize_every: int = 0  # 0: no output resizes (a headless run has no window to resize)
    keep_frames: int = 300
    rss_growth_limit: float = 0.05
    min_psnr_db: float = 25.0
    #: Filament's render-diff rule for the recovered picture: 0.1% of pixels off by > 5/255
    max_off_fraction: float = 0.001
    #: After the run: frames at most to settle (budget fixed, camera held) until the
    #: provider has nothing pending and the render scale holds for `settle_calm_frames`.
    settle_frames: int = 900
    settle_calm_frames: int = 12
    #: a scripted camera path loops (with a cut back to its start), so a long soak keeps
    #: moving through the scene instead of resting at the path's end
    loop_camera: bool = True
    #: a Chrome trace-event JSON of the soak's run (RunSettings.trace)
    trace: Path | str | None = None

    def __post_init__(self) -> None:
        if self.frames < 1:
            raise ValueError(f"frames must be >= 1, got {self.frames}")
        if not 0.0 <= self.oom_probability <= 1.0:
            raise ValueError(f"oom_probability must be in [0, 1], got {self.oom_probability}")

    @property
    def warmup(self) -> int:
        w = self.warmup_frames if self.warmup_frames is not None else max(30, self.frames // 10)
        return min(w, self.frames)

    @property
    def quiet(self) -> int:
        q = self.quiet_frames if self.quiet_frames is not None else \
            min(300, max(30, self.frames // 10))
        return min(q, max(0, self.frames - self.warmup))


def rss_bytes() -> int:
    """Resident memory of this process (/proc/self/statm, second field, in pages)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _FaultCounter:
    """Counts the fault events the engine reports (`Device.faults`), and matches each
    injected render-target OOM with its report.

    A failed target allocation reports TARGET_ALLOC once; a release-first failure then tries
    smaller scales, whose own failures are not reported one by one, and ends with
    TARGET_FALLBACK. So an injection outside a fallback must be answered by the next
    TARGET_ALLOC, and one inside it by the fallback's end. The frame loop may retry a resize
    in the same frame (MemoryReaction), so a TARGET_ALLOC arriving while its injection was
    booked as inside a fallback re-books that injection as a fresh failure."""

    def __init__(self) -> None:
        self.io = Counter()  # key -> LEVEL_READ events
        self.tiles = Counter()  # path -> TILE_READ events
        self.oom = Counter()  # key -> LEVEL_UPLOAD events
        self.targets = 0  # TARGET_ALLOC events
        self.fell_back = 0  # TARGET_FALLBACK events
        self.target_reported = 0  # injections answered by their TARGET_ALLOC
        self.target_in_fallback = 0  # injections inside a fallback
        self.unexplained = 0  # TARGET_ALLOC events with no injection behind them
        self.in_fallback = False
        self._pending = 0
        self._recent_fallback = 0

    def injected_target(self) -> None:
        if self.in_fallback:
            self.target_in_fallback += 1
            self._recent_fallback += 1
        else:
            self._pending += 1

    def frame_boundary(self) -> None:
        self.in_fallback = False
        self._recent_fallback = 0

    @property
    def unanswered(self) -> int:
        return self._pending

    def __call__(self, event: FaultEvent) -> None:
        if event.kind is FaultKind.LEVEL_READ:
            self.io[event.subject] += 1
        elif event.kind is FaultKind.TILE_READ:
            self.tiles[event.subject] += 1
        elif event.kind is FaultKind.LEVEL_UPLOAD:
            self.oom[event.subject] += 1
        elif event.kind is FaultKind.TARGET_ALLOC:
            self.targets += 1
            if self._pending:
                self._pending -= 1
                self.target_reported += 1
            elif self._recent_fallback:
                self._recent_fallback -= 1
                self.target_in_fallback -= 1
                self.target_reported += 1
            else:
                self.unexplained += 1
            self.in_fallback = True
            self._recent_fallback = 0
        elif event.kind is FaultKind.TARGET_FALLBACK:
            self.fell_back += 1
            self.in_fallback = False


class _ObservedFiles:
    """The streamer's level files, wrapped: a read of a file the soak damaged that fails is
    noted as met (the soak's own observation, checked against what the engine reports)."""

    def __init__(self, inner: LevelFiles, faults: _Faults) -> None:
        self.inner = inner
        self.faults = faults

    def read_level(self, tf: Any, level: int) -> bytes:
        try:
            return self.inner.read_level(tf, level)
        except Exception:
            key = self.faults.damaged.get(os.fspath(tf.path))
            if key is not None:
                self.faults.met.add(key)
            raise

    def drop(self, path: Any) -> None:
        self.inner.drop(path)

    def close(self) -> None:
        self.inner.close()


@dataclass
class SoakReport:
    frames: int
    size: tuple[int, int]
    wall_s: float
    frame_ms_p50: float
    frame_ms_p99: float
    over_budget_frames: int
    budget_changes: int
    refused_ops: int
    leaked_objects: int
    rss_warmup_bytes: int
    rss_end_bytes: int
    rss_growth: float
    #: halfway between the end of warm-up and the end: growth that is settling shows
    #: most of it in the first half, a leak grows the same in both
    rss_mid_bytes: int = 0
    io_faults: list[dict[str, Any]] = field(default_factory=list)
    io_faults_met: int = 0
    io_reported: dict[str, int] = field(default_factory=dict)
    io_errors_counted: int = 0
    oom_injected: dict[str, int] = field(default_factory=dict)
    oom_textures: list[str] = field(default_factory=list)
    oom_reported: dict[str, int] = field(default_factory=dict)
    target_oom_injected: int = 0
    target_oom_answered: int = 0
    target_oom_in_fallback: int = 0
    target_fell_back: int = 0
    oom_spared_evictions: int = 0
    oom_spared_min_scale: int = 0
    failed_textures: int = 0
    render_scale_min: float = 1.0
    #: virtual texture tile reads: files damaged, reads that met the damage, the
    #: system's reports (file -> warnings) and its io_errors count
    tile_faults: list[dict[str, Any]] = field(default_factory=list)
    tile_faults_met: int = 0
    tile_reported: dict[str, int] = field(default_factory=dict)
    tile_errors_counted: int = 0
    last_black_pixels: int = 0
    clean_black_pixels: int = 0
    last_psnr_db: float = 0.0
    #: the settled soaked picture against the settled clean one: largest channel
    #: difference, and the fraction of pixels off by more than 5/255 (Filament's rule)
    last_max_diff: int = 0
    last_off_fraction: float = 0.0
    last_pending: int = 0
    last_resident_bytes: int = 0
    last_wanted_bytes: int = 0
    clean_resident_bytes: int = 0
    final_budget_bytes: int = 0
    last_render_scale: float = 1.0
    settle_frames: int = 0
    clean_settle_frames: int = 0
    settled: bool = False
    #: "diff": at most `max_off_fraction` of pixels off by more than 5/255 (the clean run
    #: reads no tiles of the virtual textures the soak broke either, so the two must agree);
    #: "psnr": PSNR >= `min_psnr_db`, when whole-level textures failed (they keep a coarser
    #: level for good, which a fresh engine does not)
    last_rule: str = "diff"
    resizes: int = 0
    over_budget_examples: list[dict[str, Any]] = field(default_factory=list)
    checks: dict[str, bool] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(self.checks.values())

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["size"] = list(self.size)
        out["passed"] = self.passed
        if not math.isfinite(out["last_psnr_db"]):
            out["last_psnr_db"] = None  # identical pictures (JSON has no inf)
        return out

    @staticmethod
    def _kinds(faults: list[dict[str, Any]]) -> str:
        counts = Counter(f["kind"] for f in faults)
        return ", ".join(f"{k} {counts[k]}" for k in IO_FAULTS if counts[k]) or "none"

    def lines(self) -> list[str]:
        def ok(name: str) -> str:
            return "ok  " if self.checks.get(name) else "FAIL"

        met = self.io_faults_met
        return [
            (f"soak: {self.frames} frames at {self.size[0]}x{self.size[1]} in {self.wall_s:.1f} s "
             f"(p50 {self.frame_ms_p50:.1f} ms, p99 {self.frame_ms_p99:.1f} ms per frame), "
             f"{self.budget_changes} budget changes, render scale down to "
             f"{self.render_scale_min:.3g}, {self.resizes} resizes"),
            (f"  {ok('no_frame_over_budget')} frames over budget: {self.over_budget_frames}; "
             f"refused streamer ops: {self.refused_ops}"),
            f"  {ok('no_leaks')} leaked GL objects: {self.leaked_objects}",
            (f"  {ok('rss_flat')} RSS {self.rss_warmup_bytes / 2**20:.1f} MiB after warm-up -> "
             f"{self.rss_mid_bytes / 2**20:.1f} MiB halfway -> "
             f"{self.rss_end_bytes / 2**20:.1f} MiB at the end ({self.rss_growth * 100:+.2f}%)"),
            (f"  {ok('io_faults_reported_once')} I/O faults: {len(self.io_faults)} injected "
             f"({self._kinds(self.io_faults)}), "
             f"{met} met by a read, {len(self.io_reported)} reported "
             f"(io_errors {self.io_errors_counted}, duplicates "
             f"{sum(v - 1 for v in self.io_reported.values() if v > 1)})"),
            (f"  {ok('oom_reported_once')} GL OOM: {sum(self.oom_injected.values())} injected "
             f"({self.target_oom_injected} render targets: {self.target_oom_answered} "
             f"failures reported, {self.target_oom_in_fallback} inside fallbacks, "
             f"{self.target_fell_back} fallbacks; {len(self.oom_textures)} streamed textures, "
             f"{len(self.oom_reported)} reported; spared: {self.oom_spared_evictions} eviction "
             f"copies, {self.oom_spared_min_scale} targets at the smallest scale); "
             f"{self.failed_textures} textures kept at a coarser level"),
            (f"  {ok('tile_faults_reported_once')} tile I/O faults: {len(self.tile_faults)} "
             f"injected ({self._kinds(self.tile_faults)}), {self.tile_faults_met} met by a "
             f"read, {len(self.tile_reported)} reported (io_errors {self.tile_errors_counted}, "
             f"duplicates {sum(v - 1 for v in self.tile_reported.values() if v > 1)})"),
            (f"  {ok('last_frame')} last frame, settled at budget {self.final_budget_bytes} "
             f"bytes and scale {self.last_render_scale:.4g} in {self.settle_frames} frames "
             f"(clean run {self.clean_settle_frames}): {self.last_black_pixels} black pixels "
             f"(clean {self.clean_black_pixels}), PSNR {self.last_psnr_db:.1f} dB, max diff "
             f"{self.last_max_diff}, {self.last_off_fraction * 100:.3f}% pixels off > 5/255 "
             f"(rule: {self.last_rule}); "
             f"pending {self.last_pending}, resident {self.last_resident_bytes} bytes "
             f"(clean {self.clean_resident_bytes})"),
            f"soak {'PASSED' if self.passed else 'FAILED'}",
        ]


def copy_textures(paths: Sequence[Path], dest: Path) -> Path:
    """The soak damages texture files: it works on a copy of the ones its scene reads, never
    on the cache (copying the whole cache folder cost 21 s once it held a 10,000-image wall
    of 1024^2 textures, for a soak of 8 of them)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for path in paths:
        shutil.copy2(path, dest / Path(path).name)
    return dest


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10.0 * math.log10(255.0 ** 2 / mse)


def _max_diff(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.abs(a.astype(np.int16) - b.astype(np.int16)).max(initial=0))


def _off_fraction(a: np.ndarray, b: np.ndarray, tol: int = 5) -> float:
    diff = np.abs(a.astype(np.int16) - b.astype(np.int16)).reshape(-1, a.shape[-1])
    return float(np.count_nonzero(diff.max(axis=1) > tol)) / max(1, diff.shape[0])


def _black(image: np.ndarray) -> int:
    return int(np.count_nonzero(image.reshape(-1, image.shape[-1]).max(axis=1) == 0))


class _Faults:
    """The soak's fault injection and its bookkeeping."""

    def __init__(self, device: Device, settings: SoakSettings) -> None:
        self.device = device
        self.settings = settings
        self.rng = np.random.default_rng([settings.seed, 1])
        self.active = False
        self.oom: Counter[str] = Counter()
        self.oom_textures: set[str] = set()
        self.target_oom = 0
        self.io: list[dict[str, Any]] = []
        self.met: set[str] = set()  # keys whose read failed after their fault
        self.tile_io: list[dict[str, Any]] = []
        self.files: LevelFiles | None = None  # the streamer's level files (reads go through)
        self.damaged: dict[str, str] = {}  # damaged path -> texture key
        self.tile_met: set[str] = set()  # virtual textures (paths) whose tile read failed
        self.items: dict[str, Any] = {}  # key -> the streamer's item
        self.spared_evictions = 0
        self.target_floor: dict[str, int] = {}  # target name -> its bytes at the min scale
        self.spared_min_scale = 0
        self.counter: _FaultCounter | None = None

    def inject_oom(self, what: str, nbytes: int) -> bool:
        if not self.active or self.rng.random() >= self.settings.oom_probability:
            return False
        t = TARGET_LABEL.search(what)
        if t is not None:
            if nbytes <= self.target_floor.get(t.group("name"), 0):
                # At the resolution controller's smallest scale a failed release-first
                # allocation has nothing left to fall back to and re-raises (by design,
                # resolution/targets.py): spared, and counted (a finding, see the report).
                self.spared_min_scale += 1
                return False
            self.target_oom += 1
            if self.counter is not None:
                self.counter.injected_target()
            self.oom["render target"] += 1
            return True
        m = STREAMED_LABEL.search(what)
        if m is not None and "fence" not in what and "ring" not in what:
            item = self.items.get(m.group("key"))
            if item is not None and int(m.group("level")) > item.base:
                # A realloc eviction's smaller copy: failing it leaves the larger storage
                # in place, over the pool, with no way to free it (a finding, see the
                # report); a real OOM is answered by giving memory back, so it is spared.
                self.spared_evictions += 1
                return False
            if len(self.oom_textures) >= max(1, len(self.items) // 4):
                # at most a quarter failed by OOM (and half by I/O): a quarter stay healthy
                # and the streamer keeps streaming them to the end of the run
                return False
            self.oom_textures.add(m.group("key"))
            self.oom["streamed texture"] += 1
            return True
        return False

    def inject_io(self, frame: int, items: list[Any]) -> None:
        faulted = {f["key"] for f in self.io}
        if len(faulted) >= max(1, len(items) // 2):
            return  # half the textures stay sound: the scene must still show something
        candidates = [it for it in items if it.key not in faulted and not it.failed]
        if not candidates:
            return
        # A texture in use now (its finest resident level the finest of any): evicted and
        # read again as the budget moves, so the damage is met by a read.
        finest = min(it.base for it in candidates)
        candidates = [it for it in candidates if it.base == finest]
        item = candidates[int(self.rng.integers(len(candidates)))]
        kind = IO_FAULTS[len(self.io) % len(IO_FAULTS)]
        path = Path(item.tf.path)
        if kind == "vanish":
            path.unlink()
        elif kind == "truncate":
            size = path.stat().st_size
            with open(path, "r+b") as fh:
                fh.truncate(size // 2)
        else:  # unreadable, also for root: the path is now a folder
            path.unlink()
            path.mkdir()
        self.damaged[os.fspath(path)] = item.key
        if self.files is not None:  # its open descriptor would still read the old file
            self.files.drop(path)
        self.io.append({"frame": frame, "kind": kind, "key": item.key, "path": str(path)})

    def watch_files(self, streamer: LevelStreamer) -> None:
        """Read the streamer's levels through `_ObservedFiles` (before the first frame)."""
        self.files = streamer.files = _ObservedFiles(streamer.files, self)

    def inject_tile_io(self, frame: int, vts: Any) -> None:
        """Damage one virtual texture's file while its tiles are being read: vanished,
        truncated (a half-size file put in its place: a file shrunk in place under a live
        mapping is a SIGBUS, see the report) or unreadable (a folder), then have its source
        open the path again, as it would after losing its handle."""
        faulted = {f["vt"] for f in self.tile_io}
        count = len(vts.textures)
        if len(faulted) >= max(1, count // 2):
            return  # half the textures stay sound
        candidates = [vt for vt in range(count) if vt not in faulted and vt not in vts.failed]
        if not candidates:
            return
        # A texture in use now (most tiles resident beyond its pinned one): the budget's
        # moves rebuild and refill the cache, so the damage is met by a tile read.
        most = max(len(vts.textures[vt].resident) for vt in candidates)
        candidates = [vt for vt in candidates if len(vts.textures[vt].resident) == most]
        vt = candidates[int(self.rng.integers(len(candidates)))]
        kind = IO_FAULTS[len(self.tile_io) % len(IO_FAULTS)]
        source = vts.io.sources[vt]
        path = Path(source.path)
        if kind == "vanish":
            path.unlink()
        elif kind == "truncate":
            half = path.with_name(path.name + ".half")
            with open(path, "rb") as src, open(half, "wb") as dst:
                dst.write(src.read(path.stat().st_size // 2))
            os.replace(half, path)
        else:
            path.unlink()
            path.mkdir()
        self._watch_tiles(source, str(path))
        source.reopen()
        self.tile_io.append({"frame": frame, "kind": kind, "vt": vt, "path": str(path)})

    def _watch_tiles(self, source: Any, name: str) -> None:
        original = source.read_tile

        def read(level: int, x: int, y: int) -> bytes:
            try:
                return original(level, x, y)
            except Exception:
                self.tile_met.add(name)
                raise
        source.read_tile = read  # TileIO looks the method up per read


def _budget_hook(settings: SoakSettings, faults: _Faults, state: dict[str, Any]):
    """Random budget steps between the scene's floor and ceiling (see the module doc)."""
    rng = np.random.default_rng([settings.seed, 2])
    quiet_from = settings.frames - settings.quiet

    def hook(ctx: FrameContext) -> None:
        stats = ctx.provider.stats()
        scale = max(ctx.renderer.render_scale, 1e-3)
        tails = int(stats.min_bytes)
        wanted = tails + above_tail_at_full_scale(int(stats.wanted_bytes), tails, scale)
        state["wanted"] = max(state.get("wanted", 0), int(wanted))
        fixed = fixed_usage(ctx.device.ledger.by_category(), ctx.renderer.target_bytes)
        state["fixed"] = max(state.get("fixed", 0), fixed)
        spec, size = ctx.renderer.cost_spec, ctx.renderer.output_size
        # The ceiling also pays for a realloc's transient copy of the largest texture.
        floor, ceiling = budget_range(state["fixed"], spec.bytes_at(*size, state["min_scale"]),
                                      spec.bytes_at(*size, 1.0), tails, state["wanted"],
                                      extra=state.get("largest", 0))
        nxt = ctx.frame + 1
        if nxt >= quiet_from:
            target = ceiling
        elif nxt % settings.budget_every == 0:
            target = int(floor + rng.uniform(0.0, 1.0) * (ceiling - floor))
        else:
            return
        if target != ctx.governor.budget_bytes:
            ctx.governor.set_budget(int(target))
            state["changes"] = state.get("changes", 0) + 1

    return hook


def run_soak(device: Device, scene_factory: SceneFactory, options: Mapping[str, Any],
             settings: SoakSettings, *, reference_options: Mapping[str, Any] | None = None,
             say=None) -> SoakReport:
    """Run the soak on `device` (headless) with the scene `scene_factory` builds from
    `options` (whose texture files must be the soak's own copies: they get damaged).
    `reference_options` build the clean scene for the last-frame check (default: `options`;
    pass ones reading undamaged textures). `say(line)` gets progress lines."""
    say = say or log.info
    s = settings
    if s.loop_camera:
        scene_factory = _looping(scene_factory)
    run = RunSettings(frames=s.frames, size=s.size, budget="100%", provider=s.provider,
                      options=dict(options), keep_frames=s.keep_frames, trace=s.trace,
                      streamer=replace(StreamerSettings(), io_latency_ms=s.io_latency_ms,
                                       ram_cache_bytes=0))  # every read meets the file
    faults = _Faults(device, s)
    counter = _FaultCounter()
    faults.counter = counter
    unsubscribe = device.faults.subscribe(counter)
    device.ledger.history_limit = min(device.ledger.history_limit, 2 * s.keep_frames)
    governor = make_governor(device, run)
    mark = device.tracker.mark()
    device.ledger.reset_frame_peak()
    state: dict[str, Any] = {"min_scale": run.resolution.min_scale}
    hooks = [_budget_hook(s, faults, state)]
    over = refused = resizes = 0
    over_examples: list[dict[str, Any]] = []
    ms: list[float] = []  # bounded below: a reservoir for the percentiles
    scale_min = 1.0
    rss_warm = rss_mid = rss_end = 0
    tile_errors = whole_failed = 0
    broken: set[str] = set()  # file names of virtual textures whose tile reads failed
    t0 = time.perf_counter()
    quiet_from = s.frames - s.quiet
    last_say = time.monotonic()
    loop = FrameLoop(device, governor, scene_factory, run, on_frame=hooks)
    try:
        whole = loop.provider.levels if isinstance(loop.provider, StreamingProvider) else None
        items = whole.items if whole is not None else []
        if items:
            state["largest"] = max(sum(lv.nbytes for lv in it.tf.levels) for it in items)
        faults.items = {it.key: it for it in items}
        if whole is not None:
            faults.watch_files(whole)

        def floors() -> dict[str, int]:
            out = loop.renderer.output_size
            return {t.name: t.bytes(*out, run.resolution.min_scale)
                    for t in loop.renderer.cost_spec.targets}
        faults.target_floor = floors()
        device.fault_injector = faults.inject_oom
        rng = np.random.default_rng([s.seed, 3])
        for frame in range(s.frames):
            faults.active = s.warmup <= frame < quiet_from
            if faults.active and frame % s.io_fault_every == s.io_fault_every // 2:
                faults.inject_io(frame, list(items))
                vts = _virtual_system(loop.provider)
                if vts is not None and vts.textures:
                    faults.inject_tile_io(frame, vts)
            if s.resize_every and faults.active and frame % s.resize_every == 0:
                w, h = s.size
                f = float(rng.uniform(0.5, 1.0))
                loop.renderer.set_output_size((max(16, int(w * f)), max(16, int(h * f))))
                faults.target_floor = floors()
                resizes += 1
            elif frame == quiet_from and loop.renderer.output_size != tuple(s.size):
                loop.renderer.set_output_size(tuple(s.size))
                faults.target_floor = floors()
            counter.frame_boundary()  # a fallback ends within the resize that began it
            record = loop.step(frame)
            if record["total_bytes"] > record["budget_bytes"]:
                over += 1
                if len(over_examples) < 5:
                    over_examples.append({k: record.get(k) for k in (
                        "frame", "total_bytes", "budget_bytes", "by_category", "render_scale",
                        "scale_reason", "pool_bytes")} | {"oom": dict(faults.oom)})
            scale_min = min(scale_min, float(record["render_scale"]))
            if len(ms) < 4096:
                ms.append(float(record["ms"]))
            else:
                j = int(rng.integers(frame + 1))
                if j < len(ms):
                    ms[j] = float(record["ms"])
            if frame + 1 == s.warmup:
                rss_warm = rss_bytes()
            elif frame + 1 == (s.warmup + s.frames) // 2:
                rss_mid = rss_bytes()
            now = time.monotonic()
            if now - last_say >= 10.0:
                say(f"soak: frame {frame + 1}/{s.frames}, {record['ms']:.0f} ms/frame, "
                    f"{len(faults.io)} I/O faults, {sum(faults.oom.values())} OOMs injected")
                last_say = now
        device.fault_injector = None
        rss_end = rss_bytes()  # the last frame's, before the run's objects are released
        last_t = (s.frames - 1) * run.dt
        # Recovery: the budget stays where the quiet phase left it, the camera stands at the
        # last frame's view, and the engine settles; a clean run does the same below.
        loop.on_frame = []
        final_budget = int(governor.budget_bytes)
        soaked = settle(loop, final_budget, last_t, s.frames, s.settle_frames,
                        s.settle_calm_frames)
        over += soaked.over_budget_frames
        stats = loop.provider.stats()
        refused = int(getattr(stats, "budget_violations", 0))
        io_errors = int(getattr(stats, "io_errors", 0))
        failed = whole_failed = sum(1 for it in items if it.failed)
        vts = _virtual_system(loop.provider)
        if vts is not None:
            tile_errors = vts.io_errors
            failed += len(vts.failed)
            broken = {Path(vts.textures[vt].path).name for vt in vts.failed}
    finally:
        device.fault_injector = None
        loop.release()
        unsubscribe()
    leaked = finish_run(device, mark)
    wall = time.perf_counter() - t0

    scale = soaked.render_scale
    ref_run = replace(run, options=dict(reference_options if reference_options is not None
                                         else options), budget=final_budget, scale=scale,
                      keep_frames=1,
                      resolution=replace(run.resolution, min_scale=scale, max_scale=scale))
    clean = _clean_settled(device, scene_factory, ref_run, final_budget, last_t, s, broken)
    report = SoakReport(
        frames=s.frames, size=tuple(s.size), wall_s=wall,
        frame_ms_p50=float(np.percentile(ms, 50)), frame_ms_p99=float(np.percentile(ms, 99)),
        over_budget_frames=over, budget_changes=int(state.get("changes", 0)),
        refused_ops=refused, leaked_objects=leaked, rss_warmup_bytes=rss_warm,
        rss_end_bytes=rss_end, rss_mid_bytes=rss_mid, rss_growth=(rss_end - rss_warm) / rss_warm if rss_warm else 0.0,
        io_faults=faults.io, io_faults_met=len(faults.met), io_reported=dict(counter.io),
        tile_faults=faults.tile_io, tile_faults_met=len(faults.tile_met),
        tile_reported=dict(counter.tiles), tile_errors_counted=tile_errors,
        io_errors_counted=io_errors, oom_injected=dict(faults.oom),
        oom_textures=sorted(faults.oom_textures), oom_reported=dict(counter.oom),
        target_oom_injected=faults.target_oom, oom_spared_evictions=faults.spared_evictions,
        oom_spared_min_scale=faults.spared_min_scale, target_oom_answered=counter.targets,
        target_oom_in_fallback=counter.target_in_fallback, target_fell_back=counter.fell_back,
        failed_textures=failed, render_scale_min=scale_min,
        last_black_pixels=_black(soaked.image), clean_black_pixels=_black(clean.image),
        last_psnr_db=_psnr(soaked.image, clean.image),
        last_max_diff=_max_diff(soaked.image, clean.image),
        last_off_fraction=_off_fraction(soaked.image, clean.image),
        last_pending=soaked.pending, last_resident_bytes=soaked.resident_bytes,
        last_wanted_bytes=soaked.wanted_bytes, clean_resident_bytes=clean.resident_bytes,
        final_budget_bytes=final_budget, last_render_scale=scale,
        settle_frames=soaked.frames, clean_settle_frames=clean.frames,
        settled=soaked.settled and clean.settled, resizes=resizes,
        last_rule="psnr" if whole_failed else "diff",
        over_budget_examples=over_examples)
    io_keys = set(counter.io)
    report.checks = {
        "no_frame_over_budget": over == 0 and refused == 0,
        "no_leaks": leaked == 0,
        "rss_flat": report.rss_growth < s.rss_growth_limit,
        # Every read that met a fault is reported, once, and counted once; nothing else is.
        # (a texture an injected OOM failed first was reported then, and is not again)
        "io_faults_reported_once": faults.met - set(counter.oom) <= io_keys
        and all(v == 1 for v in counter.io.values())
        and io_errors == len(io_keys)
        and io_keys <= {f["key"] for f in faults.io},
        # Every streamed texture an OOM hit is reported once (and only those); every failed
        # target allocation is answered by the target set's fallback warning.
        "oom_reported_once": set(counter.oom) <= faults.oom_textures | io_keys
        and all(v == 1 for v in counter.oom.values())
        and counter.unanswered == 0 and counter.unexplained == 0
        and counter.target_reported + counter.target_in_fallback == faults.target_oom
        and (counter.target_in_fallback == 0 or counter.fell_back > 0),
        # Every tile read that met a damaged file is reported once per texture, counted
        # once, and nothing else is.
        "tile_faults_reported_once": faults.tile_met <= set(counter.tiles)
        and all(v == 1 for v in counter.tiles.values())
        and tile_errors == len(counter.tiles)
        and set(counter.tiles) <= {f["path"] for f in faults.tile_io},
        # Recovery: once settled at the same budget, scale and view, the soaked engine
        # shows what a fresh one does.
        "last_frame": report.settled and report.last_black_pixels <= report.clean_black_pixels
        and (report.last_off_fraction <= s.max_off_fraction if report.last_rule == "diff"
             else report.last_psnr_db >= s.min_psnr_db),
    }
    return report


@dataclass
class Settled:
    """Where a settle ended: the picture, and whether the provider really went quiet."""

    image: np.ndarray
    frames: int  # frames it took (or the cap)
    settled: bool
    render_scale: float
    over_budget_frames: int
    pending: int
    resident_bytes: int
    wanted_bytes: int


def provider_idle(provider: Any) -> bool:
    """Nothing in flight at this view and budget: no level read queued or running, no fade
    under way (every clamp at its finest resident level), and the virtual texture system
    asked for no tile this frame (it asks for every wanted tile it has room for) and holds
    none waiting for a slot. (Not `pending_count`: the streamer keeps a texture's next finer
    level in hand while the plan does not want it, and counts it there for good.)"""
    if isinstance(provider, StreamingProvider) and provider.pending_reads():
        return False
    table = provider.resident_textures()
    if len(table.min_lod) and not np.allclose(np.asarray(table.min_lod, np.float64),
                                              np.asarray(table.finest, np.float64)):
        return False
    vts = _virtual_system(provider)
    return vts is None or (vts.stats.requests == 0 and vts.stats.in_hand == 0)


def settle(loop: FrameLoop, budget: int, hold_t: float, first_frame: int, max_frames: int,
           calm_frames: int) -> Settled:
    """Hold the budget at `budget` and the camera at time `hold_t`, and step until the
    provider is idle (`provider_idle`) and the render scale and the provider's resident
    bytes unchanged for `calm_frames` frames in a row (or `max_frames` passed). Frame
    numbers go on from `first_frame`, so the streamers' hysteresis and the feedback
    readbacks see time pass; only the view stands."""
    loop.governor.set_budget(int(budget))
    calm = over = 0
    state = None
    frames = 0

    def hold(scene: Any) -> None:
        scene.update(hold_t)

    for frames in range(1, max_frames + 1):
        record = loop.step(first_frame + frames - 1, camera_override=hold)
        if record["total_bytes"] > record["budget_bytes"]:
            over += 1
        now = (float(record["render_scale"]), int(loop.provider.stats().resident_bytes))
        calm = calm + 1 if provider_idle(loop.provider) and now == state else 0
        state = now
        if calm >= calm_frames:
            break
    st = loop.provider.stats()
    scale = state[0] if state is not None else 1.0
    return Settled(loop.renderer.read_output(), frames, calm >= calm_frames, scale,
                   over, int(getattr(st, "pending_count", 0)), int(st.resident_bytes),
                   int(st.wanted_bytes))


def _looping(factory: SceneFactory) -> SceneFactory:
    def build(device: Device, provider: Any, options: Mapping[str, Any]) -> Any:
        scene = factory(device, provider, options)
        if getattr(scene, "camera_path", None) is not None:
            scene.camera_path.loop = True
        return scene
    return build


def _virtual_system(provider: Any) -> Any:
    """The provider's virtual texture system (the soak reads more of it than the renderer's
    `VirtualTextures` protocol names: its textures, sources and failures)."""
    return provider.virtual_system() if isinstance(provider, VirtualTextureHost) else None


def _clean_settled(device: Device, factory: SceneFactory, run: RunSettings, budget: int,
                   t: float, s: SoakSettings, broken: set[str] = frozenset()) -> Settled:
    """The reference: a fresh engine (same provider and streamer settings, no faults)
    started at the soak's final budget, render scale and view, settled the same way: what
    the soaked engine must recover to. The virtual textures whose files the soak broke
    (`broken`, file names) read no tiles here either, so both runs give the page cache to
    the same textures."""
    run = replace(run, trace=None)  # the trace is the soak's run, not its reference
    governor = make_governor(device, run)
    mark = device.tracker.mark()
    loop = FrameLoop(device, governor, factory, run)
    try:
        vts = _virtual_system(loop.provider)
        for vt, tex in enumerate(vts.textures if vts is not None else []):
            if Path(tex.path).name in broken:
                vts.mark_failed(vt, "broken in the soak")
        return settle(loop, budget, t, s.frames, s.settle_frames, s.settle_calm_frames)
    finally:
        loop.release()
        finish_run(device, mark)
