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
   where chmod 000 is not); reads wait `io_latency_ms`; and each allocation of a streamed
   texture or a render target fails as GL_OUT_OF_MEMORY with probability `oom_probability`
   (`device.fault_injector`).
3. quiet (`quiet_frames`): no new faults, the budget back at the ceiling; the last frame is
   then checked.

What is checked (SoakReport.checks), all of it printed by the CLI:
- no frame over budget (the ledger total at the end of each frame, against the budget it ran
  under), and no refused streamer op (the plan never promised more than the pool);
- no GL object leaked once the run's objects are released;
- RSS growth from the end of warm-up to the end below `rss_growth_limit` (5%): records are
  bounded (`keep_frames`, the ledger's history_limit), so 100,000 frames cost what 10,000 do;
- every injected fault reported exactly once: each texture whose read failed is reported by
  the streamer in exactly one warning and counted once in `io_errors`; every streamed texture
  hit by an injected OOM is reported (marked failed) exactly once; every failed render-target
  allocation is answered by a fallback (the resolution controller's out-of-memory ceiling);
  faults that no read ever met (the texture was not read again) are listed, not counted;
- the last frame is a picture: no pure-black pixels beyond those of a clean reference frame
  (same camera time and render scale, every texture resident, no faults), PSNR against that
  reference above `min_psnr_db` (textures marked failed keep a coarser level, so it is not
  bit-exact), and the streamer settled: resident bytes >= wanted bytes.
  The render scale is the last frame's: after an injected OOM the resolution controller
  holds a lower ceiling for `oom_hold_frames` (600), which is the designed answer.
"""
from __future__ import annotations

import logging
import math
import os
import re
import shutil
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..gl.device import Device
from ..streaming.settings import StreamerSettings
from .loop import FrameContext, FrameLoop, SceneFactory, make_governor
from .run import finish_run
from .settings import RunSettings

log = logging.getLogger(__name__)
STREAMED = "texture.streamed"
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
    #: a scripted camera path loops (with a cut back to its start), so a long soak keeps
    #: moving through the scene instead of resting at the path's end
    loop_camera: bool = True

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


class _WarningCounter(logging.Handler):
    """Counts the streamer's and the target set's fault warnings, and matches each injected
    render-target OOM with its report.

    A failed target allocation logs "targets at scale S failed" once; a release-first
    failure then tries smaller scales, whose own failures are not logged one by one, and ends
    with "fell back to scale S". So an injection outside a fallback must be answered by the
    next "failed" warning, and one inside it by the fallback's end. The frame loop may retry
    a resize in the same frame (MemoryReaction), so a "failed" warning arriving while its
    injection was booked as inside a fallback re-books that injection as a fresh failure."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.io = Counter()  # key -> "texture K stays at level" warnings
        self.oom = Counter()  # key -> "streaming K failed" warnings
        self.targets = 0  # "targets at scale S failed" warnings
        self.fell_back = 0  # "fell back to scale S" warnings
        self.target_reported = 0  # injections answered by their "failed" warning
        self.target_in_fallback = 0  # injections inside a fallback
        self.unexplained = 0  # "failed" warnings with no injection behind them
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

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.msg if isinstance(record.msg, str) else ""
        if msg.startswith("texture %s stays at level"):
            self.io[str(record.args[0])] += 1
        elif msg.startswith("streaming %s failed"):
            self.oom[str(record.args[0])] += 1
        elif "targets at scale" in msg:
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
        elif "fell back to scale" in msg:
            self.fell_back += 1
            self.in_fallback = False


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
    last_black_pixels: int = 0
    clean_black_pixels: int = 0
    last_psnr_db: float = 0.0
    last_pending: int = 0
    last_resident_bytes: int = 0
    last_wanted_bytes: int = 0
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
            (f"  {ok('io_faults_reported_once')} I/O faults: {len(self.io_faults)} injected, "
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
            (f"  {ok('last_frame')} last frame: {self.last_black_pixels} black pixels "
             f"(clean reference {self.clean_black_pixels}), PSNR {self.last_psnr_db:.1f} dB "
             f"against it, pending {self.last_pending}, resident {self.last_resident_bytes} "
             f"of wanted {self.last_wanted_bytes} bytes"),
            f"soak {'PASSED' if self.passed else 'FAILED'}",
        ]


def copy_textures(source: Path, into: Path) -> Path:
    """The soak damages texture files: it works on a copy, never on the cache."""
    dest = Path(into) / Path(source).name
    shutil.copytree(source, dest, dirs_exist_ok=True)
    return dest


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10.0 * math.log10(255.0 ** 2 / mse)


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
        self.items: dict[str, Any] = {}  # key -> the streamer's item
        self.spared_evictions = 0
        self.target_floor: dict[str, int] = {}  # target name -> its bytes at the min scale
        self.spared_min_scale = 0
        self.counter: _WarningCounter | None = None

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

    def watch(self, item: Any) -> None:
        """Wrap one texture's level reader to see whether a read met its fault."""
        tf = item.tf
        original = tf.read_level_all
        key = item.key

        def read(level: int) -> bytes:
            try:
                return original(level)
            except Exception:
                self.met.add(key)
                raise
        try:
            tf.read_level_all = read  # the streamer's reader looks it up per read
        except AttributeError:  # a slotted file object: faults are still injected and
            pass  # reported, only "met" cannot be told

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
        self.watch(item)
        self.io.append({"frame": frame, "kind": kind, "key": item.key, "path": str(path)})


def _budget_hook(settings: SoakSettings, faults: _Faults, state: dict[str, Any]):
    """Random budget steps between the scene's floor and ceiling (see the module doc)."""
    rng = np.random.default_rng([settings.seed, 2])
    quiet_from = settings.frames - settings.quiet

    def hook(ctx: FrameContext) -> None:
        stats = ctx.provider.stats()
        ledger = ctx.device.ledger
        scale = max(ctx.renderer.render_scale, 1e-3)
        tails = int(stats.min_bytes)
        wanted = tails + max(0, int(stats.wanted_bytes) - tails) / (scale * scale)
        state["wanted"] = max(state.get("wanted", 0), int(wanted))
        fixed = ledger.total - ctx.renderer.target_bytes - ledger.category_total(STREAMED)
        state["fixed"] = max(state.get("fixed", 0), fixed)
        spec, size = ctx.renderer.cost_spec, ctx.renderer.output_size
        min_scale = state["min_scale"]
        floor = state["fixed"] + spec.bytes_at(*size, min_scale) + tails
        # The ceiling also pays for a realloc's transient copy of the largest texture.
        ceiling = max(floor, state["fixed"] + spec.bytes_at(*size, 1.0) + state["wanted"]
                      + state.get("largest", 0))
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
                      options=dict(options), keep_frames=s.keep_frames,
                      streamer=replace(StreamerSettings(), io_latency_ms=s.io_latency_ms,
                                       ram_cache_bytes=0))  # every read meets the file
    faults = _Faults(device, s)
    counter = _WarningCounter()
    faults.counter = counter
    watched = [logging.getLogger("engine.streaming.provider"),
               logging.getLogger("engine.resolution.targets")]
    for lg in watched:
        lg.addHandler(counter)
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
    image = None
    t0 = time.perf_counter()
    quiet_from = s.frames - s.quiet
    last_say = time.monotonic()
    loop = FrameLoop(device, governor, scene_factory, run, on_frame=hooks)
    try:
        items = getattr(loop.provider, "items", [])
        if items:
            state["largest"] = max(sum(lv.nbytes for lv in it.tf.levels) for it in items)
        faults.items = {it.key: it for it in items}

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
        image = loop.renderer.read_output()
        stats = loop.provider.stats()
        refused = int(getattr(stats, "budget_violations", 0))
        io_errors = int(getattr(stats, "io_errors", 0))
        failed = sum(1 for it in items if it.failed)
        last_t = (s.frames - 1) * run.dt
        last_scale = float(loop.renderer.render_scale)
    finally:
        device.fault_injector = None
        loop.release()
        for lg in watched:
            lg.removeHandler(counter)
    leaked = finish_run(device, mark)
    wall = time.perf_counter() - t0

    ref_run = replace(run, options=dict(reference_options if reference_options is not None
                                         else options))
    clean = _clean_frame(device, scene_factory, replace(ref_run, scale=last_scale),
                         s.frames - 1, last_t)
    report = SoakReport(
        frames=s.frames, size=tuple(s.size), wall_s=wall,
        frame_ms_p50=float(np.percentile(ms, 50)), frame_ms_p99=float(np.percentile(ms, 99)),
        over_budget_frames=over, budget_changes=int(state.get("changes", 0)),
        refused_ops=refused, leaked_objects=leaked, rss_warmup_bytes=rss_warm,
        rss_end_bytes=rss_end, rss_mid_bytes=rss_mid, rss_growth=(rss_end - rss_warm) / rss_warm if rss_warm else 0.0,
        io_faults=faults.io, io_faults_met=len(faults.met), io_reported=dict(counter.io),
        io_errors_counted=io_errors, oom_injected=dict(faults.oom),
        oom_textures=sorted(faults.oom_textures), oom_reported=dict(counter.oom),
        target_oom_injected=faults.target_oom, oom_spared_evictions=faults.spared_evictions,
        oom_spared_min_scale=faults.spared_min_scale, target_oom_answered=counter.targets,
        target_oom_in_fallback=counter.target_in_fallback, target_fell_back=counter.fell_back,
        failed_textures=failed, render_scale_min=scale_min,
        last_black_pixels=_black(image), clean_black_pixels=_black(clean),
        last_psnr_db=_psnr(image, clean), last_pending=int(stats.pending_count),
        last_resident_bytes=int(stats.resident_bytes),
        last_wanted_bytes=int(stats.wanted_bytes), resizes=resizes,
        over_budget_examples=over_examples)
    io_keys = set(counter.io)
    report.checks = {
        "no_frame_over_budget": over == 0 and refused == 0,
        "no_leaks": leaked == 0,
        "rss_flat": report.rss_growth < s.rss_growth_limit,
        # Every read that met a fault is reported, once, and counted once; nothing else is.
        "io_faults_reported_once": (faults.met <= io_keys or not _watchable(items))
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
        "last_frame": report.last_black_pixels <= report.clean_black_pixels
        and report.last_psnr_db >= s.min_psnr_db
        and report.last_resident_bytes >= report.last_wanted_bytes,
    }
    return report


def _looping(factory: SceneFactory) -> SceneFactory:
    def build(device: Device, provider: Any, options: Mapping[str, Any]) -> Any:
        scene = factory(device, provider, options)
        if getattr(scene, "camera_path", None) is not None:
            scene.camera_path.loop = True
        return scene
    return build


def _watchable(items: list[Any]) -> bool:
    return not items or not hasattr(type(items[0].tf), "__slots__")


def _clean_frame(device: Device, factory: SceneFactory, run: RunSettings, frame: int,
                 t: float) -> np.ndarray:
    """The reference picture: the same scene and camera time, every texture resident (the
    static provider), no faults, render scale 1."""
    ref = replace(run, provider="static", react=False, keep_frames=1)
    governor = make_governor(device, ref)
    mark = device.tracker.mark()
    loop = FrameLoop(device, governor, factory, ref)
    try:
        loop.step(frame)
        image = loop.renderer.read_output()
    finally:
        loop.release()
    finish_run(device, mark)
    return image


