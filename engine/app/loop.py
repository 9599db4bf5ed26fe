"""The frame loop: one run's objects and its per-frame order, for every host.

Per frame: memory reaction (the governor splits the budget in force now, the resolution
controller picks a render scale that fits the targets' allowance, targets are reallocated, the
streamer is granted its pool) -> camera update -> GPU feedback (optional) -> provider.begin_frame
(the streamer fits the pool just granted) -> scene pass -> present -> provider.end_frame ->
on_frame hooks -> device.end_frame (ledger sample). A budget changed between frames is thus
fitted by the next frame before it allocates anything. Time advances by a fixed step, not the
wall clock, so frame N always shows the same picture.

The headless runner and the window drive the same `FrameLoop`; they differ only in where the
output goes and what ends the run (engine.hosts.run).
"""
from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..diagnostics.live import LivePublisher
from ..diagnostics.snapshot import write_snapshot
from ..diagnostics.trace import Tracer
from ..errors import UsageError
from ..gl.device import Device
from ..memory.budget import Budget
from ..errors import BudgetError
from ..memory.governor import BudgetSplit, Governor, split_usage
from ..memory.group import join_share
from ..memory.ledger import Owner
from ..memory.sizes import format_bytes, format_exact
from ..render.feedback import FeedbackPass
from ..render.renderer import Renderer
from ..render.scene import Scene
from ..resolution.policy import Decision, ResolutionController
from ..streaming.heap import map_large_buffers
from ..streaming.contract import (FeedbackConsumer, PooledProvider, ProviderStats,
                                  TextureProvider)
from .providers import make_provider
from .settings import RunSettings

log = logging.getLogger(__name__)

SceneFactory = Callable[[Device, TextureProvider, Mapping[str, Any]], Scene]


@dataclass
class FrameContext:
    """What an on_frame hook sees; hooks may add keys to `record` (it goes in the report) and
    change the budget through `governor.set_budget` (answered by the next frame)."""

    frame: int
    time: float
    device: Device
    governor: Governor
    renderer: Renderer
    scene: Scene
    provider: TextureProvider
    record: dict[str, Any]
    allocation: BudgetSplit | None = None
    decision: Decision | None = None


FrameHook = Callable[[FrameContext], None]


@dataclass(frozen=True)
class OverBudget:
    """What a host's `on_over_budget` callback is told when a frame goes over the budget (once
    per stretch of frames over it): which frame, by how much, and why."""

    frame: int
    used_bytes: int
    budget_bytes: int
    reason: str


OverBudgetHook = Callable[[OverBudget], None]


def over_budget_reason(record: Mapping[str, Any], start_bytes: int,
                       notes: Iterable[str] = ()) -> str | None:
    """Why a frame's record is over its budget, or None when it is not: the governor's notes
    when its minimums did not fit, else the bytes the ledger peaked at. Memory carried over
    a budget cut from the frame before (`start_bytes`, the total when the frame began) and
    given back within the frame is following the cut, not going over it."""
    budget = int(record["budget_bytes"])
    peak = int(record.get("peak_bytes", record["total_bytes"]))
    said = "; ".join(notes)
    if record.get("over_budget"):
        return said or "the minimum allocations exceed the budget"
    if peak > budget and (peak > start_bytes or int(record["total_bytes"]) > budget):
        return f"peaked at {peak:,} bytes, {peak - budget:,} over the {budget:,}-byte budget"
    return None


@dataclass
class FrameClock:
    """Seconds of simulated time: the loop sets `now` each frame. Injected into the streamer
    in deterministic runs, so its fades and caps depend on the frame number only."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


def make_governor(device: Device, settings: RunSettings) -> Governor:
    """The run's one budget owner: a percentage budget is taken of the probed VRAM, and where
    the driver reports free VRAM (NVX) other programs' use lowers the effective budget; with
    `settings.share` it takes a seat on that share board (engine.memory.shares)."""
    budget = Budget.on_device(device, settings.budget)
    if budget.bytes > budget.reference_total:
        what = "VRAM" if budget.vram_total else "virtual VRAM (the driver reports none)"
        log.warning("budget %s is more than the device's %s of %s: the device's memory, not "
                    "the budget, will limit this run", format_exact(budget.bytes),
                    format_exact(budget.reference_total), what)
    pressure = device.vram if device.probe.source == "NVX" else None
    share = None if settings.share is None else \
        join_share(settings.share, budget.bytes)
    return Governor(settings.governor, budget=budget, pressure=pressure, share=share)


def grant(provider: PooledProvider, alloc: BudgetSplit) -> None:
    """Hand a pooled provider its streaming allowance, and its page cache's share when the
    split holds one (a provider without a page cache is granted its pool alone)."""
    if alloc.cache_allowance is None:
        provider.grant(alloc.pool_allowance)
    else:
        provider.grant(alloc.pool_allowance, alloc.cache_allowance)


class MemoryReaction:
    """The executor of the one-budget policy for a run: each frame the governor splits the
    budget, the resolution controller picks the largest render scale whose exact target bytes
    fit the targets' allowance, the renderer reallocates when the scale changes, and a pooled
    provider is granted the streaming allowance. Nobody else computes either allowance."""

    def __init__(self, device: Device, governor: Governor, renderer: Renderer,
                 controller: ResolutionController) -> None:
        self.device = device
        self.governor = governor
        self.renderer = renderer
        self.controller = controller
        # A failed allocation falls back along the controller's own grid, never elsewhere.
        renderer.targets.ladder = controller.settings.grid()

    def update(self, provider: TextureProvider,
               frame_ms: float | None) -> tuple[BudgetSplit, Decision]:
        ledger = self.device.ledger
        stats = provider.stats()
        targets = self.renderer.target_bytes
        self.controller.set_spec(self.renderer.cost_spec)  # what `targets` holds, priced
        alloc = self.governor.split(
            ledger.by_category(),
            target_curve=self.controller.target_curve(*self.renderer.output_size),
            stream_wanted=stats.wanted_bytes, stream_min=stats.min_bytes,
            stream_wanted_scale=self.renderer.render_scale, scale_cap=self.controller.scale_cap,
            resizable_target_bytes=targets, cache=stats.cache,
            elastic_bytes=stats.staging_bytes)
        # The allowance may count memory the streamer has just been told to give back but
        # still holds (the pool shrank this frame; it evicts after this). Targets must never
        # grow into it: even released first, a new set larger than the old one plus what is
        # free now would take the ledger over the budget.
        allowance = min(alloc.targets_allowance, targets + alloc.free_bytes)
        decision = self.controller.update(self.renderer.output_size, allowance,
                                          alloc.free_bytes, frame_ms)
        if decision.resize and abs(decision.scale - self.renderer.render_scale) > 1e-9:
            # the first decision replaces the smallest targets the run started with, which
            # nothing has been drawn into: they go first, so the pair never adds up
            first = decision.reason.startswith("initial")
            event = self.renderer.set_scale(decision.scale, decision.release_first or first)
            if event.failed:
                decision = self.controller.on_alloc_failed(decision.scale)
                self.renderer.set_scale(decision.scale, release_first=True)
        if isinstance(provider, PooledProvider):
            grant(provider, alloc)
        return alloc, decision


class FrameLoop:
    """One run's objects (governor, provider, scene, renderer, memory reaction) and its step."""

    def __init__(self, device: Device, governor: Governor, scene_factory: SceneFactory,
                 settings: RunSettings, *, size: tuple[int, int] | None = None,
                 on_frame: Iterable[FrameHook] = (),
                 on_over_budget: OverBudgetHook | None = None) -> None:
        self.device = device
        self.on_over_budget = on_over_budget
        self._was_over = False
        self.governor = governor
        self.settings = settings
        self.dt = settings.dt
        self.clock = FrameClock()
        self.on_frame: list[FrameHook] = list(on_frame)
        # The per-frame records; a bounded window when settings.keep_frames says so.
        self.frames: list[dict[str, Any]] | deque[dict[str, Any]] = (
            deque(maxlen=settings.keep_frames) if settings.keep_frames else [])
        map_large_buffers()  # level buffers mmapped: the heap must not grow with streaming
        self.tracer: Tracer | None = None
        if settings.trace is not None:
            try:
                self.tracer = Tracer(settings.trace)
            except RuntimeError as exc:
                raise UsageError(f"trace={settings.trace}: {exc}") from exc
        self.live = LivePublisher.start(on_snapshot=self.snapshot,
                                        renderer=device.caps.renderer)
        #: This view's part of the device's ledger: what the loop allocates is attributed to
        #: it, so several loops drawing with one device each plan with their own bytes.
        self.owner = device.ledger.owner(getattr(scene_factory, "__qualname__", "view"))
        with self.attributed():
            self._build(scene_factory, size)
        self._last_ms: float | None = None

    def attributed(self) -> AbstractContextManager[Owner]:
        """The scope in which the device's ledger is this loop's: allocations made in it are
        the loop's, and the ledger's figures are its (engine.memory.ledger, "Owners"). The
        loop's own methods enter it; a host enters it for what it does with the loop's
        objects between steps (resizing the output, reading it back)."""
        return self.device.ledger.attributed(self.owner)

    def _build(self, scene_factory: SceneFactory, size: tuple[int, int] | None) -> None:
        device, settings, governor = self.device, self.settings, self.governor
        try:
            self.provider = make_provider(settings.provider, device, settings, self.clock)
        except BaseException:
            self._close_observers()
            governor.close()
            device.ledger.release_owner(self.owner)
            raise
        self.scene: Scene | None = None
        self.renderer: Renderer | None = None
        self.feedback: FeedbackPass | None = None
        self.reaction: MemoryReaction | None = None
        try:
            self.scene = scene_factory(device, self.provider, dict(settings.options))
            # With the controller on, frame 0 picks the scale that fits: the targets start at
            # the smallest so that none larger than the budget holds is ever made.
            scale = settings.resolution.grid()[0] if settings.react else settings.scale
            self.renderer = Renderer(device, self.provider, size or settings.size,
                                     scale=scale, upscale=settings.upscale)
            if settings.feedback:
                self.feedback = FeedbackPass(device, self.provider)
            self.renderer.view_mode = settings.view_mode  # type: ignore[assignment]
            if settings.react:
                self.reaction = MemoryReaction(
                    device, governor, self.renderer,
                    ResolutionController(self.renderer.cost_spec, settings.resolution))
                self.renderer.reserve(self.scene)  # what frame 0 draws with, in the floor
                self._check_start_budget()
        except BaseException:
            self.release()
            raise

    def _check_start_budget(self) -> None:
        """BudgetError before the first frame when the budget cannot hold what the scene needs
        to start: its fixed memory, the smallest render targets and the streamed textures'
        smallest levels. Nothing the run could do later would bring it under."""
        assert self.renderer is not None and self.reaction is not None
        # The governor's own accounting (split_usage; the output image is fixed), without
        # asking it for a split: that would log an over-budget warning beside this error.
        fixed, targets, _ = split_usage(self.device.ledger.by_category())
        fixed += targets - self.renderer.target_bytes
        w, h = self.renderer.output_size
        min_targets = self.reaction.controller.target_curve(w, h)[0][1]
        tails = self.provider.stats().min_bytes
        need, budget = fixed + min_targets + tails, self.governor.budget_bytes
        if need > budget:
            raise BudgetError(f"budget {format_exact(budget)} cannot be met: this scene needs "
                              f"{format_exact(need)} to start at {w}x{h} (fixed "
                              f"{format_bytes(fixed)} + smallest render targets "
                              f"{format_bytes(min_targets)} + texture tails "
                              f"{format_bytes(tails)}); give a budget of at least that")

    @classmethod
    def embedded(cls, device: Device, scene_factory: SceneFactory,
                 settings: RunSettings | None = None, *, size: tuple[int, int] | None = None,
                 on_frame: Iterable[FrameHook] = (),
                 on_over_budget: OverBudgetHook | None = None, **overrides: Any) -> FrameLoop:
        """A loop for a host that owns the window and the frame timing (glfw, Qt,
        moderngl-window, a canvas): the host calls `step(frame)` and shows the output.
        `on_over_budget` is called when a frame goes over the budget (see OverBudget)."""
        settings = replace(settings or RunSettings(), **overrides)
        return cls(device, make_governor(device, settings), scene_factory, settings,
                   size=size, on_frame=on_frame, on_over_budget=on_over_budget)

    def step(self, frame: int, camera_override: Callable[[Scene], None] | None = None
             ) -> dict[str, Any]:
        """Render one frame into the renderer's output; returns the frame's record."""
        with self.attributed():
            return self._step(frame, camera_override)

    def _step(self, frame: int, camera_override: Callable[[Scene], None] | None
              ) -> dict[str, Any]:
        assert self.scene is not None and self.renderer is not None
        start = time.perf_counter()
        phases = [("split", start)]  # (phase, when it began): the trace's frame slices
        t = frame * self.dt
        self.clock.now = t
        # Fit memory first, before this frame allocates anything: a budget changed since the
        # last frame (a hook, a key, another thread) is answered by this very frame, targets
        # shrink before the scene is drawn into them, and the streamer plans its evictions and
        # loads against the pool just granted for this budget, not last frame's.
        start_bytes = self.device.ledger.total
        self.renderer.reserve(self.scene)  # per-frame buffers sized before the split
        budget = self.governor.budget_bytes
        allocation = decision = None
        if self.reaction is not None:
            allocation, decision = self.reaction.update(self.provider, self._last_ms)
        elif isinstance(self.provider, PooledProvider):
            grant(self.provider, self.governor.split(self.device.ledger.by_category(),
                                                     cache=self.provider.stats().cache))
        phases.append(("scene update", time.perf_counter()))
        resize = getattr(self.scene.navigator, "resize", None)  # optional (render.scene)
        if resize is not None:  # fitted to this frame's size, the first frame's too
            resize(*self.renderer.output_size)
        self.scene.update(t)
        if camera_override is not None:
            camera_override(self.scene)
        phases.append(("feedback", time.perf_counter()))
        if self.feedback is not None:
            levels = self.feedback.frame_step(frame, self.scene, self.renderer.render_size)
            if levels is not None and isinstance(self.provider, FeedbackConsumer):
                self.provider.set_feedback(levels)
        phases.append(("streamer", time.perf_counter()))
        self.provider.begin_frame(self.renderer.frame_view(self.scene, frame, t))
        phases.append(("scene pass", time.perf_counter()))
        self.renderer.render(self.scene)
        phases.append(("present", time.perf_counter()))
        self.renderer.present()
        self.provider.end_frame()
        phases.append(("finish", time.perf_counter()))
        cpu_ms = (phases[-1][1] - start) * 1000.0  # the render thread's own work
        self.device.finish()  # honest frame times: wait for the GPU
        phases.append(("end", time.perf_counter()))
        ms = (phases[-1][1] - start) * 1000.0
        stats = self.provider.stats()
        record = self._record(frame, ms, cpu_ms, budget, stats, allocation, decision)
        ctx = FrameContext(frame, t, self.device, self.governor, self.renderer, self.scene,
                           self.provider, record, allocation, decision)
        for hook in self.on_frame:
            hook(ctx)
        sample = self.device.end_frame(frame)
        record["peak_bytes"] = sample.peak_bytes
        self._judge_peak(frame, record, start_bytes, budget, allocation)
        self._last_ms = ms
        self.frames.append(record)
        if self.tracer is not None:
            self.tracer.frame(record, phases, stats)
        if self.live is not None:
            self.live.frame(self.frames, stats, self.device.ledger.by_category)
        return record

    def _record(self, frame: int, ms: float, cpu_ms: float, budget: int,
                stats: ProviderStats, allocation: BudgetSplit | None,
                decision: Decision | None) -> dict[str, Any]:
        """The frame's record before its hooks: times, the ledger, the provider's figures
        and, when the memory reaction ran, the split it made."""
        render = self.renderer.frame_stats()
        ledger = self.device.ledger
        record: dict[str, Any] = {
            "frame": frame, "ms": ms, "total_bytes": ledger.total,
            "budget_bytes": budget, "by_category": ledger.by_category(),
            "render_scale": self.renderer.render_scale,
            "texture_resident_bytes": stats.resident_bytes,
            "texture_wanted_bytes": stats.wanted_bytes,
            "pending_uploads": stats.pending_uploads,
            # what may still change the picture (engine.view.settle: detail complete)
            "reads_in_flight": stats.reads_in_flight, "missing_tiles": stats.missing_tiles,
            "bytes_uploaded": stats.bytes_uploaded,
            # GL timer query of the newest frame the GPU finished (a few frames old; None
            # until one has), and the CPU time without the wait for the GPU
            "cpu_ms": cpu_ms, "gpu_ms": render["gpu_ms"],
            "draw_calls": render.get("draw_calls"),
            "resident_by_tier": dict(stats.resident_by_tier),
            "cache_slots": stats.cache_slots, "cache_slots_used": stats.cache_slots_used,
        }
        if allocation is not None and decision is not None:
            record["scale_reason"] = decision.reason
            record["over_budget"] = allocation.over_budget
            record["effective_budget_bytes"] = allocation.effective_budget
            record["external_pressure_bytes"] = allocation.external_pressure_bytes
            record["pool_bytes"] = allocation.pool_allowance
            if allocation.over_budget:  # the HUD (a hook) shows it
                record["over_budget_reason"] = "; ".join(allocation.notes)
        if self.governor.share is not None:  # this frame's seat on the share board
            record["share_bytes"] = self.governor.share.share
            record["grant_bytes"] = self.governor.share.grant
        return record

    def _judge_peak(self, frame: int, record: dict[str, Any], start_bytes: int, budget: int,
                    allocation: BudgetSplit | None) -> None:
        """The report's verdict is the peak's: a frame whose minimums fit can still peak
        over. Said once when a run goes over (a warning and `on_over_budget`)."""
        reason = over_budget_reason(record, start_bytes, allocation.notes if allocation else ())
        record["over_budget"] = reason is not None
        if reason is not None:
            record["over_budget_reason"] = reason
            if not self._was_over:
                log.warning("frame %d over the budget: %s", frame, reason)
                if self.on_over_budget is not None:
                    self.on_over_budget(OverBudget(frame, int(record["peak_bytes"]),
                                                   budget, reason))
        self._was_over = reason is not None

    def snapshot(self, path: Path | str) -> Path:
        """Who holds what now: every live GL object, the page cache, the staging ring and
        the free pieces, as PATH (JSON) and PATH with .html (engine.diagnostics.snapshot)."""
        with self.attributed():
            return write_snapshot(path, self.device, provider=self.provider,
                                  governor=self.governor, frames=list(self.frames))

    def _close_observers(self) -> None:
        if self.live is not None:
            self.live.close()
            self.live = None
        tracer, self.tracer = self.tracer, None
        if tracer is not None:
            tracer.close()

    def release(self) -> None:
        """Release everything the loop made; a trace that could not be written is raised
        (OutputWriteError) only once all of it is released, so it is no leak."""
        try:
            self._close_observers()
        finally:
            self._release_gl()

    def _release_gl(self) -> None:
        with self.attributed():
            if self.feedback is not None:
                self.feedback.release()
                self.feedback = None
            if self.renderer is not None:
                self.renderer.release()
                self.renderer = None
            if self.scene is not None:
                self.scene.release()
                self.scene = None
            self.provider.release()
        self.governor.close()  # its seat on a share board goes back to the others
        self.device.flush_releases()  # releases queued by other threads leave the ledger first
        self.device.ledger.release_owner(self.owner)


@dataclass
class RunResult:
    summary: dict[str, Any]
    frames: list[dict[str, Any]]
    image: Any = None  # the last frame's output (H, W, 3) uint8
    screenshot: Any = None
    report: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {"summary": self.summary, "frames": self.frames}
        if self.metadata:
            out["metadata"] = self.metadata
        return out
