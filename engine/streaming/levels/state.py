"""What the whole-level planner knows of the textures and carries between frames. Pure.

`TextureTable` holds the static per-texture facts (exact storage bytes per finest level,
the always-resident tail), `StreamerState` the per-texture state between frames, and
`update_state` folds each frame's estimate into it with the hysteresis that lets a still
camera settle (see engine.streaming.levels.planner for the rules the plan keeps), and
`apply_ops` the ops the executor really did. `PolicyConfig` names the `Planner` that makes
the plans; the protocol lives here, beside the config that holds one, so the planner module
imports this one and never the other way round.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np

from ...formats import PixelFormat
from ...memory.sizes import mip_dims, texture_bytes
from .ops import MipOp, Plan



def tail_base_level(width: int, height: int, levels: int, *, max_tail_size: int = 64,
                    tail_levels: int | None = None) -> int:
    """First level of the always-resident tail: the first level whose larger side is
    <= `max_tail_size` texels, or the last `tail_levels` levels when that is given.

    Why a tail: something must always be sampleable while finer levels stream, and small
    levels cost almost nothing (all levels <= 64x64 of BC7 are ~5.5 KiB)."""
    if levels < 1:
        raise ValueError(f"a texture has at least one level, got {levels}")
    if tail_levels is not None:
        return max(0, levels - max(1, tail_levels))
    for lvl in range(levels):
        if max(mip_dims(width, height, lvl)) <= max_tail_size:
            return lvl
    return levels - 1


@dataclass(frozen=True)
class TextureSpec:
    """What the policy needs to know of one streamed texture to size its storage."""

    fmt: PixelFormat | str
    width: int
    height: int
    levels: int
    layers: int = 1
    faces: int = 1


@dataclass(frozen=True)
class TextureTable:
    """Static per-texture facts, computed once at registration.

    `storage[t, b]` is the exact byte size of texture t's storage when its finest resident
    level is b (levels b..levels-1, all layers/faces); 0 for b >= levels. The bytes of one
    level l are `storage[t, l] - storage[t, l + 1]`."""

    levels: np.ndarray     # (T,) int32
    tail_base: np.ndarray  # (T,) int32
    storage: np.ndarray    # (T, max_levels + 1) int64

    @classmethod
    def build(cls, specs: Sequence[TextureSpec], *, max_tail_size: int = 64,
              tail_levels: int | None = None) -> TextureTable:
        count = len(specs)
        max_levels = max((s.levels for s in specs), default=1)
        storage = np.zeros((count, max_levels + 1), dtype=np.int64)
        for t, s in enumerate(specs):
            for b in range(s.levels):
                storage[t, b] = texture_bytes(s.fmt, s.width, s.height, levels=s.levels - b,
                                              base_level=b, layers=s.layers, faces=s.faces)
        levels = np.array([s.levels for s in specs], dtype=np.int32)
        tail = np.array([tail_base_level(s.width, s.height, s.levels, max_tail_size=max_tail_size,
                                         tail_levels=tail_levels) for s in specs], dtype=np.int32)
        return cls(levels=levels, tail_base=tail, storage=storage)

    def bytes_at(self, base: np.ndarray) -> np.ndarray:
        """Storage bytes of every texture at the given base levels."""
        # One gather from the flat table (row starts computed once): a 2-D fancy index
        # builds an index pair per texture and measured 3x slower at 10,000 textures.
        return self.storage.ravel().take(self._row_starts + base)

    @cached_property
    def largest_tail_bytes(self) -> int:
        """The largest tail storage (the table never changes: computed once)."""
        return int(self.bytes_at(self.tail_base).max()) if len(self.levels) else 0

    @cached_property
    def _row_starts(self) -> np.ndarray:
        return np.arange(len(self.levels), dtype=np.intp) * self.storage.shape[1]


@dataclass(frozen=True)
class PolicyConfig:
    """Limits and tuning. Defaults follow Unreal/O3DE orders of magnitude."""

    max_upload_bytes: int = 64 << 20   # per frame; one load may exceed it so big levels ever load
    max_ops: int = 16                  # reallocations per frame (loads + evictions)
    max_requests: int = 64             # I/O requests handed out per plan
    evict_delay_frames: int = 30       # unneeded detail kept this long unless room is needed
    recent_frames: int = 120           # invisible this long: "recently visible", keeps its target
    hysteresis: float = 0.25           # mip band around the target level
    acceptable_offset: int = 2         # acceptable = target + this (or the tail)
    realloc: bool = True               # False: sparse storage, no old + new transient
    max_prefetch_requests: int = 8     # of max_requests, at most this many for prefetch
    prefetch_offset: int = 0           # prefetch targets this many levels coarser
    prefetch: bool = True              # the executor feeds `predict_prefetch` to update_state
    #: the `Planner` the executor runs: a name in `planner.PLANNERS` ("tiered", the shipped
    #: policy) or a planner object (the lab's baselines, passed in, not registered)
    policy: str | Planner = "tiered"


class Planner(Protocol):
    """What makes one frame's plan for the executor: the tiered policy (`make_plan`), or a
    benchmark's baseline. `predicts`: it ranks by the prefetch prediction, so the executor
    computes one for it."""

    predicts: bool

    def plan(self, state: StreamerState, table: TextureTable, frame: int, pool_bytes: int,
             in_flight_bytes: int, config: PolicyConfig, ready: np.ndarray | None) -> Plan: ...


@dataclass
class StreamerState:
    """Per-texture state the policy carries between frames. Updated only by `update_state`
    (desires) and `apply_ops` (what the executor really did), both returning a new state.

    `level_times[t, l]` is when level l became resident (seconds; -inf for the tail and
    padding, +inf when not resident): the fade-in reads it. It is never written in place
    (`apply_ops` writes a copy), so successive states share it while no op runs: copying
    10,000 x levels times every frame was a good part of the streamer's steady-state cost."""

    resident_base: np.ndarray   # (T,) int32, finest resident level
    target: np.ndarray          # (T,) int32, wanted base after hysteresis (<= tail)
    last_visible: np.ndarray    # (T,) int64, frame number, -1 = never
    unwanted_since: np.ndarray  # (T,) int64, frame detail became unneeded, -1 = it is needed
    level_times: np.ndarray     # (T, max_levels) float64
    #: (T,) int32, finest level the prediction wants (tail = none); set by update_state
    prefetch_target: np.ndarray | None = None
    #: (T,) bool, seen this frame (set by update_state; None before the first frame)
    visible: np.ndarray | None = None
    #: the global mip bias the "global-bias" baseline settled on (levels)
    global_bias: int = 0

    def prefetch_or_tail(self, table: TextureTable) -> np.ndarray:
        return table.tail_base if self.prefetch_target is None else self.prefetch_target

    def desired(self, table: TextureTable) -> np.ndarray:
        """The finest level anything wants: the target, or finer where prefetch asks."""
        return np.minimum(self.target, self.prefetch_or_tail(table))

    @classmethod
    def initial(cls, table: TextureTable) -> StreamerState:
        """Every texture with only its tail resident (what registration allocates)."""
        count, max_levels = table.storage.shape[0], table.storage.shape[1] - 1
        lvl = np.arange(max_levels)[None, :]
        times = np.where(lvl >= table.tail_base[:, None], -np.inf, np.inf)
        return cls(resident_base=table.tail_base.copy(), target=table.tail_base.copy(),
                   last_visible=np.full(count, -1, np.int64),
                   unwanted_since=np.full(count, -1, np.int64), level_times=times)

    def copy(self, times: bool = True) -> StreamerState:
        """A deep copy; `times=False` shares `level_times` (see the class docstring)."""
        opt = [None if a is None else np.array(a) for a in (self.prefetch_target, self.visible)]
        return StreamerState(*(np.array(a) for a in (
            self.resident_base, self.target, self.last_visible, self.unwanted_since)),
            np.array(self.level_times) if times else self.level_times, *opt, self.global_bias)


def update_state(state: StreamerState, table: TextureTable, mip: np.ndarray,
                 visible: np.ndarray, frame: int, config: PolicyConfig,
                 prefetch_mip: np.ndarray | None = None) -> StreamerState:
    """Fold this frame's desired mips (estimator output) into the state, with hysteresis.

    Visible: the target moves to floor(mip) only when mip leaves [target - h, target + 1 + h).
    Invisible but seen within `recent_frames`: target kept (turning around should not
    re-stream). Otherwise: target = tail, so its detail becomes unneeded.
    `prefetch_mip` (from `predict_prefetch`; inf = nothing predicted) sets the prefetch target:
    floor(mip) + `prefetch_offset`, clamped to the tail; it never touches the target itself,
    so what the screen wants (and `wanted_bytes`) stays what it sees."""
    # Every step is a whole-column numpy pass (np.clip spelled as maximum + minimum: the
    # same numbers at a fraction of its call overhead, and steps that cannot change a
    # number left out); level_times is shared, not copied.
    visible = np.asarray(visible, dtype=bool)
    last_visible = np.where(visible, frame, state.last_visible)
    tail = table.tail_base
    if prefetch_mip is None:
        prefetch_target = tail.astype(np.int32)
    else:
        pm = np.asarray(prefetch_mip, dtype=np.float64)
        finite = np.isfinite(pm)
        with np.errstate(invalid="ignore"):
            lvl = np.floor(np.where(finite, np.maximum(pm, 0.0), 0.0))  # >= 0 everywhere
        if config.prefetch_offset:
            lvl += config.prefetch_offset
            if config.prefetch_offset < 0:
                lvl = np.maximum(lvl, 0)
        lvl = np.minimum(lvl, tail).astype(np.int32)
        prefetch_target = np.where(finite, lvl, tail).astype(np.int32, copy=False)
    m = np.asarray(mip, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        raw = np.minimum(np.maximum(np.floor(np.where(visible, m, 0.0)), 0), tail
                         ).astype(np.int32)
    h = config.hysteresis
    old = state.target
    moved = visible & ((m < old - h) | (m >= old + 1 + h))
    # stale: unseen for longer than recent_frames (never visible, so never `moved` too)
    stale = (frame - last_visible > config.recent_frames) & ~visible
    target = np.where(stale, tail, np.where(moved, raw, old)).astype(np.int32, copy=False)
    desired = np.minimum(target, prefetch_target)
    unwanted_since = np.where(state.resident_base < desired,
                              np.where(state.unwanted_since < 0, frame, state.unwanted_since),
                              -1)
    return StreamerState(resident_base=state.resident_base.copy(), target=target,
                         last_visible=last_visible, unwanted_since=unwanted_since,
                         level_times=state.level_times, prefetch_target=prefetch_target,
                         visible=visible.copy(), global_bias=state.global_bias)


def resident_bytes(state: StreamerState, table: TextureTable) -> int:
    return int(table.bytes_at(state.resident_base).sum())


def wanted_bytes(state: StreamerState, table: TextureTable) -> int:
    """Bytes every texture would take at its target level (what the scene asks for)."""
    return int(table.bytes_at(state.target).sum())


def resident_by_tier(state: StreamerState, table: TextureTable) -> dict[str, int]:
    """Resident bytes by the priority tier of each level (the planner's `tier` rule, by whole
    level ranges per texture): what the budget is spent on now, for the monitor and the HUD."""
    if state.visible is None or len(table.levels) == 0:
        return {"visible": 0, "prefetch": 0, "recent": resident_bytes(state, table), "none": 0}
    rb, tgt, tail = state.resident_base, state.target, table.tail_base
    ptgt = state.prefetch_or_tail(table)
    at = table.bytes_at
    vis = state.visible
    # visible: levels >= max(rb, target) of a texture seen now; the rest lies in [rb, upper)
    # with upper = max(rb, target) for a visible texture and the chain's end otherwise, so
    # the bytes from upper down are the visible bytes
    visible = np.where(vis, at(np.maximum(rb, tgt)), 0)
    predicted = ptgt < tail
    pre_from = np.maximum(rb, ptgt)
    pre_bytes = np.where(predicted, np.maximum(at(pre_from) - visible, 0), 0)
    rest = at(rb) - visible - pre_bytes
    seen = state.last_visible >= 0
    return {"visible": int(visible.sum()), "prefetch": int(pre_bytes.sum()),
            "recent": int(np.where(seen, rest, 0).sum()),
            "none": int(np.where(seen, 0, rest).sum())}


def carried_state(old: StreamerState | None, table: TextureTable) -> StreamerState:
    """The state of a grown table: new textures at their tails, the others as they were."""
    new = StreamerState.initial(table)
    if old is not None:
        n = len(old.resident_base)
        m = min(old.level_times.shape[1], new.level_times.shape[1])
        for name in ("resident_base", "target", "last_visible", "unwanted_since"):
            getattr(new, name)[:n] = getattr(old, name)
        new.level_times[:n, :m] = old.level_times[:, :m]
    return new


def hold_failed(state: StreamerState, failed: np.ndarray) -> StreamerState:
    """A texture whose read or upload failed wants nothing finer than it has, so the plan
    never tries it again; it keeps what is resident."""
    state.target[failed] = np.maximum(state.target[failed], state.resident_base[failed])
    if state.prefetch_target is not None:
        state.prefetch_target[failed] = np.maximum(state.prefetch_target[failed],
                                                   state.resident_base[failed])
    return state


def tail_reserve(table: TextureTable, config: PolicyConfig) -> int:
    """Bytes loads must leave free: the largest tail storage. With that much headroom any
    texture can always be shrunk to its tail (a realloc needs its new storage first), so a
    full pool can never deadlock with nothing evictable. Zero for sparse storage."""
    if not config.realloc or len(table.levels) == 0:
        return 0
    return table.largest_tail_bytes


def apply_ops(state: StreamerState, ops: Iterable[MipOp], now: float) -> StreamerState:
    """The state after the executor completed `ops` (pass only those it really did)."""
    ops = list(ops)
    new = state.copy(times=bool(ops))
    for op in ops:
        t = op.texture
        new.resident_base[t] = op.new_base
        if op.is_load:
            new.level_times[t, op.new_base:op.old_base] = now
        else:
            new.level_times[t, op.old_base:op.new_base] = np.inf
    return new
