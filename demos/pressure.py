"""Budget pressure: the gallery while the budget moves as if another program took and gave
back VRAM. The budget curve is scripted (and seeded), so two runs see the same pressure:

  first quarter of a cycle  full budget
  second quarter            a drop to 40% (another program grabs VRAM)
  third quarter             back to full
  last quarter              random steps between 40% and 100%, every `step_frames` frames

What "full" means (option `pressure_from`):
- "wanted" (the default): the scene's own measured demand. A budget given as a fraction of
  the start budget ("80%" of a GPU) never binds a scene that wants ~110 MiB of its 4 GiB, so
  the curve moves between a floor and a ceiling measured from the run itself: the floor is
  what can never be given up (fixed allocations, render targets at half scale, the mip tails),
  the ceiling what everything costs at full detail (fixed + targets at scale 1 + the running
  peak of the wanted texture bytes, taken back to scale 1). `budget = floor + fraction x
  (ceiling - floor)` with the curve's 40%..100% mapped onto 0..1: at 100% everything fits,
  at 40% only the floor is left, so render scale and residency must move, and no frame can
  go over budget because the floor always fits.
- "start": fractions of the budget in force at frame 0 (the old behaviour; tests that set
  the budget themselves use it).

Each frame's record gets `budget_fraction` (and, measured, `pressure_floor_bytes` and
`pressure_ceiling_bytes`); the report then shows render scale and texture bytes following
the budget down and back up.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.app.loop import FrameContext, FrameHook
from engine.memory.governor import above_tail_at_full_scale, budget_range, fixed_usage

LOW = 0.4


def budget_fraction(frame: int, period: int, step_frames: int = 15, seed: int = 7,
                    swing: bool = False) -> float:
    """The scripted budget, as a fraction of the starting budget, at `frame`. With `swing`,
    the random steps alternate between the lowest and the highest quarter of LOW..1, so that
    every step moves memory far enough to be answered (the measured mode uses it)."""
    phase = (frame % period) / period
    if phase < 0.25 or 0.5 <= phase < 0.75:
        return 1.0
    if phase < 0.5:
        return LOW
    step = frame // step_frames
    u = float(np.random.default_rng([seed, step]).uniform(0.0, 1.0))
    if swing:
        u = 0.25 * u if step % 2 == 0 else 0.75 + 0.25 * u
    return LOW + (1.0 - LOW) * u


FLOOR_SCALE = 0.5  # the floor keeps room for the targets at this scale


class Demand:
    """The scene's own memory demand, measured each frame as the run goes: the floor is what
    can never be given up (fixed allocations, render targets at FLOOR_SCALE, the mip tails),
    the ceiling what everything costs at full detail (fixed + targets at scale 1 + the
    running peak of the wanted texture bytes, taken back to scale 1). Both only grow."""

    def __init__(self) -> None:
        self.fixed = 0
        self.wanted = 0

    def measure(self, ctx: FrameContext) -> tuple[int, int]:
        """(floor, ceiling) in bytes after this frame."""
        stats = ctx.provider.stats()
        scale = max(ctx.renderer.render_scale, 1e-3)
        tails = int(stats.min_bytes)
        # The want at scale 1, by the governor's own coupling.
        wanted = tails + above_tail_at_full_scale(int(stats.wanted_bytes), tails, scale)
        self.wanted = max(self.wanted, int(wanted))
        # What neither the render scale nor the streamer can give back, as the governor
        # counts it; it only grows in a run (staging ring, HUD), so the largest seen so far.
        self.fixed = max(self.fixed, fixed_usage(ctx.device.ledger.by_category(),
                                                 ctx.renderer.target_bytes))
        spec, size = ctx.renderer.cost_spec, ctx.renderer.output_size
        return budget_range(self.fixed, spec.bytes_at(*size, FLOOR_SCALE),
                            spec.bytes_at(*size, 1.0), tails, self.wanted)


def hooks(options: Mapping[str, Any]) -> list[FrameHook]:
    period = int(options.get("period") or max(8, int(options.get("frames") or 240)))
    mode = options.get("pressure_from") or "wanted"
    if mode not in ("wanted", "start"):
        raise ValueError(f"pressure_from must be 'wanted' or 'start', got {mode!r}")
    base: dict[str, int] = {}
    demand = Demand()

    def from_start(ctx: FrameContext) -> None:
        start = base.setdefault("bytes", ctx.governor.budget_bytes)
        ctx.record["budget_fraction"] = budget_fraction(ctx.frame, period)
        # Hooks run at the end of a frame, and the frame loop fits memory at the start of
        # the next one: so set the *next* frame's budget here. The change then lands on a
        # frame boundary and each record's fraction is exactly the budget it ran under.
        ctx.governor.set_budget(int(start * budget_fraction(ctx.frame + 1, period)))

    def from_wanted(ctx: FrameContext) -> None:
        floor, ceiling = demand.measure(ctx)
        ctx.record["budget_fraction"] = budget_fraction(ctx.frame, period, swing=True)
        ctx.record["pressure_floor_bytes"] = floor
        ctx.record["pressure_ceiling_bytes"] = ceiling
        # The curve's LOW..1 spans floor..ceiling: at the low only the floor is left.
        squeeze = (budget_fraction(ctx.frame + 1, period, swing=True) - LOW) / (1.0 - LOW)
        ctx.governor.set_budget(int(floor + squeeze * (ceiling - floor)))

    return [from_start if mode == "start" else from_wanted]


#: Where between its floor and its ceiling a measured budget sits (`binding_hooks`): half the
#: texture detail above the floor, so the budget visibly limits what is resident.
BIND_FRACTION = 0.5


def binding_hooks(options: Mapping[str, Any]) -> list[FrameHook]:
    """A budget that binds, measured from the scene as it runs (the gallery's default): each
    frame sets the next frame's budget to floor + BIND_FRACTION x (ceiling - floor), and
    records the floor and ceiling it came from."""
    demand = Demand()

    def bind(ctx: FrameContext) -> None:
        floor, ceiling = demand.measure(ctx)
        ctx.record["pressure_floor_bytes"] = floor
        ctx.record["pressure_ceiling_bytes"] = ceiling
        ctx.governor.set_budget(int(floor + BIND_FRACTION * (ceiling - floor)))

    return [bind]
