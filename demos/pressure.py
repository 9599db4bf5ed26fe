"""Budget pressure: the gallery while the budget moves as if another program took and gave
back VRAM. The budget curve is scripted (and seeded), so two runs see the same pressure:

  first quarter of a cycle  full budget
  second quarter            a drop to 40% (another program grabs VRAM)
  third quarter             back to full
  last quarter              random steps between 40% and 100%, every `step_frames` frames

Each frame's record gets `budget_fraction`; the report then shows the reaction: render scale
and texture bytes following the budget down and back up.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.render.runner import FrameContext, FrameHook

LOW = 0.4


def budget_fraction(frame: int, period: int, step_frames: int = 15, seed: int = 7) -> float:
    """The scripted budget, as a fraction of the starting budget, at `frame`."""
    phase = (frame % period) / period
    if phase < 0.25 or 0.5 <= phase < 0.75:
        return 1.0
    if phase < 0.5:
        return LOW
    step = frame // step_frames
    return float(np.random.default_rng([seed, step]).uniform(LOW, 1.0))


def hooks(options: Mapping[str, Any]) -> list[FrameHook]:
    period = int(options.get("period") or max(8, int(options.get("frames") or 240)))
    base: dict[str, int] = {}

    def pressure(ctx: FrameContext) -> None:
        start = base.setdefault("bytes", ctx.device.budget.bytes)
        ctx.record["budget_fraction"] = budget_fraction(ctx.frame, period)
        # Hooks run at the end of a frame, and the frame loop fits memory at the start of
        # the next one: so set the *next* frame's budget here. The change then lands on a
        # frame boundary and each record's fraction is exactly the budget it ran under.
        ctx.device.budget.set(int(start * budget_fraction(ctx.frame + 1, period)))

    return [pressure]
