"""Memory-fitted dynamic resolution: which render scale to use this frame. Pure policy.

Engines that scale for frame time keep their targets allocated at full size. This controller
scales to fit *memory*, so a change of scale is a real reallocation, and it has to respect:

* Memory is the hard limit. The memory scale is the largest scale on the grid (multiples of
  `step` down from `max_scale`, plus `min_scale`) whose exact target bytes fit the governor's
  allowance. Over the allowance, the scale drops in the same frame: no cooldown going down.
* A swap holds old and new targets together until the old set is released. The decision says
  `release_first` when the new set does not fit in what the budget has free right now
  (``old + new > old + free``), so the executor frees the old set before allocating.
* Going up is what causes churn, so it is slow: `cooldown_frames` must have passed since the
  last change, the higher scale must have been wanted on each of the last `hold` frames (the
  rise goes to the *minimum* wanted over them, so one dip keeps the lower scale), and the change
  must be at least `up_threshold` relative (Unreal: 8 frames, 2%). `hold` starts at
  `cooldown_frames` and backs off exponentially: a memory drop that undoes a rise within
  4 x `hold` frames quadruples it (8, 32, 128, 512 = `max_rise_hold_frames`), a drop after
  that resets it.
  So an allowance sitting on a boundary +- noise makes a handful of changes, then none, while a
  clean, stable allowance (what the governor hands out: exact grid costs) is followed promptly.
* Optional frame-time target: a PI controller with a dead band (as Filament does) proposes a
  time scale; the final scale is ``min(memory scale, time scale, OOM ceiling)``: memory wins.
* An allocation failure reported by the executor (`on_alloc_failed`) steps one grid step down
  and keeps that as a ceiling for `oom_hold_frames` frames, because the driver's view of free
  memory (fragmentation, other programs) can disagree with our accounting for a while.

The decision is committed when it is returned: the executor is expected to apply it, and to
report a failure through `on_alloc_failed` in the same frame.
"""
from __future__ import annotations

import logging
import math
from collections import deque
from dataclasses import dataclass

from ..errors import BudgetError
from ..memory.governor import check_bytes
from ..memory.sizes import format_bytes
from .targets_spec import TargetsSpec

log = logging.getLogger(__name__)

_EPS = 1e-9


@dataclass(frozen=True)
class ResolutionSettings:
    """Tuning of the controller. Scales are linear (0.5 = half width, quarter area)."""

    min_scale: float = 0.25
    max_scale: float = 1.0
    step: float = 1.0 / 16.0
    #: An upward change must be at least this relative change of scale.
    up_threshold: float = 0.02
    #: Frames between changes, and frames the higher scale must have been wanted, to go up.
    cooldown_frames: int = 8
    #: Cap of the backed-off rise hold (frames a rise must have been wanted after flapping).
    max_rise_hold_frames: int = 512
    #: Frame-time goal in milliseconds; None scales for memory only.
    target_frame_ms: float | None = None
    #: PI gains on the relative frame-time error (target - measured) / target.
    kp: float = 0.3
    ki: float = 0.1
    #: Relative frame-time errors within +-dead_band are ignored (noise is not a reason to move).
    dead_band: float = 0.05
    #: Frames an out-of-memory ceiling stays in force.
    oom_hold_frames: int = 600

    def __post_init__(self) -> None:
        if not 0 < self.min_scale <= self.max_scale <= 1:
            raise ValueError(f"need 0 < min_scale <= max_scale <= 1, got "
                             f"{self.min_scale}, {self.max_scale}")
        if not 0 < self.step <= self.max_scale:
            raise ValueError(f"step must be in (0, max_scale], got {self.step}")
        if self.up_threshold < 0 or self.cooldown_frames < 1 or self.oom_hold_frames < 0 \
                or self.max_rise_hold_frames < self.cooldown_frames:
            raise ValueError("need up_threshold >= 0, cooldown_frames >= 1, oom_hold_frames "
                             ">= 0 and max_rise_hold_frames >= cooldown_frames")
        if self.target_frame_ms is not None and not self.target_frame_ms > 0:
            raise ValueError(f"target_frame_ms must be > 0, got {self.target_frame_ms}")
        if self.kp < 0 or self.ki < 0 or not 0 <= self.dead_band < 1:
            raise ValueError("kp and ki must be >= 0 and dead_band in [0, 1)")

    def grid(self) -> tuple[float, ...]:
        """Every scale the controller can take, ascending. Anchored at max_scale so that full
        resolution is always reachable exactly."""
        scales = {self.min_scale}
        k = 0
        while self.max_scale - k * self.step >= self.min_scale - _EPS:
            scales.add(round(self.max_scale - k * self.step, 12))
            k += 1
        return tuple(sorted(s for s in scales if s >= self.min_scale - _EPS))


@dataclass(frozen=True)
class Decision:
    """What the executor does this frame (and what the frame stats record).

    width, height: the render resolution at `scale`. resize: targets must be reallocated.
    release_first: free the old targets before allocating the new ones (the pair does not fit).
    target_bytes: exact bytes of the target set at `scale`. memory_scale / time_scale: the two
    proposals the scale was taken from (time_scale is None without a frame-time target).
    """

    scale: float
    width: int
    height: int
    resize: bool
    release_first: bool
    reason: str
    target_bytes: int
    memory_scale: float
    time_scale: float | None


class FrameTimePI:
    """PI controller from measured frame time to a continuous time scale.

    Output = max_scale + kp*e + ki*integral, clamped, with e the relative error
    (target - measured) / target. Inside the dead band the error counts as zero, so a frame
    time that wobbles around its target leaves the output exactly where it is. The integral is
    not wound up in a direction the output cannot follow (clamped), nor upwards while memory
    holds the applied scale below the time scale (that headroom is not the time scale's doing).
    """

    def __init__(self, settings: ResolutionSettings) -> None:
        if settings.target_frame_ms is None:
            raise ValueError("FrameTimePI needs settings.target_frame_ms")
        self.settings = settings
        self.integral = 0.0
        self.output = settings.max_scale

    def update(self, measured_ms: float, applied_scale: float) -> float:
        """Feed the last frame's time (rendered at `applied_scale`); returns the time scale."""
        s = self.settings
        assert s.target_frame_ms is not None
        if not math.isfinite(measured_ms) or measured_ms < 0:
            raise ValueError(f"frame time must be finite and >= 0, got {measured_ms!r}")
        error = (s.target_frame_ms - measured_ms) / s.target_frame_ms
        if abs(error) <= s.dead_band:
            return self.output
        at_top = self.output >= s.max_scale - _EPS
        at_bottom = self.output <= s.min_scale + _EPS
        held_by_memory = applied_scale < self.output - _EPS
        if not ((error > 0 and (at_top or held_by_memory)) or (error < 0 and at_bottom)):
            self.integral += error
        raw = s.max_scale + s.kp * error + s.ki * self.integral
        self.output = min(s.max_scale, max(s.min_scale, raw))
        return self.output


class ResolutionController:
    """Chooses the render scale each frame from the governor's allowance (and frame time)."""

    def __init__(self, spec: TargetsSpec, settings: ResolutionSettings | None = None) -> None:
        self.spec = spec
        self.settings = settings or ResolutionSettings()
        self._grid = self.settings.grid()
        self._pi = FrameTimePI(self.settings) if self.settings.target_frame_ms is not None \
            else None
        self._size: tuple[int, int] | None = None
        self._table: tuple[int, ...] = ()
        self._scale: float | None = None
        self._bytes = 0
        self._time_scale: float | None = None
        self._wanted: deque[float] = deque(maxlen=self.settings.max_rise_hold_frames)
        self._since_change = 0
        self._rise_hold = self.settings.cooldown_frames
        self._since_rise: int | None = None  # frames since the last rise; None: none yet
        self._ceiling: float | None = None
        self._ceiling_left = 0
        self._last_allowance = 0
        self._last_free = 0

    # -- queries -------------------------------------------------------------------------------
    @property
    def scale(self) -> float | None:
        """The committed scale (None before the first decision)."""
        return self._scale

    @property
    def scale_cap(self) -> float:
        """Highest scale wanted for reasons other than memory (frame time, OOM ceiling); the
        governor takes it as `GovernorInputs.scale_cap` so that memory above it goes to the
        texture pool."""
        cap = self.settings.max_scale
        if self._time_scale is not None:
            cap = min(cap, self._time_scale)
        if self._ceiling is not None:
            cap = min(cap, self._ceiling)
        return cap

    def set_spec(self, spec: TargetsSpec) -> None:
        """Price `spec` from now on: the set a renderer holds can gain a pass after the
        controller was made (the tile feedback, once a virtual texture registers)."""
        if spec != self.spec:
            self.spec = spec
            if self._size is not None:
                self._table = self._bytes_table(*self._size)

    def target_curve(self, width: int, height: int) -> tuple[tuple[float, int], ...]:
        """(scale, exact bytes) for every grid scale at this output size: the governor's input."""
        return tuple(zip(self._grid, self._bytes_table(width, height)))

    # -- per frame -----------------------------------------------------------------------------
    def update(self, output_size: tuple[int, int], allowance: int, free_bytes: int,
               frame_ms: float | None = None) -> Decision:
        """Decide this frame's scale.

        allowance: the governor's `targets_allowance`; free_bytes: its `free_bytes`;
        frame_ms: the last frame's GPU time, used only with a frame-time target.
        """
        allowance = check_bytes("allowance", allowance)
        free_bytes = check_bytes("free_bytes", free_bytes)
        self._last_allowance, self._last_free = allowance, free_bytes
        size_changed = self._set_size(output_size)
        self._tick_ceiling()
        self._since_change += 1
        if self._since_rise is not None:
            self._since_rise += 1

        memory_scale, fits = self._memory_scale(allowance)
        if self._pi is not None and frame_ms is not None:
            applied = self._scale if self._scale is not None else self.settings.max_scale
            self._time_scale = self._nearest(self._pi.update(frame_ms, applied))
        wanted = min(memory_scale, self.scale_cap)
        self._wanted.append(wanted)

        current = self._scale
        if current is None:
            new, reason = wanted, "initial"
        elif wanted < current - _EPS:
            new, reason = wanted, self._binding_limit(memory_scale)
            if reason == "memory":
                self._back_off()
        elif (up := self._rise_target(current)) is not None:
            new, reason = up, "up"
            self._since_rise = 0
        else:
            new, reason = current, "hold"
        if not fits:
            reason = f"{reason}; over allowance even at min_scale"
        resize = current is None or size_changed or abs(new - current) > _EPS
        if resize and size_changed and current is not None and reason == "hold":
            reason = "output size"
        return self._commit(new, resize, reason, memory_scale, free_bytes)

    def on_alloc_failed(self, scale: float) -> Decision:
        """The executor could not allocate the targets at `scale` (GL_OUT_OF_MEMORY).

        Steps one grid step below `scale`, keeps that as a ceiling for `oom_hold_frames`
        frames, and returns the retry decision (always release-first: memory is evidently
        tighter than our accounting says). Raises BudgetError if `scale` was already the
        minimum: there is nothing left to give up.
        """
        if self._size is None:
            raise RuntimeError("on_alloc_failed before any update()")
        lower = [g for g in self._grid if g < scale - _EPS]
        if not lower:
            raise BudgetError(f"render targets failed to allocate at the minimum scale "
                              f"{scale:g} ({self._size[0]}x{self._size[1]} output)")
        self._ceiling = lower[-1]
        self._ceiling_left = self.settings.oom_hold_frames
        self._wanted.clear()
        log.warning("target allocation failed at scale %g; ceiling %g for %d frames",
                    scale, self._ceiling, self._ceiling_left)
        memory_scale, _ = self._memory_scale(self._last_allowance)
        new = min(memory_scale, self.scale_cap)
        return self._commit(new, True, "out-of-memory retry", memory_scale, self._last_free,
                            release_first=True)

    # -- internals -----------------------------------------------------------------------------
    def _set_size(self, output_size: tuple[int, int]) -> bool:
        width, height = output_size
        if width < 1 or height < 1:
            raise ValueError(f"output size must be positive, got {width}x{height}")
        if self._size == (width, height):
            return False
        self._size = (width, height)
        self._table = self._bytes_table(width, height)
        self._wanted.clear()  # fits measured at another size say nothing about this one
        return True

    def _bytes_table(self, width: int, height: int) -> tuple[int, ...]:
        return tuple(self.spec.bytes_at(width, height, g) for g in self._grid)

    def _tick_ceiling(self) -> None:
        if self._ceiling is None:
            return
        self._ceiling_left -= 1
        if self._ceiling_left <= 0:
            log.info("out-of-memory ceiling %g expired", self._ceiling)
            self._ceiling = None

    def _memory_scale(self, allowance: int) -> tuple[float, bool]:
        """Largest grid scale whose exact bytes fit; (min_scale, False) if none does."""
        for scale, nbytes in zip(reversed(self._grid), reversed(self._table)):
            if nbytes <= allowance:
                return scale, True
        return self._grid[0], False

    def _nearest(self, scale: float) -> float:
        return min(self._grid, key=lambda g: (abs(g - scale), g))

    def _binding_limit(self, memory_scale: float) -> str:
        """Which limit holds the scale down, for the frame stats (memory first: it wins)."""
        if memory_scale <= self.scale_cap + _EPS:
            return "memory"
        if self._ceiling is not None and self._ceiling <= self.scale_cap + _EPS:
            return "out-of-memory ceiling"
        return "frame time"

    def _back_off(self) -> None:
        """A memory drop: quadruple the rise hold if it undid a recent rise (the allowance is
        flapping around a boundary), else start afresh."""
        s = self.settings
        if self._since_rise is not None and self._since_rise < 4 * self._rise_hold:
            self._rise_hold = min(4 * self._rise_hold, s.max_rise_hold_frames)
            log.debug("rise undone by memory; rise hold now %d frames", self._rise_hold)
        else:
            self._rise_hold = s.cooldown_frames
        self._since_rise = None

    def _rise_target(self, current: float) -> float | None:
        """The scale to rise to, if every rule for going up is met; else None."""
        s = self.settings
        hold = self._rise_hold
        if len(self._wanted) < hold or self._since_change < s.cooldown_frames:
            return None
        target = min(list(self._wanted)[-hold:])
        if target > current + _EPS and (target - current) / current >= s.up_threshold:
            return target
        return None

    def _commit(self, scale: float, resize: bool, reason: str, memory_scale: float,
                free_bytes: int, release_first: bool = False) -> Decision:
        """Record the decision as applied. Without `release_first` forced, the old set is
        released first exactly when old and new together do not fit: new > free."""
        assert self._size is not None
        new_bytes = self._table[self._grid.index(scale)]
        release_first = release_first or (resize and self._bytes > 0 and new_bytes > free_bytes)
        if resize:
            log.info("render scale %s -> %g (%s, %s%s)", self._scale, scale, reason,
                     format_bytes(new_bytes), ", release first" if release_first else "")
            self._since_change = 0
        self._scale, self._bytes = scale, new_bytes
        width, height = self.spec.render_size(*self._size, scale)
        return Decision(scale=scale, width=width, height=height, resize=resize,
                        release_first=release_first, reason=reason, target_bytes=new_bytes,
                        memory_scale=memory_scale, time_scale=self._time_scale)

