"""The one-budget governor: splits a single byte budget between fixed allocations, render
targets and the texture-streaming pool. Pure policy: numbers in, a `BudgetSplit` out.

Why one budget. The streamer and the resolution controller both want VRAM, and each alone would
happily take all of it. The governor is the only place that decides who gets what; the streamer
never loads past `pool_allowance` and the resolution controller never allocates targets past
`targets_allowance`.

Effective budget. The user's budget (`engine.memory.budget.Budget.bytes`) is an upper bound.
When the driver reports available VRAM (NVX "current available"), memory taken by *other*
programs lowers it: ``effective = min(user, our_usage + available - reserve)``. The term
``our_usage + available`` does not move when we allocate or free (both terms shift by the same
amount), so it only tracks other programs. It is lowered at once (others took memory: we must
shrink now) but raised only after it has stayed more than `raise_band_bytes` higher for
`raise_frames` consecutive frames, and then only to the lowest value seen during that streak,
so a noisy driver figure cannot make targets and pool breathe.

Split. ``room = effective - fixed``. Render targets and texture detail are coupled: at render
scale ``s`` the screen shows ``log2(1/s)`` fewer mip levels of detail (the streamer's mip bias),
and each level dropped divides the bytes above the always-resident tails by 4, so
``wanted(s) = tail + (wanted(1) - tail) * s**2``. Shrinking targets therefore also shrinks what
the textures need, which is why the two features help each other. The knob `prefer` in [0, 1]
says how much of that above-tail detail resolution may eat:

    planned scale = the highest candidate s with
        targets(s) + tail + (1 - prefer) * (wanted(s) - tail) <= room

prefer = 1 ("keep resolution") guarantees textures only their tails; prefer = 0 ("keep texture
detail") raises the scale only while the full detail the screen can show at that scale still
fits. The default 0.5 reserves half of it. Targets get exactly ``targets(s)``; the pool gets all
the rest of the room (never less than the tails), so spare memory goes to texture detail.
If even ``targets(min) + tail`` exceed the room, both get their minimums, the sum exceeds the
budget and the allocation says ``over_budget`` (degrade, never go negative).

Elastic bytes. Fixed memory its holder gives back under pressure (the streamer's staging
ring: `GovernorInputs.elastic_bytes`) is held like any fixed byte but is no part of the
floor: a share board is told the floor without it, and when the minimums fit only without
it the pool goes below the tails by the difference, which makes the streamer give the ring
back within the frame (engine.streaming.levels.staging).

Held split. The want follows the camera every frame; the budget does not. Re-planning the split
on every frame would make the render scale (a real reallocation) and the pool breathe with the
camera, and a pool that shrinks under the streamer makes it evict with realloc transients in
memory nobody set aside. So the split is re-planned only when its memory side changes: the room,
the target curve (output size), the scale cap, the tails, or the first report of a want; in
between, the last plan is kept, and the pool alone absorbs what the camera asks for.

Ownership. The governor owns the `Budget` and the source of outside pressure (a VRAM reading
callable); nothing else in the engine reads either. Each frame the app asks `split(...)` with the
ledger's usage and the resolution controller's target curve, and hands the two allowances on:
`pool_allowance` to the streaming provider (`StreamingProvider.grant`, with the page cache's
share of it, `cache_allowance`, by the pure split of engine.memory.split), `targets_allowance` to the
resolution controller, which sizes the render targets. A budget change (a key, a hook, a host
calling `set_budget`) therefore reaches both only through the next split.

Candidates and their exact target bytes come from the resolution controller
(`ResolutionController.target_curve`): the governor stays below the resolution layer and does no
size arithmetic of its own.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..errors import BudgetError
from .budget import Budget, BudgetSpec
from .ledger import Category
from .probe import VramReading
from .shares import ShareMember
from .sizes import format_bytes
from .split import CacheNeeds, share_pool

log = logging.getLogger(__name__)


def check_bytes(name: str, value: float) -> int:
    """A byte count must be a finite, non-negative real number; NaN would poison every min/max
    downstream without raising, so it is refused here."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BudgetError(f"{name} must be a number of bytes, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise BudgetError(f"{name} must be finite and >= 0, got {value!r}")
    return int(value)


def above_tail_at_full_scale(stream_wanted: float, stream_min: float, scale: float) -> float:
    """The streamer's want above its tails at render scale 1, from its want at `scale`:
    the scale-squared coupling of the module docstring, undone."""
    return max(0, stream_wanted - stream_min) / (scale ** 2)


def budget_range(fixed: int, floor_target_bytes: int, full_target_bytes: int,
                 stream_min: int, wanted_at_full_scale: int, extra: int = 0
                 ) -> tuple[int, int]:
    """(floor, ceiling) of the budgets a run can meet: the floor holds the fixed bytes, the
    targets at the lowest scale and the tails; the ceiling the targets at full scale and all
    the texture detail the screen wants there (plus `extra`, e.g. a realloc's transient
    copy). Pressure demos and the soak move the budget between the two."""
    floor = fixed + floor_target_bytes + stream_min
    return floor, max(floor, fixed + full_target_bytes + wanted_at_full_scale + extra)


def split_usage(by_category: Mapping[str, int]) -> tuple[int, int, int]:
    """(fixed, target, streamed) bytes from the ledger's per-category totals. Everything the
    governor cannot resize (buffers, static textures, staging, other) counts as fixed."""
    target = by_category.get(Category.TARGET, 0)
    streamed = by_category.get(Category.STREAMED, 0)
    return sum(by_category.values()) - target - streamed, target, streamed


def fixed_usage(by_category: Mapping[str, int], resizable_target_bytes: int) -> int:
    """The bytes the governor counts as fixed: all but the resizable render targets and
    the streamed textures (`split`'s own reading of the ledger)."""
    fixed, targets, _ = split_usage(by_category)
    return fixed + targets - resizable_target_bytes


#: Reads outside pressure: the driver's VRAM figures now, or None where there is no probe.
PressureSource = Callable[[], VramReading | None]

#: The target curve of a run without resizable render targets (an embedding host that owns
#: its framebuffers, a bare streamer): one scale, no target bytes.
NO_TARGETS: tuple[tuple[float, int], ...] = ((1.0, 0),)


def _check_scale(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not 0 < value <= 1:
        raise BudgetError(f"{name} must be a scale in (0, 1], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class GovernorSettings:
    """Tuning of the governor. `prefer`: 1.0 keeps resolution, 0.0 keeps texture detail."""

    prefer: float = 0.5
    #: VRAM left untouched below the driver's available figure (driver, compositor, spikes).
    reserve_bytes: int = 64 << 20
    #: How much higher the external cap must be before it is believed...
    raise_band_bytes: int = 32 << 20
    #: ...and for how many consecutive frames.
    raise_frames: int = 30

    def __post_init__(self) -> None:
        if isinstance(self.prefer, bool) or not isinstance(self.prefer, (int, float)) \
                or not 0.0 <= self.prefer <= 1.0:
            raise BudgetError(f"prefer must be in [0, 1], got {self.prefer!r}")
        check_bytes("reserve_bytes", self.reserve_bytes)
        check_bytes("raise_band_bytes", self.raise_band_bytes)
        if self.raise_frames < 1:
            raise BudgetError(f"raise_frames must be >= 1, got {self.raise_frames}")


@dataclass(frozen=True)
class GovernorInputs:
    """One frame's numbers. Usage figures come from the ledger, by category.

    target_curve: ``((scale, exact target bytes), ...)`` ascending in scale, one entry per scale
        the resolution controller can take; its first and last entries are the targets at the
        minimum and maximum scale.
    stream_wanted: bytes the streamer needs for full desired detail, measured at render scale
        `stream_wanted_scale` (the scale it currently biases its mips for).
    stream_min: the always-resident mip tails; the pool is never smaller.
    scale_cap: the highest scale the controller would use for reasons other than memory (frame
        time, an out-of-memory ceiling); memory above it goes to the pool instead.
    vram_available / vram_total: driver figures (NVX), or None where no probe exists.
    elastic_bytes: the part of `fixed_bytes` its holder gives back when the room shrinks
        (the streamer's staging ring): held now, but no part of the floor.
    """

    budget_bytes: int
    fixed_bytes: int
    target_bytes: int
    streamed_bytes: int
    target_curve: Sequence[tuple[float, int]]
    stream_wanted: int
    stream_min: int
    stream_wanted_scale: float = 1.0
    scale_cap: float = 1.0
    vram_available: int | None = None
    vram_total: int | None = None
    #: what the provider's virtual-texture page cache needs of the pool (None: no cache)
    cache: CacheNeeds | None = None
    elastic_bytes: int = 0

    def validated(self) -> GovernorInputs:
        """A copy with every number checked and ints normalised; raises BudgetError."""
        curve = tuple((_check_scale("target_curve scale", s), check_bytes("target_curve bytes", b))
                      for s, b in self.target_curve)
        if not curve:
            raise BudgetError("target_curve must list at least one (scale, bytes) entry")
        for (s0, b0), (s1, b1) in zip(curve, curve[1:]):
            if not (s1 > s0 and b1 >= b0):
                raise BudgetError(f"target_curve must ascend in scale with non-decreasing bytes; "
                                  f"got ({s0}, {b0}) then ({s1}, {b1})")
        available = None if self.vram_available is None \
            else check_bytes("vram_available", self.vram_available)
        total = None if self.vram_total is None else check_bytes("vram_total", self.vram_total)
        return GovernorInputs(
            budget_bytes=check_bytes("budget_bytes", self.budget_bytes),
            fixed_bytes=check_bytes("fixed_bytes", self.fixed_bytes),
            target_bytes=check_bytes("target_bytes", self.target_bytes),
            streamed_bytes=check_bytes("streamed_bytes", self.streamed_bytes),
            target_curve=curve,
            stream_wanted=check_bytes("stream_wanted", self.stream_wanted),
            stream_min=check_bytes("stream_min", self.stream_min),
            stream_wanted_scale=_check_scale("stream_wanted_scale", self.stream_wanted_scale),
            scale_cap=_check_scale("scale_cap", self.scale_cap),
            vram_available=available,
            vram_total=total,
            cache=self.cache,
            elastic_bytes=min(check_bytes("elastic_bytes", self.elastic_bytes),
                              check_bytes("fixed_bytes", self.fixed_bytes)),
        )

    @property
    def used_bytes(self) -> int:
        return self.fixed_bytes + self.target_bytes + self.streamed_bytes


@dataclass(frozen=True)
class BudgetSplit:
    """The governor's answer for one frame. Allowances are never negative.

    free_bytes: budget not used by anything right now; the resolution controller swaps targets
        with old and new alive together only if the new set fits in it.
    cache_allowance: the virtual-texture page cache's share of `pool_allowance`
        (engine.memory.split), or None when no cache needs were given.
    external_pressure_bytes: how far other programs pushed the effective budget below the
        user's budget.
    """

    effective_budget: int
    fixed: int
    targets_allowance: int
    pool_allowance: int
    planned_scale: float
    free_bytes: int
    external_pressure_bytes: int
    over_budget: bool
    reason: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    cache_allowance: int | None = None


@dataclass(frozen=True)
class _Split:
    """One planned split of the room (what `Governor` holds between re-plans)."""

    planned: float
    targets: int
    pool: int
    over: bool
    reason: str
    notes: tuple[str, ...] = ()


class Governor:
    """Owns the one budget. `split` reads the budget and the outside pressure and calls
    `decide`, a pure function of its inputs plus the small hysteresis state kept here (the held
    external cap and its raise streak, the held split)."""

    def __init__(self, settings: GovernorSettings | None = None, *,
                 budget: Budget | None = None,
                 pressure: PressureSource | None = None,
                 share: ShareMember | None = None) -> None:
        self._budget = budget
        self._pressure = pressure
        #: A seat on a share board (views of a process, or a group of processes): each split
        #: publishes this governor's floor and demand, and its grant caps the budget.
        self.share = share
        self.settings = settings or GovernorSettings()
        self._split: tuple[tuple, _Split] | None = None
        self._held_cap: int | None = None
        self._streak = 0
        self._streak_min = 0
        self._last_effective: int | None = None
        self._last_over = False

    # ------------------------------------------------------------------ the budget
    @property
    def budget(self) -> Budget:
        if self._budget is None:
            raise BudgetError("this governor was made without a budget (decide-only use)")
        return self._budget

    @property
    def budget_bytes(self) -> int:
        """The user's budget now (the effective one is in each split)."""
        return self.budget.bytes

    def set_budget(self, spec: BudgetSpec | str | int) -> None:
        """A new budget ("512MiB", "80%", bytes); answered by the next split."""
        self.budget.set(spec)

    def scale_budget(self, factor: float) -> None:
        """Raise or lower the budget by a factor (the window's +/- keys)."""
        self.budget.set(max(1, int(self.budget.bytes * factor)))

    def split(self, by_category: Mapping[str, int], *,
              target_curve: Sequence[tuple[float, int]] = NO_TARGETS,
              stream_wanted: int = 0, stream_min: int = 0, stream_wanted_scale: float = 1.0,
              scale_cap: float = 1.0, resizable_target_bytes: int | None = None,
              cache: CacheNeeds | None = None, elastic_bytes: int = 0) -> BudgetSplit:
        """This frame's split from the ledger's usage by category, the budget in force and the
        outside pressure read now. The one place the streaming pool is computed.

        `resizable_target_bytes`: the part of the `target` category the target curve prices
        (the scaled render targets); target-category memory of fixed size (the output image at
        output resolution) then counts as fixed. Default: the whole category is resizable.
        `cache`: the provider's page-cache needs (`ProviderStats.cache`), whose share of the
        pool the split then holds (`cache_allowance`). `elastic_bytes`: fixed bytes given
        back under pressure (the staging ring; `GovernorInputs.elastic_bytes`)."""
        fixed, targets, streamed = split_usage(by_category)
        if resizable_target_bytes is not None:
            fixed = fixed_usage(by_category, resizable_target_bytes)
            targets = resizable_target_bytes
        reading = self._pressure() if self._pressure is not None else None
        inputs = GovernorInputs(
            budget_bytes=self.budget.bytes, fixed_bytes=fixed, target_bytes=targets,
            streamed_bytes=streamed, target_curve=target_curve,
            stream_wanted=stream_wanted if streamed else 0, stream_min=stream_min,
            stream_wanted_scale=stream_wanted_scale, scale_cap=scale_cap,
            vram_available=reading.available_bytes if reading is not None else None,
            vram_total=reading.total_bytes if reading is not None else None, cache=cache,
            elastic_bytes=elastic_bytes)
        if self.share is not None:
            grant = self.share.exchange(*self.claim(inputs.validated()), inputs.used_bytes)
            inputs = replace(inputs, budget_bytes=min(inputs.budget_bytes, grant))
        return self.decide(inputs)

    @staticmethod
    def claim(x: GovernorInputs) -> tuple[int, int]:
        """(floor, demand) for a share board: the least this split can draw with (fixed
        less what is elastic, minimum targets, tails) and what it would use at full detail
        and the highest scale it may take (the `wanted(s)` coupling of the module
        docstring)."""
        curve = x.target_curve
        min_targets = curve[0][1]
        scale, top = next((c for c in reversed(curve) if c[0] <= x.scale_cap + 1e-9), curve[0])
        above_tail = max(0, x.stream_wanted - x.stream_min) / (x.stream_wanted_scale ** 2)
        floor = x.fixed_bytes - x.elastic_bytes + min_targets + x.stream_min
        return floor, int(x.fixed_bytes + top + x.stream_min + above_tail * scale * scale)

    def close(self) -> None:
        """Leave the share board, if any (the loop that used this governor is released)."""
        if self.share is not None:
            self.share.leave()

    # ------------------------------------------------------------------ policy
    def _external_cap(self, raw: int) -> int:
        """Lower at once; raise only after a sustained rise beyond the band."""
        s = self.settings
        if self._held_cap is None or raw <= self._held_cap:
            self._held_cap = raw
            self._streak = 0
        elif raw > self._held_cap + s.raise_band_bytes:
            self._streak_min = raw if self._streak == 0 else min(self._streak_min, raw)
            self._streak += 1
            if self._streak >= s.raise_frames:
                log.debug("external cap raised %s -> %s", format_bytes(self._held_cap),
                          format_bytes(self._streak_min))
                self._held_cap = self._streak_min
                self._streak = 0
        else:
            self._streak = 0  # higher, but inside the band: not evidence of memory given back
        return self._held_cap

    def decide(self, inputs: GovernorInputs) -> BudgetSplit:
        """Split this frame's effective budget; raises BudgetError on NaN/negative inputs."""
        x = inputs.validated()
        s = self.settings
        notes: list[str] = []

        effective = x.budget_bytes
        if x.vram_available is not None:
            raw = max(0, x.used_bytes + x.vram_available - s.reserve_bytes)
            if x.vram_total is not None:
                raw = min(raw, x.vram_total)
            cap = self._external_cap(raw)
            if cap < effective:
                effective = cap
                notes.append(f"other programs hold VRAM: budget lowered to {format_bytes(cap)}")
        pressure = x.budget_bytes - effective

        room = effective - x.fixed_bytes
        # The split's memory side (see "Held split" in the module docstring).
        key = (room, x.target_curve, x.scale_cap, x.stream_min, x.stream_wanted > 0)
        if self._split is None or self._split[0] != key:
            self._split = (key, self._plan(x, room, effective))
        split = self._split[1]
        planned, targets_allowance, pool_allowance = split.planned, split.targets, split.pool
        over, reason = split.over, split.reason
        notes += split.notes
        if x.scale_cap < x.target_curve[-1][0]:
            notes.append(f"scale capped at {x.scale_cap:g} by the resolution controller")

        free = max(0, effective - x.used_bytes)
        self._log_changes(effective, over, reason)
        cache = share_pool(pool_allowance, x.cache) if x.cache is not None else None
        return BudgetSplit(effective_budget=effective, fixed=x.fixed_bytes,
                          targets_allowance=targets_allowance, pool_allowance=pool_allowance,
                          planned_scale=planned, free_bytes=free,
                          external_pressure_bytes=pressure, over_budget=over, reason=reason,
                          notes=tuple(notes), cache_allowance=cache)

    def _plan(self, x: GovernorInputs, room: int, effective: int) -> _Split:
        """The split of `room` for these inputs (the module docstring's rule)."""
        curve = x.target_curve
        tail = x.stream_min
        # The streamer's want at scale 1.0, undoing the s**2 coupling at its current scale.
        above_tail_at_1 = above_tail_at_full_scale(x.stream_wanted, tail, x.stream_wanted_scale)
        candidates = [c for c in curve if c[0] <= x.scale_cap + 1e-9] or [curve[0]]
        for scale, tbytes in reversed(candidates):
            detail_reserve = (1.0 - self.settings.prefer) * above_tail_at_1 * scale * scale
            if tbytes + tail + detail_reserve <= room:
                reason = "fits" if scale == candidates[-1][0] else "scaled to fit"
                return _Split(scale, tbytes, room - tbytes, False, reason)
        min_scale, min_targets = curve[0]
        if min_targets + tail <= room:
            return _Split(min_scale, min_targets, room - min_targets, False,
                          "minimum scale; texture detail below its reservation")
        if min_targets + tail <= room + x.elastic_bytes:
            # fits once the elastic bytes go: a pool below the tails makes the streamer
            # give back its staging ring this frame (levels/staging.py)
            return _Split(min_scale, min_targets, max(0, room - min_targets), False,
                          "minimum scale; the staging ring gives its room back")
        note = (f"fixed {format_bytes(x.fixed_bytes - x.elastic_bytes)} + minimum targets "
                f"{format_bytes(min_targets)} + tails {format_bytes(tail)} exceed "
                f"{format_bytes(effective)}")
        return _Split(min_scale, min_targets, tail, True, "over_budget", (note,))

    def _log_changes(self, effective: int, over: bool, reason: str) -> None:
        """Log transitions only: a per-frame line would drown the log at 60 fps."""
        if effective != self._last_effective:
            log.info("effective budget %s (%s)", format_bytes(effective), reason)
            self._last_effective = effective
        if over != self._last_over:
            (log.warning if over else log.info)(
                "governor %s", "over budget: minimum allocations exceed the budget"
                if over else "back within budget")
            self._last_over = over
