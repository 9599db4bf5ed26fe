"""Random budget steps during a gallery fly-through with the streaming provider, and
GL_OUT_OF_MEMORY while the render targets are reallocated.

The per-frame properties are those of test_pressure (see its module docstring): every frame
ends within its budget, frames whose budget did not fall peak within it, and a frame answering
a drop never holds more than it did when the drop came plus one tail-sized copy. Hypothesis
draws the schedules; it is derandomized, so CI runs the same examples every time and a failure
reproduces (it is reported unshrunk: each example is a second of rendering).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st
from test_pressure import (OPTIONS, Calibration, check_budget_frames,
                           over_only_answering_drops, resizes)

from engine.errors import GLOutOfMemoryError
from engine.gl.device import Device
from engine.app.loop import FrameContext, SceneFactory
from engine.hosts.run import run_scene
from engine.resolution.policy import ResolutionSettings
from engine.resolution.targets import RenderTargetSet, ResizeEvent
from engine.resolution.targets_spec import TargetSpec

W, H = 160, 120
FRAMES = 150

#: A step: frames until the next one, and where the budget goes: ("span", x) puts it at x of
#: the way from the least that fits to plenty; ("edge", d) puts it d bytes from what the frame
#: holds, the hardest place for peaks (a drop that barely fits leaves no room for transients).
Step = tuple[str, float]
step = st.one_of(st.tuples(st.just("span"), st.floats(0.0, 1.0)),
                 st.tuples(st.just("edge"), st.integers(-(64 << 10), 64 << 10)))
steps = st.lists(st.tuples(st.integers(1, 8), step), min_size=12, max_size=40)


@pytest.fixture(scope="module")
def gallery_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("random-gallery")


def _gallery() -> SceneFactory:
    from engine.demos import DEMOS
    return DEMOS["gallery"].factory



class Schedule:
    """Plays the drawn steps as budgets, always within [low, high]. `low` still fits fixed
    bytes, targets at the minimum scale and every mip tail (below it the governor can only
    report over_budget); `high` leaves room for full resolution and three times what the
    textures want at the start, so steps cross every regime: scale bound, pool bound, none."""

    def __init__(self, cal: Calibration, drawn: list[tuple[int, Step]]) -> None:
        self.cal = cal
        self.at: dict[int, Step] = {}
        frame = 0
        for gap, where in drawn:
            self.at[frame] = where
            frame += gap

    def hook(self, ctx: FrameContext) -> None:
        drawn = self.at.get(ctx.frame)
        if drawn is None:
            return
        cal = self.cal
        low = cal.fixed + cal.targets(0.25) + cal.tails
        high = cal.fixed + cal.targets(1.0) + 3 * cal.wanted + cal.tails
        kind, value = drawn
        budget = low + value * (high - low) if kind == "span" else \
            ctx.record["total_bytes"] + value
        ctx.governor.set_budget(int(min(high, max(low, budget))))


#: A budget cut to 222 bytes above what was held, at frame 24, while the streamer must give
#: back 41 KB: a tail-sized copy has no room, so the eviction goes through the host.
NO_ROOM_FOR_A_COPY = [
    (2, ("span", 0.9)), (7, ("edge", -4556)), (7, ("edge", -19123)), (7, ("span", 1.0)),
    (3, ("edge", 222)), (2, ("span", 0.5449596093369836)), (2, ("span", 0.2893126930514845)),
    (2, ("span", 0.5730236050533609)), (2, ("span", 0.02)), (8, ("span", 0.3119866962115115)),
    (4, ("span", 1e-12)), (5, ("span", 0.19230268075692353)), (8, ("edge", -882)),
    (2, ("span", 0.36967333711799283)), (8, ("span", 0.9128936190803383)),
    (3, ("span", 0.9094634017383549))]


@pytest.mark.slow
@given(drawn=steps)
@example(drawn=NO_ROOM_FOR_A_COPY)
@settings(max_examples=6, deadline=None, derandomize=True,
          phases=(Phase.explicit, Phase.generate))  # no shrinking: minutes of GL runs
@pytest.mark.needs("BC3 sampling")  # BC7 tiles or budgets sized for BC7 need BC7 or BC3
def test_random_budget_steps(engine_device: Device, gallery_cache: Path,
                             drawn: list[tuple[int, Step]]) -> None:
    """A drawn schedule of budget steps, played against the gallery's fly-through."""
    cal = Calibration()
    schedule = Schedule(cal, drawn)
    with engine_device.leak_check():
        result = run_scene(_gallery(), frames=FRAMES, size=(W, H), budget="1GiB",
                           device=engine_device, provider="streaming",
                           options={**OPTIONS, "cache_dir": gallery_cache},
                           on_frame=[cal.hook, schedule.hook])
    assert result.summary["leaked_objects"] == 0
    check_budget_frames(result.frames)
    over_only_answering_drops(result.frames)
    assert result.image is not None and result.image.std() > 5


@pytest.mark.needs("BC3 sampling")  # BC7 tiles or budgets sized for BC7 need BC7 or BC3
def test_out_of_memory_while_reallocating_targets_steps_down(
        device: Device, gallery_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget falls at frame `drop` so the targets must shrink; the first allocation of the
    new set raises GLOutOfMemoryError (as llvmpipe does for a 2 GiB resource). The set falls
    back, the controller steps one grid step below the failed scale and holds that as a
    ceiling, and the frame still renders a picture at the lower scale."""
    drop = 12
    state: dict[str, Any] = {"armed": False, "requests": [], "image": None, "frame": 0}
    make = RenderTargetSet._make
    resize = RenderTargetSet.resize

    def failing_make(self: RenderTargetSet, t: TargetSpec, size: tuple[int, int]) -> Any:
        if state["armed"]:
            state["armed"] = False
            raise GLOutOfMemoryError(f"targets.{t.name} {size[0]}x{size[1]}", 0)
        return make(self, t, size)

    def recording_resize(self: RenderTargetSet, scale: float,
                         release_first: bool = False) -> ResizeEvent:
        state["requests"].append((state["frame"], scale))
        return resize(self, scale, release_first)

    monkeypatch.setattr(RenderTargetSet, "_make", failing_make)
    monkeypatch.setattr(RenderTargetSet, "resize", recording_resize)
    cal = Calibration()

    def script(ctx: FrameContext) -> None:
        state["frame"] = ctx.frame + 1  # what follows this hook belongs to the next frame
        if ctx.frame == drop - 1:
            ctx.governor.set_budget(cal.fixed + cal.tails + cal.targets(0.5))
            state["armed"] = True
        if ctx.frame == drop:
            state["image"] = ctx.renderer.read_output()

    result = run_scene(_gallery(), frames=drop + 10, size=(W, H), budget="1GiB",
                       device=device, provider="streaming",
                       options={**OPTIONS, "cache_dir": gallery_cache},
                       on_frame=[cal.hook, script])
    frames = result.frames
    assert result.summary["leaked_objects"] == 0
    assert not state["armed"], "the new targets were never allocated"
    (_, failed), (_, retry) = [r for r in state["requests"] if r[0] == drop]
    grid = ResolutionSettings().grid()
    assert retry == grid[grid.index(failed) - 1]  # one grid step down
    assert frames[drop]["render_scale"] == retry
    assert frames[drop]["scale_reason"] == "out-of-memory retry"
    assert frames[drop]["total_bytes"] <= frames[drop]["budget_bytes"]
    image = state["image"]
    assert image is not None and image.shape == (H, W, 3)
    assert image.std() > 5 and len(np.unique(image.reshape(-1, 3), axis=0)) > 50
    # The ceiling holds: no reallocation climbs back over the failed scale.
    assert max(f["render_scale"] for f in frames[drop:]) < failed
    assert resizes(frames[drop + 1:]) == []

