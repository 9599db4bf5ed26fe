"""The frame loop: one run's objects and its per-frame order, for every host.

Per frame: memory reaction (the governor splits the budget in force now, the resolution
controller picks a render scale that fits the targets' allowance, targets are reallocated, the
streamer is granted its pool) -> camera update -> GPU feedback (optional) -> provider.begin_frame
(the streamer fits the pool just granted) -> scene pass -> present -> provider.end_frame ->
on_frame hooks -> device.end_frame (ledger sample). A budget changed between frames is thus
fitted by the next frame before it allocates anything. Time advances by a fixed step, not the
wall clock, so frame N always shows the same picture.

The headless runner and the window drive the same `FrameLoop`; they differ only in where the
output goes and what ends the run (engine.app.run).
"""
from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..gl.device import Device
from ..memory.budget import Budget
from ..memory.governor import BudgetSplit, Governor
from ..render.feedback import FeedbackPass
from ..render.renderer import Renderer
from ..render.scene import Scene
from ..resolution.policy import Decision, ResolutionController
from ..streaming.heap import map_large_buffers
from ..streaming.contract import FeedbackConsumer, PooledProvider, TextureProvider
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


@dataclass
class FrameClock:
    """Seconds of simulated time: the loop sets `now` each frame. Injected into the streamer
    in deterministic runs, so its fades and caps depend on the frame number only."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


def make_governor(device: Device, settings: RunSettings) -> Governor:
    """The run's one budget owner: a percentage budget is taken of the probed VRAM, and where
    the driver reports free VRAM (NVX) other programs' use lowers the effective budget."""
    reading = device.vram()
    spec = "80%" if settings.budget is None else settings.budget
    budget = spec if isinstance(spec, Budget) else Budget(spec, vram_total=reading.total_bytes)
    pressure = device.vram if device.probe.source == "NVX" else None
    return Governor(settings.governor, budget=budget, pressure=pressure)


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
        alloc = self.governor.split(
            ledger.by_category(),
            target_curve=self.controller.target_curve(*self.renderer.output_size),
            stream_wanted=stats.wanted_bytes, stream_min=stats.min_bytes,
            stream_wanted_scale=self.renderer.render_scale, scale_cap=self.controller.scale_cap,
            resizable_target_bytes=targets, cache=stats.cache)
        # The allowance may count memory the streamer has just been told to give back but
        # still holds (the pool shrank this frame; it evicts after this). Targets must never
        # grow into it: even released first, a new set larger than the old one plus what is
        # free now would take the ledger over the budget.
        allowance = min(alloc.targets_allowance, targets + alloc.free_bytes)
        decision = self.controller.update(self.renderer.output_size, allowance,
                                          alloc.free_bytes, frame_ms)
        if decision.resize and abs(decision.scale - self.renderer.render_scale) > 1e-9:
            event = self.renderer.set_scale(decision.scale, decision.release_first)
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
                 on_frame: Iterable[FrameHook] = ()) -> None:
        self.device = device
        self.governor = governor
        self.settings = settings
        self.dt = settings.dt
        self.clock = FrameClock()
        self.on_frame: list[FrameHook] = list(on_frame)
        # The per-frame records; a bounded window when settings.keep_frames says so.
        self.frames: list[dict[str, Any]] | deque[dict[str, Any]] = (
            deque(maxlen=settings.keep_frames) if settings.keep_frames else [])
        map_large_buffers()  # level buffers mmapped: the heap must not grow with streaming
        self.provider = make_provider(settings.provider, device, settings, self.clock)
        self.scene: Scene | None = None
        self.renderer: Renderer | None = None
        self.feedback: FeedbackPass | None = None
        self.reaction: MemoryReaction | None = None
        try:
            self.scene = scene_factory(device, self.provider, dict(settings.options))
            self.renderer = Renderer(device, self.provider, size or settings.size,
                                     scale=settings.scale, upscale=settings.upscale)
            if settings.feedback:
                self.feedback = FeedbackPass(device, self.provider)
            self.renderer.view_mode = settings.view_mode  # type: ignore[assignment]
            if settings.react:
                self.reaction = MemoryReaction(
                    device, governor, self.renderer,
                    ResolutionController(self.renderer.cost_spec, settings.resolution))
        except BaseException:
            self.release()
            raise
        self._last_ms: float | None = None

    @classmethod
    def embedded(cls, device: Device, scene_factory: SceneFactory,
                 settings: RunSettings | None = None, *, size: tuple[int, int] | None = None,
                 on_frame: Iterable[FrameHook] = (), **overrides: Any) -> FrameLoop:
        """A loop for a host that owns the window and the frame timing (glfw, Qt,
        moderngl-window, a canvas): the host calls `step(frame)` and shows the output."""
        settings = replace(settings or RunSettings(), **overrides)
        return cls(device, make_governor(device, settings), scene_factory, settings,
                   size=size, on_frame=on_frame)

    def step(self, frame: int, camera_override: Callable[[Scene], None] | None = None
             ) -> dict[str, Any]:
        """Render one frame into the renderer's output; returns the frame's record."""
        assert self.scene is not None and self.renderer is not None
        start = time.perf_counter()
        t = frame * self.dt
        self.clock.now = t
        # Fit memory first, before this frame allocates anything: a budget changed since the
        # last frame (a hook, a key, another thread) is answered by this very frame, targets
        # shrink before the scene is drawn into them, and the streamer plans its evictions and
        # loads against the pool just granted for this budget, not last frame's.
        self.renderer.reserve(self.scene)  # per-frame buffers sized before the split
        budget = self.governor.budget_bytes
        allocation = decision = None
        if self.reaction is not None:
            allocation, decision = self.reaction.update(self.provider, self._last_ms)
        elif isinstance(self.provider, PooledProvider):
            grant(self.provider, self.governor.split(self.device.ledger.by_category(),
                                                     cache=self.provider.stats().cache))
        self.scene.update(t)
        if camera_override is not None:
            camera_override(self.scene)
        if self.feedback is not None:
            levels = self.feedback.frame_step(frame, self.scene, self.renderer.render_size)
            if levels is not None and isinstance(self.provider, FeedbackConsumer):
                self.provider.set_feedback(levels)
        self.provider.begin_frame(self.renderer.frame_view(self.scene, frame, t))
        self.renderer.render(self.scene)
        self.renderer.present()
        self.provider.end_frame()
        cpu_ms = (time.perf_counter() - start) * 1000.0  # the render thread's own work
        self.device.finish()  # honest frame times: wait for the GPU
        ms = (time.perf_counter() - start) * 1000.0
        render = self.renderer.frame_stats()
        stats = self.provider.stats()
        ledger = self.device.ledger
        record: dict[str, Any] = {
            "frame": frame, "ms": ms, "total_bytes": ledger.total,
            "budget_bytes": budget, "by_category": ledger.by_category(),
            "render_scale": self.renderer.render_scale,
            "texture_resident_bytes": stats.resident_bytes,
            "texture_wanted_bytes": stats.wanted_bytes,
            "pending_uploads": stats.pending_uploads,
            # GL timer query of the newest frame the GPU finished (a few frames old; None
            # until one has), and the CPU time without the wait for the GPU
            "cpu_ms": cpu_ms, "gpu_ms": render["gpu_ms"],
            "draw_calls": render.get("draw_calls"),
        }
        ctx = FrameContext(frame, t, self.device, self.governor, self.renderer, self.scene,
                           self.provider, record, allocation, decision)
        if allocation is not None and decision is not None:
            record["scale_reason"] = decision.reason
            record["over_budget"] = allocation.over_budget
            record["effective_budget_bytes"] = allocation.effective_budget
            record["external_pressure_bytes"] = allocation.external_pressure_bytes
            record["pool_bytes"] = allocation.pool_allowance
        for hook in self.on_frame:
            hook(ctx)
        sample = self.device.end_frame(frame)
        record["peak_bytes"] = sample.peak_bytes
        self._last_ms = ms
        self.frames.append(record)
        return record

    def release(self) -> None:
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
