"""The frame loop shared by demos, tests and the window, plus the JSON run report.

Per frame: memory reaction (the governor splits the budget in force now, the resolution
controller picks a render scale that fits, targets are reallocated) -> camera update ->
provider.begin_frame(view) (the streamer fits the pool just granted) -> scene pass -> present ->
provider.end_frame() -> on_frame hooks -> device.end_frame (ledger sample). A budget changed
between frames is thus fitted by the next frame before it allocates anything. Time advances by
a fixed step, not the wall clock, so frame N always shows the same picture.

Every GL object a run makes is released at its end, and the leak count goes in the report:
a demo that leaks fails its own report, not only a test.
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..gl.device import Device
from ..memory.budget import Budget
from ..memory.governor import BudgetSplit, Governor, GovernorInputs
from ..resolution.policy import Decision, ResolutionController
from .imagecompare import save_png
from .renderer import Renderer
from .scene import Scene
from .textures import TextureProvider, make_provider

log = logging.getLogger(__name__)

SceneFactory = Callable[[Device, TextureProvider, Mapping[str, Any]], Scene]


@dataclass
class FrameContext:
    """What an on_frame hook sees; hooks may add keys to `record` (it goes in the report)."""

    frame: int
    time: float
    device: Device
    renderer: Renderer
    scene: Scene
    provider: TextureProvider
    record: dict[str, Any]
    allocation: BudgetSplit | None = None
    decision: Decision | None = None


FrameHook = Callable[[FrameContext], None]


@dataclass
class RunResult:
    summary: dict[str, Any]
    frames: list[dict[str, Any]]
    image: np.ndarray | None = None  # the last frame's output (H, W, 3) uint8
    screenshot: Path | None = None
    report: Path | None = None

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary, "frames": self.frames}


class MemoryReaction:
    """The executor of the one-budget policy for a run: each frame the governor splits the
    budget, the resolution controller picks the largest render scale whose exact target bytes
    fit the targets' share, and the renderer reallocates when the scale changes."""

    def __init__(self, device: Device, renderer: Renderer) -> None:
        self.device = device
        self.renderer = renderer
        self.governor = Governor()
        self.controller = ResolutionController(renderer.cost_spec)
        self.last: BudgetSplit | None = None

    def pool_bytes(self) -> int:
        """The streaming pool of the last decision; before the first one, what the budget
        leaves after everything else in the ledger."""
        if self.last is not None:
            return self.last.pool_allowance
        led = self.device.ledger
        return max(0, self.device.budget.bytes - (led.total - led.category_total(
            "texture.streamed")))

    def update(self, provider_stats: Mapping[str, Any],
               frame_ms: float | None) -> tuple[BudgetSplit, Decision]:
        ledger = self.device.ledger
        targets = self.renderer.target_bytes
        streamed = ledger.category_total("texture.streamed")
        curve = self.controller.target_curve(*self.renderer.output_size)
        # Where the driver reports free VRAM (NVX), memory other programs take lowers the
        # effective budget, as a DXGI budget-change notification would.
        vram = self.device.vram() if self.device.probe.source == "NVX" else None
        alloc = self.governor.decide(GovernorInputs(
            budget_bytes=self.device.budget.bytes,
            fixed_bytes=max(0, ledger.total - targets - streamed),
            target_bytes=targets, streamed_bytes=streamed, target_curve=curve,
            stream_wanted=int(provider_stats.get("wanted_bytes", 0)) if streamed else 0,
            stream_min=int(provider_stats.get("min_bytes", 0)),
            stream_wanted_scale=self.renderer.render_scale,
            scale_cap=self.controller.scale_cap,
            vram_available=vram.available_bytes if vram else None,
            vram_total=vram.total_bytes if vram else None))
        self.last = alloc
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
        return alloc, decision


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def summarize(frames: list[dict[str, Any]], device: Device, leaked: int) -> dict[str, Any]:
    ms = [f["ms"] for f in frames]
    return {
        "frames": len(frames),
        "budget_bytes": device.budget.bytes,
        "peak_bytes": max((f["total_bytes"] for f in frames), default=0),
        "peak_by_category": device.ledger.peak_by_category(),
        "frame_ms_p50": _percentile(ms, 50),
        "frame_ms_p99": _percentile(ms, 99),
        "leaked_objects": leaked,
        "renderer": device.caps.renderer,
    }


def write_report(result: RunResult, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.to_json(), indent=1), encoding="utf-8")
    return path


class FrameLoop:
    """One run's objects (provider, scene, renderer, memory reaction) and its frame step.
    The headless runner and the window both drive it."""

    def __init__(self, device: Device, scene_factory: SceneFactory, *, size: tuple[int, int],
                 provider: str = "static", scale: float = 1.0, upscale: str = "bilinear",
                 view_mode: str = "lit", react: bool = True,
                 on_frame: Iterable[FrameHook] = (), options: Mapping[str, Any] | None = None,
                 dt: float = 1.0 / 60.0, feedback: bool = False) -> None:
        self.device = device
        self.dt = dt
        self.on_frame: list[FrameHook] = list(on_frame)
        self.frames: list[dict[str, Any]] = []
        self.provider = make_provider(provider, device)
        self.scene: Scene | None = None
        self.renderer: Renderer | None = None
        self.feedback = None  # the GPU feedback pass (engine.streaming.feedback), if enabled
        try:
            self.scene = scene_factory(device, self.provider, dict(options or {}))
            self.renderer = Renderer(device, self.provider, size, scale=scale, upscale=upscale)
            if feedback:  # imported here: the render package does not depend on streaming
                from ..streaming.feedback import FeedbackPass
                self.feedback = FeedbackPass(device, self.provider)
        except BaseException:
            self.release()
            raise
        self.renderer.view_mode = view_mode  # type: ignore[assignment]
        self.reaction = MemoryReaction(device, self.renderer) if react else None
        if self.reaction is not None and hasattr(self.provider, "pool"):
            # One budget: the streamer fills exactly the pool the governor grants it.
            self.provider.pool = self.reaction.pool_bytes
        self._last_ms: float | None = None

    def step(self, frame: int, camera_override: Callable[[Scene], None] | None = None
             ) -> dict[str, Any]:
        """Render one frame into the renderer's output; returns the frame's record."""
        assert self.scene is not None and self.renderer is not None
        start = time.perf_counter()
        t = frame * self.dt
        # Fit memory first, before this frame allocates anything: a budget changed since the
        # last frame (a hook, a key, another thread) is answered by this very frame, targets
        # shrink before the scene is drawn into them, and the streamer plans its evictions and
        # loads against the pool just granted for this budget, not last frame's.
        budget = self.device.budget.bytes
        allocation = decision = None
        if self.reaction is not None:
            allocation, decision = self.reaction.update(self.provider.stats(), self._last_ms)
        self.scene.update(t)
        if camera_override is not None:
            camera_override(self.scene)
        if self.feedback is not None:
            self.feedback.frame_step(frame, self.scene, self.renderer.render_size)
        self.provider.begin_frame(self.renderer.frame_view(self.scene, frame, t))
        self.renderer.render(self.scene)
        self.renderer.present()
        self.provider.end_frame()
        self.device.ctx.finish()  # honest frame times: wait for the GPU
        ms = (time.perf_counter() - start) * 1000.0
        stats = self.provider.stats()
        ledger = self.device.ledger
        record: dict[str, Any] = {
            "frame": frame, "ms": ms, "total_bytes": ledger.total,
            "budget_bytes": budget, "by_category": ledger.by_category(),
            "render_scale": self.renderer.render_scale,
            "texture_resident_bytes": int(stats.get("resident_bytes", 0)),
            "texture_wanted_bytes": int(stats.get("wanted_bytes", 0)),
            "pending_uploads": int(stats.get("pending_uploads", 0)),
        }
        ctx = FrameContext(frame, t, self.device, self.renderer, self.scene, self.provider,
                           record, allocation, decision)
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


def _hud_hook(device: Device) -> tuple[FrameHook, Callable[[], None]] | None:
    """A hook drawing the diagnostics HUD over the output, when that module exists."""
    try:
        from ..diagnostics.hud import Hud
    except ImportError:
        log.info("no HUD module (engine.diagnostics.hud); running without HUD")
        return None
    hud = Hud(device)

    def draw(ctx: FrameContext) -> None:
        ctx.renderer.output_fbo.use()
        hud.draw(ctx.renderer.output_fbo, ctx.renderer.output_size, ctx.record)

    return draw, hud.release


def run_scene(scene_factory: SceneFactory, *, frames: int = 120,
              size: tuple[int, int] = (1280, 720), budget: str | int | Budget = "80%",
              headless: bool = True, screenshot: Path | str | None = None,
              report: Path | str | None = None, provider: str = "static", scale: float = 1.0,
              upscale: str = "bilinear", view_mode: str = "lit", hud: bool = False,
              react: bool = True, on_frame: Iterable[FrameHook] = (),
              options: Mapping[str, Any] | None = None, device: Device | None = None,
              dt: float = 1.0 / 60.0, feedback: bool = False) -> RunResult:
    """Run `frames` frames of the scene `scene_factory(device, provider, options)` builds.

    headless=False opens a window (engine.render.window) and runs until closed or `frames`
    frames (frames <= 0: until closed). `device`: use this device (tests share one) instead of
    making one; it is not shut down, but everything the run made is released and counted.
    feedback=True runs the GPU feedback pass (engine.streaming.feedback) every few frames and
    hands its results to a provider that takes them (the streamer); headless runs only.
    """
    if not headless:
        if feedback:
            raise ValueError("feedback=True needs a headless run (the window loop lacks it)")
        from .window import run_window
        return run_window(scene_factory, frames=frames, size=size, budget=budget,
                          screenshot=screenshot, report=report, provider=provider,
                          scale=scale, upscale=upscale, view_mode=view_mode, hud=hud,
                          react=react,
                          on_frame=on_frame, options=options, dt=dt)
    own = device is None
    dev = Device.headless(budget) if own else device
    old_budget = dev.budget.spec
    if not own and budget is not None and not isinstance(budget, Budget):
        dev.budget.set(budget)
    try:
        mark = dev.tracker.mark()
        dev.ledger.reset_frame_peak()
        hooks = list(on_frame)
        hud_parts = _hud_hook(dev) if hud else None
        if hud_parts:
            hooks.append(hud_parts[0])
        loop = FrameLoop(dev, scene_factory, size=size, provider=provider, scale=scale,
                         upscale=upscale, view_mode=view_mode, react=react, on_frame=hooks,
                         options=options, dt=dt, feedback=feedback)
        try:
            for frame in range(frames):
                loop.step(frame)
            assert loop.renderer is not None
            image = loop.renderer.read_output()
        finally:
            loop.release()
            if hud_parts:
                hud_parts[1]()
        return conclude_run(dev, loop, mark, image, screenshot, report)
    finally:
        if own:
            dev.shutdown()
        else:
            dev.budget.set(old_budget)  # a shared device leaves the run as it came


def conclude_run(device: Device, loop: FrameLoop, mark: int, image: np.ndarray | None,
                 screenshot: Path | str | None, report: Path | str | None) -> RunResult:
    """After the loop released what it made: count leaks, summarize, write the outputs."""
    leaked = finish_run(device, mark)
    result = RunResult(summarize(loop.frames, device, leaked), loop.frames, image)
    return save_outputs(result, screenshot, report)


def finish_run(device: Device, mark: int) -> int:
    """Count (and log) GL objects the run made that are still alive after its release."""
    device.flush_releases()
    leaked = device.tracker.made_since(mark)
    if leaked:
        log.error("%d GL object(s) leaked by the run:\n%s", len(leaked),
                  "\n".join("  " + r.describe() for r in leaked))
    return len(leaked)


def save_outputs(result: RunResult, screenshot: Path | str | None,
                 report: Path | str | None) -> RunResult:
    if screenshot is not None and result.image is not None:
        result.screenshot = Path(screenshot)
        save_png(result.image, result.screenshot)
    if report is not None:
        result.report = write_report(result, Path(report))
    return result
