"""How much of an encode fits a time budget: the policy of the GPU block encoder's bands.

A compute encoder on the render thread gets a few milliseconds a frame. The work is cut into
bands of blocks, each one dispatch; the planner sizes the next band from the rate measured on
the bands before it (blocks per second, a moving average) for a share of the time left, so a
call stops near its budget instead of stalling a frame. The first band of a job is a small probe: nothing is known yet.
Pure arithmetic, unit-tested without GL; engine.gl.bc_encode times the dispatches.
"""
from __future__ import annotations

from dataclasses import dataclass

#: Blocks in the first band of a job, before any rate is known.
PROBE_BLOCKS = 256
#: Fewest blocks worth a dispatch: below this the call's overhead dominates.
MIN_BAND = 64
#: Weight of the newest measurement in the moving average of the rate.
SMOOTHING = 0.5
#: Share of the time left that one band is sized for: blocks differ in cost and the rate
#: drifts, so a call reaches its budget in a few shrinking bands rather than one that may
#: overshoot by the whole error of the estimate.
BAND_SHARE = 0.5


@dataclass(frozen=True)
class Segment:
    """Blocks [first, first + count) of chain level `level`."""

    level: int
    first: int
    count: int


def blocks_of(width: int, height: int) -> tuple[int, int]:
    """(blocks per row, block rows) of a width x height level: partial blocks count whole."""
    return (int(width) + 3) // 4, (int(height) + 3) // 4


@dataclass
class BandPlanner:
    """Sizes bands against a budget from the measured rate (see module)."""

    rate: float = 0.0  # blocks per second; 0: not measured yet

    def band(self, seconds_left: float, remaining: int, first: bool) -> int:
        """Blocks for the next band given the seconds left in this call's budget; 0 when
        not even MIN_BAND blocks fit what is left. The `first` band of a call is at least
        MIN_BAND blocks, so every call makes progress; none is more than what remains."""
        if remaining <= 0:
            return 0
        if self.rate <= 0.0:
            want = PROBE_BLOCKS
        else:
            want = int(self.rate * max(seconds_left, 0.0) * BAND_SHARE)
        if want < MIN_BAND and not first:
            return 0
        return min(remaining, max(MIN_BAND, want))

    def measured(self, blocks: int, seconds: float) -> None:
        """Fold in a finished band: `blocks` took `seconds` of wall time."""
        if blocks <= 0 or seconds <= 0.0:
            return
        rate = blocks / seconds
        self.rate = rate if self.rate <= 0.0 else \
            SMOOTHING * rate + (1.0 - SMOOTHING) * self.rate


def split(level_blocks: list[int], start: tuple[int, int], count: int) -> list[Segment]:
    """The segments of `count` blocks from cursor `start` (level, block) over levels of
    `level_blocks` blocks each: one band may finish one level and start the next."""
    out: list[Segment] = []
    level, first = start
    while count > 0 and level < len(level_blocks):
        take = min(count, level_blocks[level] - first)
        if take > 0:
            out.append(Segment(level, first, take))
            count -= take
        level, first = level + 1, 0
    return out
