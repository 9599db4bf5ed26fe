"""Running a scene: the composition root that wires every layer for one run.

`run_scene(factory, settings)` makes (or takes) a device, a governor that owns the run's
budget, the frame loop, and a host (the contract: engine.hosts.base.Host): headless
(engine.hosts.headless: frames into an offscreen output, read back at the end) or a glfw
window (engine.hosts.window: events, fly camera, budget keys, blit, swap). Both hosts drive
the same loop with the same per-frame order, and both end the same way:
release everything the run made, count what leaked, summarize, write the outputs.
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..app.loop import (
    FrameContext,
    FrameHook,
    FrameLoop,
    OverBudgetHook,
    RunResult,
    SceneFactory,
    make_governor,
)
from ..app.providers import check_provider, provider_name
from ..app.settings import RunSettings
from ..diagnostics.files import atomic_text, atomic_write
from ..diagnostics.hud import Hud
from ..diagnostics.live import process_age_s
from ..errors import UsageError
from ..gl.device import Device
from ..gl.limits import max_output_size
from ..memory.budget import Budget
from ..memory.governor import Governor
from ..memory.nvml import NvmlProbe, NvmlUnavailable
from ..memory.sizes import format_exact
from ..render.imagecompare import save_png
from ..resolution.targets import default_targets_spec
from .base import Host
from .headless import HeadlessHost

log = logging.getLogger(__name__)
#: Bytes per pixel of the output image (RGBA8), beside the scaled render targets.
OUTPUT_BYTES_PER_PIXEL = 4
progress_log = logging.getLogger("engine.progress")  # shown by default (textures.progress)


#: NVML is read every this many frames for the HUD (one read costs milliseconds).
NVML_EVERY = 30


def _hud_hook(device: Device, host: Host) -> tuple[FrameHook, Callable[[], None]]:
    """The HUD drawn over the output, with NVML's view of the GPU (total, free, the other
    processes holding memory) where NVIDIA's driver library is present."""
    hud = Hud(device)
    nvml = NvmlProbe.open(renderer=device.caps.renderer)
    line = {"text": nvml.summary() if isinstance(nvml, NvmlUnavailable) else ""}

    def draw(ctx: FrameContext) -> None:
        if isinstance(nvml, NvmlProbe) and ctx.frame % NVML_EVERY == 0:
            line["text"] = nvml.read().summary()
        ctx.record["vram_note"] = line["text"]
        if host.hud_visible():
            ctx.renderer.output_fbo.use()
            hud.draw(ctx.renderer.output_fbo, ctx.renderer.output_size, ctx.record,
                     view_mode=ctx.renderer.view_mode)

    def close() -> None:
        hud.release()
        if isinstance(nvml, NvmlProbe):
            nvml.close()

    return draw, close


def run_scene(scene_factory: SceneFactory, settings: RunSettings | None = None, *,
              on_frame: Iterable[FrameHook] = (), device: Device | None = None,
              on_over_budget: OverBudgetHook | None = None, **overrides: Any) -> RunResult:
    """Run the scene `scene_factory(device, provider, options)` builds, as `settings` says
    (keyword overrides replace fields: `run_scene(f, frames=10, budget="128MiB")`). The
    provider is "streaming" unless settings say otherwise: textures are streamed within the
    budget. A run that went over the budget says so in its summary (`over_budget`,
    `over_budget_frames`, `over_budget_reason`) and a warning; `on_over_budget` is called
    when a frame goes over. A budget that cannot hold what the scene needs to start is a
    BudgetError before the first frame.

    `device`: use this device (tests share one) instead of making one; it is not shut down,
    but everything the run made is released and counted. A window run makes its own."""
    settings = replace(settings or RunSettings(), **overrides)
    check_provider(settings.provider)
    if not settings.headless:
        if settings.feedback:
            raise ValueError("feedback=True needs a headless run (the window loop lacks it)")
        from .window import WindowHost  # glfw is imported only when a window is asked for
        dev = Device.window(settings.size, settings.title, visible=True)
        host: Host = WindowHost(dev, settings.frames)
        own = True
    else:
        own = device is None
        dev = Device.headless() if own else device
        host = HeadlessHost(settings.frames, settings.settle_frames)
    try:
        check_output_size(dev, host.output_size(settings))
        return _run(dev, host, scene_factory, settings, on_frame, on_over_budget)
    finally:
        if own:
            dev.shutdown()


def check_output_size(device: Device, size: tuple[int, int]) -> None:
    """UsageError, before anything is allocated, when the driver cannot render `size`
    (GL_MAX_TEXTURE_SIZE, GL_MAX_RENDERBUFFER_SIZE, GL_MAX_VIEWPORT_DIMS), or when its render
    targets at full scale and the output image need more than the device's memory (the
    probed VRAM, or the virtual size where the driver reports none): such a size would end
    in GL_OUT_OF_MEMORY halfway through making them."""
    w, h = (int(v) for v in size)
    mw, mh = max_output_size(device)
    if w > mw or h > mh:
        raise UsageError(f"--size {w}x{h}: this driver renders at most {mw}x{mh} "
                         f"({device.caps.renderer}); accepted: WIDTHxHEIGHT, 1-{mw} x 1-{mh}")
    need = default_targets_spec().bytes_at(w, h, 1.0) + w * h * OUTPUT_BYTES_PER_PIXEL
    memory = Budget.on_device(device).reference_total
    if need > memory:
        raise UsageError(f"--size {w}x{h}: its render targets and output need "
                         f"{format_exact(need)}, more than the device's "
                         f"{format_exact(memory)}; accepted: a size whose targets fit")


def progress_hook(total: int, every_s: float = 5.0,
                  clock: Callable[[], float] = time.monotonic,
                  say: Callable[[str], None] | None = None) -> FrameHook:
    """A hook that says what a long run is doing: a line when the first frame is done and
    then one every `every_s` seconds ("frame 120/300, 14 ms/frame", the mean since the last
    line), through the `engine.progress` logger (shown by default, also when stdout is not
    a terminal). `total` <= 0: a window run with no frame limit."""
    emit = say or progress_log.info
    state = {"last": None, "frames": 0, "ms": 0.0}

    def hook(ctx: FrameContext) -> None:
        state["frames"] += 1
        state["ms"] += float(ctx.record.get("ms", 0.0))
        now = clock()
        if state["last"] is not None and now - state["last"] < every_s:
            return
        of = f"/{total}" if total > 0 else ""
        if state["last"] is None:
            w, h = ctx.renderer.output_size
            emit(f"rendering: frame {ctx.frame + 1}{of} at {w}x{h}, first frame "
                 f"{state['ms']:.0f} ms")
        else:
            emit(f"frame {ctx.frame + 1}{of}, {state['ms'] / state['frames']:.0f} ms/frame")
        state.update(last=now, frames=0, ms=0.0)

    return hook


def _run(dev: Device, host: Host, scene_factory: SceneFactory, settings: RunSettings,
         on_frame: Iterable[FrameHook], on_over_budget: OverBudgetHook | None) -> RunResult:
    governor = make_governor(dev, settings)
    mark = dev.tracker.mark()
    dev.ledger.reset_frame_peak()
    hooks = list(on_frame)
    first_frame: list[float | None] = []
    hooks.append(lambda ctx: first_frame.append(process_age_s()) if not first_frame else None)
    close_hud: Callable[[], None] | None = None
    if settings.hud or not settings.headless:
        draw, close_hud = _hud_hook(dev, host)
        hooks.append(draw)
    image = None
    try:
        loop = FrameLoop(dev, governor, scene_factory, settings,
                         size=host.output_size(settings), on_frame=hooks,
                         on_over_budget=on_over_budget)
        host.attach(loop)
        try:
            frame = 0
            while host.running(frame):
                if host.before_frame(loop):
                    loop.step(frame, host.camera)
                    host.after_frame(loop)
                frame += 1
            image = loop.renderer.read_output() if loop.renderer is not None else None
        finally:
            loop.release()
    finally:
        if close_hud is not None:
            close_hud()
    leaked = finish_run(dev, mark)
    frames = list(loop.frames)
    result = RunResult(summarize(frames, dev, governor, leaked), frames, image)
    result.summary["provider"] = provider_name(settings.provider)
    if first_frame and first_frame[0] is not None:
        result.summary["first_frame_s"] = round(first_frame[0], 3)
    if result.summary["over_budget"]:
        log.warning("the run went over its budget of %s in %d of %d frames: %s",
                    format_exact(result.summary["budget_bytes"]),
                    result.summary["over_budget_frames"], len(frames),
                    result.summary["over_budget_reason"])
    if settings.metadata is not None:
        result.metadata = {**settings.metadata}
        result.metadata.setdefault("renderer", dev.caps.renderer)
        result.metadata.setdefault("gl_version", dev.caps.gl_version)
    return save_outputs(result, settings.screenshot, settings.report)


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def summarize(frames: list[dict[str, Any]], device: Device, governor: Governor,
              leaked: int) -> dict[str, Any]:
    ms = [f["ms"] for f in frames]
    over = [f for f in frames if f.get("over_budget_reason")]
    return {
        "frames": len(frames),
        "budget_bytes": governor.budget_bytes,
        "peak_bytes": max((f["total_bytes"] for f in frames), default=0),
        "peak_by_category": device.ledger.peak_by_category(),
        "frame_ms_p50": _percentile(ms, 50),
        "frame_ms_p99": _percentile(ms, 99),
        "leaked_objects": leaked,
        "renderer": device.caps.renderer,
        # loud, not a log line: a run over its budget says so here, with the first reason
        "over_budget": bool(over),
        "over_budget_frames": len(over),
        "over_budget_reason": over[0]["over_budget_reason"] if over else None,
        # what the texture bytes were spent on at the end, and the least room left under
        # the budget the engine worked to (the effective one) in any frame
        "resident_by_tier": dict(frames[-1].get("resident_by_tier") or {}) if frames else {},
        "min_free_bytes": min((int(f.get("effective_budget_bytes", f["budget_bytes"]))
                               - int(f["total_bytes"]) for f in frames), default=0),
        "cache_slots_used_peak": max((int(f.get("cache_slots_used", 0)) for f in frames),
                                     default=0),
    }


def finish_run(device: Device, mark: int) -> int:
    """Count (and log) GL objects the run made that are still alive after its release."""
    device.flush_releases()
    leaked = device.tracker.made_since(mark)
    if leaked:
        log.error("%d GL object(s) leaked by the run:\n%s", len(leaked),
                  "\n".join("  " + r.describe() for r in leaked))
    return len(leaked)


def write_report(result: RunResult, path: Path) -> Path:
    text = json.dumps(result.to_json(), indent=1)
    return atomic_text(Path(path), text)


def save_outputs(result: RunResult, screenshot: Path | str | None,
                 report: Path | str | None) -> RunResult:
    if screenshot is not None and result.image is not None:
        result.screenshot = atomic_write(Path(screenshot), lambda tmp: save_png(result.image, tmp))
    if report is not None:
        result.report = write_report(result, Path(report))
    return result
