"""The `pressure` demo with the streaming provider, held frame by frame against its budget.

When a budget change takes effect, precisely: hooks run at the end of frame f, and the demo's
pressure hook sets there the budget of frame f+1; frame f+1 begins by fitting memory (governor
split, render scale, then the streamer's evictions and loads against the pool just granted)
before it allocates anything. So a record's `budget_bytes` is the budget the whole frame ran
under, and the frame that first sees a lowered budget is the one that answers it.

What "peak bytes never exceed the budget on any frame, a budget drop is answered within one
frame" can mean on real hardware, and what these tests hold the engine to:
  * every frame ends within its budget, the first frame under a lowered budget included;
  * every frame whose budget did not fall peaks within it, transients included (old + new
    targets during a resize, old + new storage during a mip swap);
  * a frame whose budget fell below what was held cannot peak within it: those bytes were
    allocated before the drop was known. It never holds more than it did when the drop came
    (or the new budget, if that is higher): an eviction with no room for even the smallest
    copy (a texture's tail) reads the kept levels back and frees the old storage first.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from engine.gl.device import Device
from engine.memory.governor import BudgetSplit
from engine.app.loop import FrameContext, FrameHook, RunResult
from engine.hosts.run import run_scene

W, H = 160, 120
OPTIONS: dict[str, Any] = {"count": 16, "texture_size": 256, "format": "bc1"}
PERIOD = 120  # one scripted pressure cycle
STEADY = 600  # frames that must make no resize once the budget holds still
SETTLE = 40  # frames allowed for the steady budget's own reaction before they are counted


@pytest.fixture(scope="module")
def gallery_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pressure-gallery")


def resizes(frames: Sequence[dict[str, Any]]) -> list[int]:
    """Frames whose render scale differs from the frame before (each is a reallocation)."""
    return [b["frame"] for a, b in pairwise(frames) if b["render_scale"] != a["render_scale"]]


def check_budget_frames(frames: Sequence[dict[str, Any]]) -> list[int]:
    """Assert the per-frame budget properties of the module docstring; returns the frames that
    answered a drop below what was held (so callers can check that drops really happened)."""
    answered = []
    for prev, f in pairwise(frames):
        budget, peak, total = f["budget_bytes"], f["peak_bytes"], f["total_bytes"]
        assert total <= budget, f"frame {f['frame']} ends over its budget: {f}"
        if budget >= prev["budget_bytes"]:
            assert peak <= budget, f"frame {f['frame']} peaks over its budget: {f}"
        else:
            assert peak <= max(budget, prev["total_bytes"]), \
                f"frame {f['frame']} answered a drop with more than it held: {prev} -> {f}"
            if prev["total_bytes"] > budget:
                answered.append(f["frame"])
    return answered


def over_only_answering_drops(frames: Sequence[dict[str, Any]]) -> None:
    """The minimums always fitted: a record says `over_budget` (its peak's verdict) only
    where its frame answered a budget that fell below what it held, whose transient copies
    `check_budget_frames` bounds; never on frame 0."""
    assert not frames[0].get("over_budget"), frames[0]
    for prev, f in pairwise(frames):
        if f.get("over_budget"):
            assert f["budget_bytes"] < prev["total_bytes"], f


class Calibration:
    """Measures, at the end of frame 0, what a budget must at least hold (fixed bytes, mip
    tails, targets at a given scale) so that budgets can be stated relative to the machine:
    the streamer's staging ring alone is 12 MiB on llvmpipe and absent without
    ARB_buffer_storage, so a budget in plain MiB would mean different pressure elsewhere."""

    def __init__(self) -> None:
        self.fixed = 0
        self.tails = 0
        self.wanted = 0
        self.targets: Callable[[float], int] = lambda scale: 0

    def hook(self, ctx: FrameContext) -> None:
        if ctx.frame != 0:
            return
        assert ctx.allocation is not None
        stats = ctx.provider.stats()
        spec, size = ctx.renderer.cost_spec, ctx.renderer.output_size
        # At the end of frame 0, when the page cache has been made at its first grant.
        ledger = ctx.device.ledger
        self.fixed = ledger.total - ctx.renderer.target_bytes \
            - ledger.category_total("texture.streamed")
        self.tails = int(stats.min_bytes)
        self.wanted = int(stats.wanted_bytes)
        self.targets = lambda scale: spec.bytes_at(*size, scale)


def record_plan(ctx: FrameContext) -> None:
    """The governor's planned scale, to tell a controller still catching up from a settled one."""
    assert ctx.allocation is not None
    ctx.record["planned_scale"] = ctx.allocation.planned_scale


def run_pressure(device: Device, cache: Path, calibration: Calibration,
                 upscale: str = "bilinear") -> RunResult:
    """One pressure cycle, then the budget held at the cycle's low for SETTLE + STEADY frames."""
    from engine.demos import DEMOS
    from engine.demos.pressure import LOW

    options = {**OPTIONS, "cache_dir": cache, "period": PERIOD, "pressure_from": "start"}
    pressure = DEMOS["pressure"].hooks(options)[0]
    start: dict[str, int] = {}

    def script(ctx: FrameContext) -> None:
        if ctx.frame == 0:
            # At the low, the room left after the fixed bytes holds the tails and the
            # targets at 5/8 scale: memory binds the render scale, yet everything fits.
            start["bytes"] = int((calibration.fixed + calibration.tails
                                  + calibration.targets(0.625)) / LOW)
            ctx.governor.set_budget(start["bytes"])  # the demo's hook takes it as its start
        if ctx.frame < PERIOD - 1:
            pressure(ctx)
        else:
            ctx.governor.set_budget(int(start["bytes"] * LOW))

    hooks: list[FrameHook] = [calibration.hook, script, record_plan]
    return run_scene(DEMOS["pressure"].factory, frames=PERIOD + SETTLE + STEADY, size=(W, H),
                     budget="1GiB", device=device, provider="streaming", options=options,
                     on_frame=hooks, upscale=upscale)


@pytest.mark.slow
def test_pressure_demo_fits_every_frame_and_holds_still(device: Device,
                                                        gallery_cache: Path) -> None:
    """The demo's script lands on the frames it names, every frame keeps the budget
    properties, the cut to the low is answered by the frame that first runs under it, and a
    steady budget that binds the scale makes no resize in 600 frames of fly-through."""
    from engine.demos.pressure import budget_fraction

    cal = Calibration()
    result = run_pressure(device, gallery_cache, cal)
    frames = result.frames
    assert result.summary["leaked_objects"] == 0
    assert result.image is not None and result.image.std() > 5  # a picture, not a clear

    # The script lands where the demo says: frame f runs under fraction(f) of the start.
    start = frames[1]["budget_bytes"]
    for f in frames[1:PERIOD]:
        assert f["budget_bytes"] == int(start * budget_fraction(f["frame"], PERIOD)), f
    for f in frames[:PERIOD - 1]:  # the cycle's last hook call is the steady script's
        assert f["budget_fraction"] == budget_fraction(f["frame"], PERIOD)

    answered = check_budget_frames(frames)
    assert answered, "no budget drop below what was held: the run proved nothing"
    over_only_answering_drops(frames)

    # The drop to the low is answered by the very frame that first runs under it...
    drop = PERIOD // 4
    assert frames[drop]["budget_bytes"] < frames[drop - 1]["total_bytes"]
    assert frames[drop]["render_scale"] < frames[drop - 1]["render_scale"]
    assert frames[drop]["scale_reason"] == "memory"
    # ...and full resolution comes back once the budget does, before the random quarter.
    assert frames[3 * PERIOD // 4 - 1]["render_scale"] == 1.0

    # Steady budget: the scale has settled on the plan, memory binds it, the camera keeps
    # changing what the textures want, and not one frame reallocates the targets.
    steady = frames[PERIOD + SETTLE:]
    assert len(steady) == STEADY
    assert len({f["budget_bytes"] for f in frames[PERIOD:]}) == 1
    assert steady[0]["render_scale"] == steady[0]["planned_scale"] < 1.0
    assert len({f["texture_wanted_bytes"] for f in steady}) > 3
    assert resizes(steady) == []
    assert set(resizes(frames[PERIOD:])) <= {PERIOD}  # only the answer to the step down


@pytest.mark.slow
def test_pressure_with_the_fsr_upscaler_keeps_every_frame_in_budget(device: Device,
                                                                   gallery_cache: Path) -> None:
    """FSR adds two targets of its own (its tone-mapped input at render size, the EASU
    intermediate at output size): they are priced by the controller like the scene targets,
    so the same budget properties hold."""
    cal = Calibration()
    result = run_pressure(device, gallery_cache, cal, upscale="fsr")
    assert result.summary["leaked_objects"] == 0
    assert check_budget_frames(result.frames)
    assert min(f["render_scale"] for f in result.frames) < 1.0


def test_the_split_moves_with_the_budget_not_with_the_camera() -> None:
    """Pure governor: what the textures want follows the camera every frame; the planned scale
    (and so the targets and the pool) changes only when the budget side does. This is what
    keeps a steady budget at zero resizes during a fly-through."""
    from engine.memory.governor import Governor, GovernorInputs
    from engine.resolution.policy import ResolutionController
    from engine.resolution.targets import default_targets_spec

    mib = 1 << 20
    curve = ResolutionController(default_targets_spec()).target_curve(1920, 1080)

    def frame(g: Governor, budget: int, wanted: int) -> BudgetSplit:
        return g.decide(GovernorInputs(budget_bytes=budget, fixed_bytes=64 * mib,
                                       target_bytes=0, streamed_bytes=0, target_curve=curve,
                                       stream_wanted=wanted, stream_min=8 * mib))

    g = Governor()
    first = frame(g, 100 * mib, 40 * mib)
    assert first.planned_scale < 1.0
    wants = (10 * mib, 300 * mib, 41 * mib, 9 * mib)  # the camera moves
    assert all(frame(g, 100 * mib, wanted) == first for wanted in wants)
    replanned = {frame(Governor(), 100 * mib, wanted).planned_scale for wanted in wants}
    assert replanned - {first.planned_scale}  # re-planning each frame would have resized
    moved = frame(g, 99 * mib, 300 * mib)  # the budget moves: re-planned with today's want
    assert moved == frame(Governor(), 99 * mib, 300 * mib)
    assert moved.planned_scale < first.planned_scale


def test_targets_never_grow_into_memory_the_streamer_still_holds(device: Device) -> None:
    """The executor alone (MemoryReaction), with the streamer played by one ledgered buffer
    that keeps the streamer's contract (after each reaction it shrinks to its pool, and fills
    its want when the pool allows), so that the order of events is exact. A rise the
    controller has waited for comes due in the very frame the budget falls to just above what
    is held: the governor's new plan still lies above the current scale, but its pool is below
    what the streamer holds, and the streamer gives that back only after the targets are
    reallocated. The targets must wait for it instead of taking the ledger over the budget."""
    from engine.app.loop import MemoryReaction
    from engine.memory.budget import Budget
    from engine.memory.governor import Governor
    from engine.render.renderer import Renderer
    from engine.resolution.policy import ResolutionController
    from engine.streaming.contract import ProviderStats
    from engine.streaming.static import StaticTextureProvider

    want = 64 << 10

    class Wants(StaticTextureProvider):
        """The static provider, reporting the streamer's want (the buffer plays its bytes)."""

        def stats(self) -> ProviderStats:
            return ProviderStats(wanted_bytes=want, min_bytes=8 << 10)

    provider = Wants(device)
    renderer = Renderer(device, provider, (W, H))
    held = [device.buffer(reserve=want, category="texture.streamed", label="streamer")]
    budget_ = Budget("1GiB")
    reaction = MemoryReaction(device, Governor(budget=budget_), renderer,
                              ResolutionController(renderer.cost_spec))
    ledger = device.ledger
    fixed = ledger.total - renderer.targets.nbytes - want
    frames: list[tuple[int, int, int]] = []  # (peak, budget, bytes held when it began)

    def hold(nbytes: int) -> None:
        device.release(held.pop())
        held.append(device.buffer(reserve=nbytes, category="texture.streamed", label="streamer"))

    def frame(budget: int, streamer_follows: bool = True) -> BudgetSplit:
        carry = ledger.total
        budget_.set(budget)
        ledger.reset_frame_peak()
        allocation, _ = reaction.update(provider, None)
        if streamer_follows:
            hold(min(want, allocation.pool_allowance))
        frames.append((device.end_frame(len(frames)).peak_bytes, budget, carry))
        return allocation

    def targets(scale: float) -> int:
        return renderer.targets.spec.bytes_at(W, H, scale)

    try:
        plenty = fixed + targets(1.0) + 10 * want
        for _ in range(3):
            frame(plenty)
        for _ in range(10):  # a cut: the scale drops, the streamer shrinks to its pool
            frame(fixed + targets(0.5) + want)
        low = renderer.render_scale
        for _ in range(7):  # plenty, one frame less than the rise hold: the streamer refills
            frame(plenty)
        assert renderer.render_scale == low < 1.0
        assert ledger.category_total("texture.streamed") == want
        budget = ledger.total + 1024  # just above what is held
        plan = frame(budget, streamer_follows=False)
        assert plan.planned_scale > low  # a rise is due...
        assert want > plan.pool_allowance  # ...into memory the streamer holds
        assert renderer.render_scale == low  # so it waits
        hold(plan.pool_allowance)  # the streamer's own turn in that frame
        for _ in range(10):
            plan = frame(budget)
        assert renderer.render_scale == plan.planned_scale > low  # then it rises
        for peak, limit, carry in frames:  # a drop frame: nothing on top of what it held
            assert peak <= max(limit, carry), frames
    finally:
        device.release(held.pop())
        renderer.release()
        provider.release()


def test_a_large_output_starts_within_a_budget_full_resolution_would_exceed(
        device: Device) -> None:
    """Render targets at full resolution of a 1920x1080 output (about 33 MB) do not fit a
    24 MiB budget: the first frame starts at the scale that fits instead of making them
    first and shrinking after, so not even its peak goes over."""
    from engine.app.loop import FrameLoop
    from engine.render.scene import Scene

    budget = 24 << 20
    loop = FrameLoop.embedded(device, lambda dev, provider, options: Scene(dev),
                              size=(1920, 1080), budget=budget, provider="static")
    try:
        record = loop.step(0)
        assert loop.renderer is not None and loop.renderer.render_scale < 1.0
        assert record["peak_bytes"] <= budget and not record.get("over_budget_reason")
    finally:
        loop.release()
