"""Weighted fair shares of one byte budget between several views or processes. Pure policy
plus the in-process arbiter; the cross-process group is `engine.memory.group`.

Why. Several frame loops on one GPU (the viewports of one window, the widgets of one
notebook, the engine processes of one server) each had a governor that believed it owned the
whole budget. A *share board* sits above their governors: every frame each member publishes a
`Claim` (weight, floor, demand, visibility) and the bytes it holds, and gets back its grant,
which its governor takes as the budget in force for that frame.

Shares (`fair_shares`): weighted water-filling with floors. Each member gets
``clamp(weight * level, floor, demand)`` with one common `level` chosen so the shares add up to
the budget; a member that wants less than its weighted share keeps only its demand and the
rest flows to the others by weight. A hidden member's demand is its floor (it drops to the
floor and comes back when shown). When even the floors do not fit, each gets the same fraction
of its floor. The shares never add up to more than the budget.

Grants (`settle`): a share is what a member *may* hold; a grant is what it may hold *now*.
Memory another member still holds cannot be handed out before that member gave it back, so
each member keeps a *reservation*: an upper bound of what it holds until its next exchange.
A member's grant is ``min(share, budget - the others' reservations)`` and its new reservation
``max(grant, held)``: a member whose share shrank keeps its reservation until it evicted, a
member whose share grew takes only what has been freed. The reservations therefore never add
up to more than the budget, and neither does what the members hold, provided each stays
within ``max(grant, held at the exchange)`` until its next one: which is what the governor's
frame order gives (targets shrink and the streamer evicts before anything new is allocated).
"""
from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..errors import BudgetError
from .sizes import format_bytes, parse_bytes

log = logging.getLogger(__name__)


def _bytes(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise BudgetError(f"{name} must be a finite number of bytes >= 0, got {value!r}")
    return int(value)


def size_bytes(name: str, value: object) -> int:
    """A byte count given as a number or as text ("64MiB"); BudgetError otherwise."""
    if isinstance(value, str):
        try:
            return parse_bytes(value)
        except ValueError as exc:
            raise BudgetError(f"{name}: {exc}") from None
    return _bytes(name, value)


_GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_group_name(name: object) -> str:
    """A group name is also a file name in the runtime folder: 1-64 of A-Z a-z 0-9 . _ -,
    not starting with . _ or - (no paths, no hidden files)."""
    if not isinstance(name, str) or not _GROUP_NAME.fullmatch(name):
        raise BudgetError(f"share group name must be 1-64 of A-Z a-z 0-9 . _ - (not starting "
                          f"with . _ or -), got {name!r}")
    return name


#: The weights a member may have. A zero weight would make a member's share undefined (it
#: would get nothing above its floor however much is free); a bound on the ratio keeps one
#: member of a group (or a row forged in its file, engine.memory.group) from taking all of
#: it by weight alone: at most a million to one.
MIN_WEIGHT = 1e-3
MAX_WEIGHT = 1e3


def check_weight(value: object) -> float:
    """A weight is a finite number in MIN_WEIGHT..MAX_WEIGHT."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not MIN_WEIGHT <= value <= MAX_WEIGHT:
        raise BudgetError(f"share weight must be a finite number in {MIN_WEIGHT:g}.."
                          f"{MAX_WEIGHT:g}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Claim:
    """What one member asks for this frame. `floor`: bytes it needs to draw at all (its
    fixed memory, smallest targets, mip tails, or the user's floor if higher); `demand`: bytes
    it would use at full detail; a hidden member is given its floor only."""

    weight: float = 1.0
    floor: int = 0
    demand: int = 0
    visible: bool = True

    def validated(self) -> Claim:
        return Claim(check_weight(self.weight), _bytes("floor", self.floor),
                     _bytes("demand", self.demand), bool(self.visible))

    @property
    def wanted(self) -> int:
        """The most this member can use: its demand (never below its floor), or its floor
        alone while hidden."""
        return self.floor if not self.visible else max(self.floor, self.demand)


def fair_shares(budget: int, claims: Sequence[Claim]) -> list[int]:
    """Each claim's share of `budget` (module docstring); sum <= budget, exact integers."""
    budget = _bytes("budget", budget)
    claims = [c.validated() for c in claims]
    if not claims:
        return []
    lows = [c.floor for c in claims]
    highs = [c.wanted for c in claims]
    if sum(lows) >= budget:
        total = sum(lows)
        # Floors do not fit: the same fraction of each floor (integer division keeps the sum
        # within the budget).
        return [f * budget // total if total else 0 for f in lows]
    if sum(highs) <= budget:
        return highs
    weights = [c.weight for c in claims]

    def total(level: float) -> float:
        return sum(min(h, max(lo, w * level)) for lo, h, w in zip(lows, highs, weights))

    # total(level) is piecewise linear and non-decreasing; find the segment where it crosses
    # the budget between consecutive breakpoints, then solve the line exactly.
    points = sorted({lo / w for lo, w in zip(lows, weights)} |
                    {h / w for h, w in zip(highs, weights)})
    below = 0.0
    for point in points:
        if total(point) >= budget:
            break
        below = point
    else:  # unreachable: sum(highs) > budget means the last breakpoint crosses it
        point = points[-1]
    t0, t1 = total(below), total(point)
    level = point if t1 == t0 else below + (budget - t0) * (point - below) / (t1 - t0)
    shares = [min(h, max(lo, int(w * level))) for lo, h, w in zip(lows, highs, weights)]
    over = sum(shares) - budget
    if over > 0:  # float rounding: take the few bytes back from the largest share above floor
        i = max(range(len(shares)), key=lambda k: shares[k] - lows[k])
        shares[i] -= over
    return shares


@dataclass(frozen=True)
class Seat:
    """One member's row on a share board: its claim, its reservation and what it held at its
    last exchange (bytes), and its last share and grant (for reports)."""

    claim: Claim
    reserved: int = 0
    held: int = 0
    share: int = 0
    grant: int = 0


def settle(budget: int, seats: Sequence[Seat], me: int, claim: Claim,
           held: int) -> Seat:
    """Member `me`'s new seat after publishing `claim` and holding `held` bytes: its share
    among every seat's claim (the others' as last published), its grant within what the
    others' reservations leave, its new reservation (module docstring)."""
    claim = claim.validated()
    held = _bytes("held", held)
    claims = [claim if i == me else s.claim for i, s in enumerate(seats)]
    share = fair_shares(budget, claims)[me]
    others = sum(s.reserved for i, s in enumerate(seats) if i != me)
    grant = max(0, min(share, budget - others))
    return Seat(claim, reserved=max(grant, held), held=held, share=share, grant=grant)


def shortfall(budget: int, seats: Sequence[Seat], me: int,
              names: Sequence[str]) -> str | None:
    """Why member `me`'s floor does not fit, naming who holds what, or None when its grant
    holds its floor. A member that cannot draw with its grant must be told who has the
    memory, not only that it is short (its governor then plans at its minimum and says
    over_budget until the others give room back)."""
    seat = seats[me]
    if seat.grant >= seat.claim.floor:
        return None
    held = ", ".join(f"{name}{' (this one)' if i == me else ''} holds "
                     f"{format_bytes(s.held)} (floor {format_bytes(s.claim.floor)})"
                     for i, (name, s) in enumerate(zip(names, seats)))
    return (f"floor {format_bytes(seat.claim.floor)} does not fit: granted "
            f"{format_bytes(seat.grant)} of the {format_bytes(budget)} budget; {held}")


class ShareMember(Protocol):
    """A governor's seat on a share board: `exchange` once per frame (before the split), the
    returned grant is the budget in force for that frame; `leave` when the loop is released."""

    visible: bool
    grant: int
    share: int
    reserved: int
    claim: Claim
    left: bool

    def exchange(self, floor: int, demand: int, held: int) -> int: ...

    def leave(self) -> None: ...


@dataclass(frozen=True)
class ShareSettings:
    """How a run takes part in a shared budget.

    `group`: a group name on this machine (processes; `engine.memory.group`) or a `ViewShares`
    (the views of one process). `weight`: its weight against the others; `floor`: bytes it
    never drops below while the floors fit ("64MiB" or a number); for a group, a member that
    joins first waits until that much is free, so its first allocations fit."""

    group: str | ViewShares
    weight: float = 1.0
    floor: int | str = 0

    def __post_init__(self) -> None:
        check_weight(self.weight)
        object.__setattr__(self, "floor", size_bytes("share floor", self.floor))
        if isinstance(self.group, str):
            check_group_name(self.group)
        elif not isinstance(self.group, ViewShares):
            raise BudgetError(f"share group must be a group name or a ViewShares, got "
                              f"{self.group!r}")

    @classmethod
    def of(cls, spec: str | ViewShares | ShareSettings) -> ShareSettings:
        return spec if isinstance(spec, ShareSettings) else cls(spec)


class ViewShares:
    """One budget shared by the views (frame loops) of one process: each loop's governor takes
    a seat (`FrameLoop.embedded(..., share=ShareSettings(views, weight=2))`); thread-safe, so
    views on different threads or contexts may exchange at any time."""

    def __init__(self, budget: int | str) -> None:
        self.budget = size_bytes("shared budget", budget)
        self._lock = threading.Lock()
        self._seats: dict[int, Seat] = {}
        self._next = 0

    def join(self, settings: ShareSettings) -> ViewSeat:
        with self._lock:
            key = self._next
            self._next += 1
            self._seats[key] = Seat(Claim(settings.weight, settings.floor, settings.floor))
        return ViewSeat(self, key, settings)

    def _exchange(self, key: int, claim: Claim, held: int) -> tuple[Seat, str | None]:
        """The member's new seat, and its shortfall (`shortfall`) when its floor does not
        fit."""
        with self._lock:
            keys = list(self._seats)
            me = keys.index(key)
            seat = settle(self.budget, [self._seats[k] for k in keys], me, claim, held)
            self._seats[key] = seat
            return seat, shortfall(self.budget, [self._seats[k] for k in keys], me,
                                   [f"view {k}" for k in keys])

    def _leave(self, key: int) -> None:
        with self._lock:
            self._seats.pop(key, None)

    def seats(self) -> list[Seat]:
        """The seats now (a copy), for reports and tests."""
        with self._lock:
            return list(self._seats.values())


class MemberState:
    """What every `ShareMember` carries between exchanges: its settings, whether its view is
    shown, and the last seat it settled. One base, so the two kinds of member (views of one
    process, processes of a group) keep it the same way."""

    def __init__(self, settings: ShareSettings) -> None:
        self.settings = settings
        self.visible = True
        self.grant = 0
        self.share = 0
        self.reserved = 0
        self.claim = Claim(settings.weight, int(settings.floor), int(settings.floor))
        self._short = False  # told that its floor does not fit, and not fitting since

    def _settled(self, seat: Seat, short: str | None = None) -> int:
        """Take the seat an exchange settled; its grant. A floor that stops fitting is
        logged once (`short`: who holds what), until it fits again."""
        self.grant, self.share, self.reserved, self.claim = \
            seat.grant, seat.share, seat.reserved, seat.claim
        if short is not None and not self._short:
            log.warning("share: %s", short)
        self._short = short is not None
        return seat.grant


class ViewSeat(MemberState):
    """A view's seat on a `ViewShares` (a `ShareMember`)."""

    def __init__(self, board: ViewShares, key: int, settings: ShareSettings) -> None:
        super().__init__(settings)
        self._board = board
        self._key = key
        self._left = False

    @property
    def left(self) -> bool:
        return self._left

    def exchange(self, floor: int, demand: int, held: int) -> int:
        if self._left:
            raise BudgetError("this view left its share board")
        claim = Claim(self.settings.weight, max(floor, int(self.settings.floor)), demand,
                      self.visible)
        return self._settled(*self._board._exchange(self._key, claim, held))

    def leave(self) -> None:
        if not self._left:
            self._left = True
            self._board._leave(self._key)
