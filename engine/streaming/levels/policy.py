"""Which mip levels to make resident and which to drop, under a hard byte budget. Pure.

The policy sees numbers only (desired mips, resident levels, exact byte sizes, the pool the
governor grants) and returns a `Plan`: an ordered list of `MipOp`s that the GL executor runs
front to back. Nothing here touches GL, files or threads, so every rule below is unit-tested.

Storage model. A texture holds the contiguous chain `base .. levels-1`; changing `base`
reallocates (immutable storage): the new storage is made, the kept levels are copied
(ARB_copy_image), the old storage is deleted. During that swap BOTH exist, so an op whose
`total` bytes precede it peaks at `total + new_bytes` (`PolicyConfig.realloc=False` models
sparse textures, where only committed pages count). Levels from `tail_base` down are the
always-resident tail (O3DE's mip tail): allocated at registration and never evicted.

Rules, each one exactly true of every plan (tests/test_streaming_policy.py):
- Hard budget: a plan that starts within the pool never exceeds it at any step, counting
  in-flight bytes and each op's transient peak (`step_peaks`). A plan that starts above it
  (the pool was cut under us) holds only evictions, least important first, down to the
  low-water mark `pool - reserve`. A plan with loads ends at or below that mark, where
  `reserve` (`tail_reserve`) is what shrinking any texture to its tail needs: a full pool
  can thus always make room, it never deadlocks.
- Priority tiers, as out-of-core viewers have them (Neuroglancer: VISIBLE > PREFETCH >
  RECENT): a level is VISIBLE when its texture is seen this frame and the level is needed
  (l >= target); PREFETCH when it is needed by the prediction (l >= prefetch target: the
  camera a short time ahead, or a neighbour of what is visible; see `predict_prefetch`);
  RECENT when its texture was ever seen; NONE otherwise.
- Importance of one level (t, l), compared as a tuple, larger is more important:
  (-tier, frame t was last visible, l is needed (l >= target), l is acceptable (l >= target
  + 2, or the tail), -bytes of l). Loads go most important first; evictions take the finest
  level of the least important texture first; so visible textures all reach their acceptable
  level before any is refined, smaller loads win ties, larger levels are dropped first, and
  since the tier comes first, nothing prefetched can ever push out a visible level.
- A resident level is only evicted to make room for a strictly more important load: a
  visible texture never loses detail to a less visible one, and no two loads can evict each
  other back and forth. A visible level moreover yields only to a load that beats it on more
  than size (tier, recency, needed, acceptable): equally needed visible levels are not
  traded for a few bytes.
- Only VISIBLE and PREFETCH levels are loaded, and a PREFETCH load only into free room (it
  evicts nothing, not even RECENT detail). RECENT textures keep what they hold (turning
  back is free) but lost detail is not streamed back until they are seen or predicted again:
  on the wall, reloading recently seen textures into room a visible load had just made, and
  evicting them again for the next one, was most of the re-uploads (measured: 144 of 186 at
  25% of peak wanted, during the pan).
- Hysteresis: the target level only moves when the float mip leaves a +-0.25 band around
  it; unneeded detail (resident finer than target) is kept `evict_delay_frames` before a
  voluntary eviction. A still camera therefore settles to zero ops per frame.
- Per-frame caps on ops and upload bytes; grows go one level per texture per frame.
- Bounded reads: at most `max_requests` reads are asked for per plan, of which at most
  `max_prefetch_requests` for prefetch, so predicted work never crowds out what is seen.

The executor runs a `Planner` named by `PolicyConfig.policy`: "tiered" is this module's
`make_plan`; the benchmarks register their baselines (engine.bench.baselines) beside it, run
by the same executor under the same hard-budget rules.
"""
from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol
from functools import cached_property

import numpy as np

from ...formats import PixelFormat
from ...memory.sizes import mip_dims, texture_bytes
from ..tiers import Tier
from .estimator import (
    CameraInput,
    InstanceArrays,
    MipEstimate,
    PreparedInstances,
    TextureArrays,
    instance_mips,
    prepare_instances,
    texture_min,
    texture_mips,
)

#: Key of one level's importance; tuples compare lexicographically (see module docstring).
#: Its first field is the urgency `-tier` (Tier ranks smaller first), so larger is more
#: important in every field.
Importance = tuple[int, int, bool, bool, int]


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
    #: the `Planner` the executor runs, by its registered name (`register_planner`)
    policy: str = "tiered"


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


@dataclass(frozen=True)
class MipOp:
    """Change texture `texture`'s finest resident level from `old_base` to `new_base`.
    A load (new_base < old_base) uploads exactly the level `new_base` (the rest is copied
    on the GPU); an eviction may drop several levels in one reallocation."""

    texture: int
    old_base: int
    new_base: int
    old_bytes: int
    new_bytes: int
    realloc: bool = True

    @property
    def is_load(self) -> bool:
        return self.new_base < self.old_base

    @property
    def delta(self) -> int:
        """Change of resident bytes once the op completes."""
        return self.new_bytes - self.old_bytes

    @property
    def transient_bytes(self) -> int:
        """Bytes on top of the pre-op total while the op runs (old and new storage coexist)."""
        return self.new_bytes if self.realloc else max(0, self.delta)

    @property
    def upload_bytes(self) -> int:
        return self.delta if self.is_load else 0


def step_peaks(ops: Iterable[MipOp], start_bytes: int) -> list[int]:
    """Peak bytes during each op when run in order from `start_bytes` (resident + in flight).
    Skipping any load keeps every later peak the same or lower (loads only add bytes), so
    an executor may drop loads whose data is not there; it must not drop evictions."""
    total, peaks = start_bytes, []
    for op in ops:
        peaks.append(total + op.transient_bytes)
        total += op.delta
    return peaks


def plan_fits(ops: Sequence[MipOp], start_bytes: int, pool_bytes: int) -> bool:
    """True when running `ops` in order never exceeds `pool_bytes` (the executor's check)."""
    return all(p <= pool_bytes for p in step_peaks(ops, start_bytes))


@dataclass(frozen=True)
class Plan:
    """One frame's decisions. `ops` in execution order; `requests` are (texture, level)
    reads the I/O should fetch, most important first (loads whose data is not ready)."""

    ops: tuple[MipOp, ...]
    requests: tuple[tuple[int, int], ...]
    start_bytes: int
    pool_bytes: int
    peak_bytes: int
    end_bytes: int
    over_budget: bool
    deferred_loads: int
    reserve_bytes: int

    @property
    def loads(self) -> list[MipOp]:
        return [op for op in self.ops if op.is_load]

    @property
    def evictions(self) -> list[MipOp]:
        return [op for op in self.ops if not op.is_load]

    @property
    def upload_bytes(self) -> int:
        return sum(op.upload_bytes for op in self.ops)


def tail_reserve(table: TextureTable, config: PolicyConfig) -> int:
    """Bytes loads must leave free: the largest tail storage. With that much headroom any
    texture can always be shrunk to its tail (a realloc needs its new storage first), so a
    full pool can never deadlock with nothing evictable. Zero for sparse storage."""
    if not config.realloc or len(table.levels) == 0:
        return 0
    return table.largest_tail_bytes


def resident_bytes(state: StreamerState, table: TextureTable) -> int:
    return int(table.bytes_at(state.resident_base).sum())


def wanted_bytes(state: StreamerState, table: TextureTable) -> int:
    """Bytes every texture would take at its target level (what the scene asks for)."""
    return int(table.bytes_at(state.target).sum())


class _Planner:
    """One frame's planning pass. A class only to share the arrays between the steps; it
    lives for one `make_plan` call.

    The per-texture columns are numpy arrays; their Python-list forms (fast scalar reads for
    the few textures the loops below visit) are made on first use only, so a frame with
    nothing to load or evict converts nothing."""

    def __init__(self, state: StreamerState, table: TextureTable, pool: int, start: int,
                 config: PolicyConfig, frame: int = 0) -> None:
        self.table, self.config, self.pool, self.start = table, config, pool, start
        self.state, self.frame = state, frame
        self.storage = table.storage
        self.reserve = tail_reserve(table, config)
        # Entries in execution order: ("e", t) eviction to self.evict_to[t], ("l", t) load.
        self.entries: list[tuple[str, int]] = []
        self.evict_to: dict[int, int] = {}
        self.loaded: set[int] = set()
        self._heap: list[tuple[Importance, int, int]] | None = None

    @cached_property
    def vis_array(self) -> np.ndarray:
        st = self.state
        return np.asarray(st.visible if st.visible is not None
                          else st.last_visible == self.frame, bool)

    @cached_property
    def acc_array(self) -> np.ndarray:
        return np.minimum(self.state.target + self.config.acceptable_offset,
                          self.table.tail_base)

    @cached_property
    def desired_array(self) -> np.ndarray:
        return self.state.desired(self.table)

    @cached_property
    def res(self) -> list[int]:
        return self.state.resident_base.tolist()

    @cached_property
    def tgt(self) -> list[int]:
        return self.state.target.tolist()

    @cached_property
    def ptgt(self) -> list[int]:
        return self.state.prefetch_or_tail(self.table).tolist()

    @cached_property
    def want(self) -> list[int]:
        return self.desired_array.tolist()

    @cached_property
    def vis(self) -> list[bool]:
        return self.vis_array.tolist()

    @cached_property
    def tail(self) -> list[int]:
        return self.table.tail_base.tolist()

    @cached_property
    def acc(self) -> list[int]:
        return self.acc_array.tolist()

    @cached_property
    def last(self) -> list[int]:
        return self.state.last_visible.tolist()

    def tier(self, t: int, lvl: int) -> Tier:
        if self.vis[t] and lvl >= self.tgt[t]:
            return Tier.VISIBLE
        if lvl >= self.ptgt[t] and self.ptgt[t] < self.tail[t]:
            return Tier.PREFETCH
        return Tier.RECENT if self.last[t] >= 0 else Tier.NONE

    def importance(self, t: int, lvl: int) -> Importance:
        lb = int(self.storage[t, lvl] - self.storage[t, lvl + 1])
        return (-int(self.tier(t, lvl)), self.last[t], lvl >= self.tgt[t], lvl >= self.acc[t],
                -lb)

    def importance_columns(self, t: np.ndarray, lvl: np.ndarray) -> tuple[np.ndarray, ...]:
        """`importance` of levels lvl[i] of textures t[i], as five columns (the tuple's
        fields): many keys in a few numpy passes instead of a Python call per texture."""
        st, table = self.state, self.table
        tgt, ptgt = st.target[t], st.prefetch_or_tail(table)[t]
        last = st.last_visible[t]
        needed = lvl >= tgt
        tier = np.where(self.vis_array[t] & needed, int(Tier.VISIBLE),
                        np.where((lvl >= ptgt) & (ptgt < table.tail_base[t]),
                                 int(Tier.PREFETCH),
                                 np.where(last >= 0, int(Tier.RECENT), int(Tier.NONE))))
        flat = self.storage.ravel()
        row = t * self.storage.shape[1] + lvl
        lb = flat[row] - flat[row + 1]
        return -tier, last, needed, lvl >= self.acc_array[t], -lb

    def importance_order(self, t: np.ndarray, lvl: np.ndarray) -> tuple[np.ndarray, ...]:
        """Positions of (t, lvl) most important first, ties in the given order (what a
        stable descending sort of the `importance` tuples gives), and the key columns."""
        cols = self.importance_columns(t, lvl)
        keys = tuple(-np.asarray(c, np.int64) for c in reversed(cols))
        return np.lexsort(keys), cols

    @staticmethod
    def may_evict(victim: Importance, load: Importance) -> bool:
        """A load evicts only strictly less important levels; a visible level moreover only
        for a load that beats it on more than size (tier, recency, needed, acceptable): two
        visible textures never trade equally needed levels back and forth for a few bytes.
        Heap order stays valid: anything after a refused visible victim is refused too."""
        if victim[0] == -Tier.VISIBLE:
            return victim[:4] < load[:4]
        return victim < load

    def base(self, t: int, evict_to: dict[int, int]) -> int:
        return evict_to.get(t, self.res[t])

    def ops(self, entries: list[tuple[str, int]], evict_to: dict[int, int]) -> list[MipOp]:
        out = []
        for kind, t in entries:
            new = evict_to[t] if kind == "e" else self.res[t] - 1
            out.append(MipOp(t, self.res[t], new, int(self.storage[t, self.res[t]]),
                             int(self.storage[t, new]), self.config.realloc))
        return out

    def fits(self, entries: list[tuple[str, int]], evict_to: dict[int, int]) -> bool:
        """Every step within the pool, and a plan with loads leaves the tail reserve free."""
        ops = self.ops(entries, evict_to)
        if not plan_fits(ops, self.start, self.pool):
            return False
        end = self.start + sum(op.delta for op in ops)
        return end <= self.pool - self.reserve or not any(op.is_load for op in ops)

    # -- eviction candidates: a lazy heap of each texture's finest evictable level --------
    def heap(self) -> list[tuple[Importance, int, int]]:
        if self._heap is None:
            res = self.state.resident_base
            ts = np.flatnonzero(res < self.table.tail_base)
            lvl = res[ts]
            cols = [c.tolist() for c in self.importance_columns(ts, lvl)]
            self._heap = [(key, t, b) for key, t, b in zip(zip(*cols), ts.tolist(),
                                                           lvl.tolist())]
            heapq.heapify(self._heap)
        return self._heap

    def pop_evictable(self, evict_to: dict[int, int],
                      below: Importance | None) -> tuple[Importance, int, int] | None:
        """Least important evictable level, if strictly less important than `below`."""
        heap, growing, found = self.heap(), [], None
        while heap:
            key, t, lvl = heap[0]
            if below is not None and not self.may_evict(key, below):
                break
            heapq.heappop(heap)
            if lvl != self.base(t, evict_to):
                continue  # stale: that level is already planned away
            if t in self.loaded:
                growing.append((key, t, lvl))  # not now: it grows this frame (or may)
                continue
            if lvl + 1 < self.tail[t]:
                heapq.heappush(heap, (self.importance(t, lvl + 1), t, lvl + 1))
            found = (key, t, lvl)
            break
        for item in growing:
            heapq.heappush(heap, item)
        return found

    def evict_level(self, entries: list[tuple[str, int]], evict_to: dict[int, int],
                    t: int, lvl: int) -> None:
        """Drop level `lvl` of t: deepen t's eviction op (always safe: it lowers every later
        total and its own transient) or append a new one."""
        if t not in evict_to:
            entries.append(("e", t))
        evict_to[t] = lvl + 1

    def arranged(self, new: list[tuple[str, int]], evict_to: dict[int, int],
                 load: int) -> list[tuple[str, int]]:
        """Committed entries, then this load's evictions smallest transient first (for
        steps that all free bytes, ascending headroom need is the order most likely to
        fit), then the load."""
        new = sorted(new, key=lambda e: int(self.storage[e[1], evict_to[e[1]]]))
        return self.entries + new + [("l", load)]

    # -- the three modes ------------------------------------------------------------------
    def recover(self) -> None:
        """Over the pool before doing anything: evict least important first until it fits."""
        total = self.start
        while total > self.pool - self.reserve:
            item = self.pop_evictable(self.evict_to, None)
            if item is None:
                return
            _, t, lvl = item
            self.evict_level(self.entries, self.evict_to, t, lvl)
            total -= int(self.storage[t, lvl] - self.storage[t, lvl + 1])

    def try_load(self, t: int) -> bool:
        """Add the load of t's next finer level, evicting strictly less important levels
        if that is what makes it fit; all or nothing. A prefetch load only fills free room:
        evicting for a guess, then evicting the guess for what is really seen, was churn
        (re-uploads) under tight budgets. A texture that lost levels to an earlier load of
        this plan is not loaded back in it: one plan never both evicts and grows a texture
        (the executor would grow it from a base it no longer has)."""
        if t in self.evict_to:
            return False
        entries = self.entries + [("l", t)]
        if self.fits(entries, self.evict_to):
            self.entries = entries
            self.loaded.add(t)
            return True
        key = self.importance(t, self.res[t] - 1)
        if key[0] < -Tier.VISIBLE:
            return False
        new: list[tuple[str, int]] = []
        trial_evict = dict(self.evict_to)
        popped = []
        self.loaded.add(t)  # t's own levels are not candidates
        while True:
            item = self.pop_evictable(trial_evict, key)
            if item is None:
                break
            popped.append(item)
            self.evict_level(new, trial_evict, item[1], item[2])
            if len(self.entries) + len(new) + 1 > self.config.max_ops:
                break
            trial = self.arranged(new, trial_evict, t)
            if self.fits(trial, trial_evict):
                self.entries, self.evict_to = trial, trial_evict
                return True
        self.loaded.discard(t)
        for item in popped:
            heapq.heappush(self.heap(), item)
        return False

    def voluntary_evictions(self, candidates: list[int]) -> None:
        """Drop detail unneeded for `evict_delay_frames`, if the op itself fits."""
        for t in candidates:
            if len(self.entries) >= self.config.max_ops:
                return
            if t in self.loaded or self.base(t, self.evict_to) >= self.want[t]:
                continue
            entries, evict_to = list(self.entries), dict(self.evict_to)
            if t not in evict_to:
                entries.append(("e", t))
            evict_to[t] = self.want[t]
            if self.fits(entries, evict_to):
                self.entries, self.evict_to = entries, evict_to


def make_plan(state: StreamerState, table: TextureTable, frame: int, pool_bytes: int,
              in_flight_bytes: int = 0, config: PolicyConfig = PolicyConfig(),
              ready: np.ndarray | None = None) -> Plan:
    """This frame's plan. `ready[t]` says the next finer level of t (resident_base - 1) is
    in RAM; None means every level is (tests, or sparse/preloaded data). Loads that are not
    ready become `requests` instead of ops and get no room made for them."""
    start = resident_bytes(state, table) + int(in_flight_bytes)
    planner = _Planner(state, table, int(pool_bytes), start, config, frame)
    requests: list[tuple[int, int]] = []
    deferred = 0
    over = start > pool_bytes
    if over:
        planner.recover()
    else:
        res = state.resident_base
        desired = planner.desired_array
        want = np.flatnonzero(res > desired)
        if want.size:
            requests, deferred = _plan_loads(planner, want, ready)
        unneeded = np.flatnonzero((state.unwanted_since >= 0) & (res < desired)
                                  & (frame - state.unwanted_since >= config.evict_delay_frames))
        if unneeded.size:
            # least important first: the ascending order is the descending one reversed,
            # except that ties keep their given order
            cols = planner.importance_columns(unneeded, res[unneeded])
            order = np.lexsort(tuple(np.asarray(c, np.int64) for c in reversed(cols)))
            planner.voluntary_evictions(unneeded[order].tolist())
    ops = tuple(planner.ops(planner.entries, planner.evict_to))
    peaks = step_peaks(ops, start)
    return Plan(ops=ops, requests=tuple(requests), start_bytes=start, pool_bytes=int(pool_bytes),
                peak_bytes=max([start, *peaks]), end_bytes=start + sum(op.delta for op in ops),
                over_budget=over, deferred_loads=deferred, reserve_bytes=planner.reserve)


def _plan_loads(planner: _Planner, want: np.ndarray,
                ready: np.ndarray | None) -> tuple[list[tuple[int, int]], int]:
    """Loads (and, for levels not in RAM, read requests) of the textures in `want`, most
    important first; returns (requests, deferred loads) and leaves the ops in `planner`.

    Each wanting texture, in order: skipped if a load this frame already took its finest
    level, or if it is only recent or never seen (nothing streams back to it); not ready:
    a read request while there is room for one (prefetch within its own quota); ready: a
    load, unless a per-frame cap is reached or it does not fit (then it is deferred).
    The order is found with one numpy sort, and the loop stops visiting textures once the
    rest cannot change anything: with the op cap reached no load can happen (the ready ones
    left are all deferred, counted at once), and with the request cap reached only ready
    textures are visited. A scene waiting on thousands of reads thus costs a few Python
    steps per frame, not one per texture."""
    config, state = planner.config, planner.state
    res = state.resident_base
    lvl = res[want] - 1
    order, cols = planner.importance_order(want, lvl)
    order = order[cols[0][order] >= -Tier.PREFETCH]  # recent or never seen: nothing streams
    ts = want[order]
    tiers = (-cols[0][order]).tolist()
    ups = (-cols[4][order]).tolist()
    rdy = np.ones(len(ts), bool) if ready is None else np.asarray(ready, bool)[ts]
    t_list, lvl_list, rdy_list = ts.tolist(), lvl[order].tolist(), rdy.tolist()
    requests: list[tuple[int, int]] = []
    prefetch_requests = deferred = uploads = 0
    entries_cap = config.max_ops
    # `planner.evict_to` is read afresh each time: a load that evicts replaces the dict, and
    # a copy taken here went stale (the H200 wall at 10%: a texture evicted for one load was
    # then loaded from the level it had just lost; the executor refused it every frame)

    def request(i: int) -> None:
        nonlocal prefetch_requests
        prefetch = tiers[i] > Tier.VISIBLE
        if len(requests) < config.max_requests and (
                not prefetch or prefetch_requests < config.max_prefetch_requests):
            requests.append((t_list[i], lvl_list[i]))
            prefetch_requests += int(prefetch)

    def load(i: int) -> None:
        nonlocal deferred, uploads
        t, up = t_list[i], ups[i]
        capped = len(planner.entries) >= entries_cap or (
            planner.loaded and uploads + up > config.max_upload_bytes)
        if capped or not planner.try_load(t):
            deferred += 1
            return
        uploads += up

    n, pos = len(t_list), 0
    while pos < n and len(requests) < config.max_requests \
            and len(planner.entries) < entries_cap:
        if t_list[pos] not in planner.evict_to:  # else: lost levels to a more important load
            (load if rdy_list[pos] else request)(pos)
        pos += 1
    rest = np.arange(pos, n)
    if len(planner.entries) >= entries_cap:  # no load can happen any more
        left = ts[rest[rdy[pos:]]]
        deferred += int(left.size - np.isin(left, list(planner.evict_to)).sum())
        for i in rest[~rdy[pos:]].tolist():
            if len(requests) >= config.max_requests:
                break
            if t_list[i] not in planner.evict_to:
                request(i)
    else:  # the requests are full: only loads can still happen
        for i in rest[rdy[pos:]].tolist():
            if len(planner.entries) >= entries_cap:
                left = ts[rest[rdy[pos:]]]
                left = left[rest[rdy[pos:]] >= i]
                deferred += int(left.size - np.isin(left, list(planner.evict_to)).sum())
                break
            if t_list[i] not in planner.evict_to:
                load(i)
    return requests, deferred


# ---------------------------------------------------------------------------- prefetch
class Planner(Protocol):
    """What makes one frame's plan for the executor: the tiered policy (`make_plan`), or a
    benchmark's baseline. `predicts`: it ranks by the prefetch prediction, so the executor
    computes one for it."""

    predicts: bool

    def plan(self, state: StreamerState, table: TextureTable, frame: int, pool_bytes: int,
             in_flight_bytes: int, config: PolicyConfig, ready: np.ndarray | None) -> Plan: ...


@dataclass(frozen=True)
class TieredPlanner:
    """The shipped policy: `make_plan`."""

    predicts: bool = True

    def plan(self, state: StreamerState, table: TextureTable, frame: int, pool_bytes: int,
             in_flight_bytes: int, config: PolicyConfig, ready: np.ndarray | None) -> Plan:
        return make_plan(state, table, frame, pool_bytes, in_flight_bytes, config, ready)


#: The planners `PolicyConfig.policy` can name; their owners add theirs (`register_planner`).
PLANNERS: dict[str, Planner] = {"tiered": TieredPlanner()}


def register_planner(name: str, planner: Planner) -> None:
    """Make a planner selectable by name (the benchmarks' baselines)."""
    PLANNERS[name] = planner


def planner_for(name: str) -> Planner:
    """The planner registered as `name`; ValueError naming the known ones."""
    try:
        return PLANNERS[name]
    except KeyError:
        raise ValueError(f"unknown streaming policy {name!r}; known: "
                         f"{', '.join(sorted(PLANNERS))}") from None


@dataclass(frozen=True)
class PrefetchConfig:
    """How far ahead and around prefetch looks.

    `ahead_frames`: the camera is extrapolated this many frames along its last step (0.25 s
    at 60 fps): panning brings the images ahead in, zooming in asks finer levels of what is
    on screen. `neighbour_scale`: instances whose bounding sphere, grown by this factor,
    touches the frustum are neighbours: at 2, the next image beyond each screen edge of a
    grid (a square's sphere is 0.71 of its side, grown to 1.41). 3 reached two images out and
    cost more than it brought under a binding budget, because a prefetch load only fills free
    room: on the llvmpipe wall at half the peak budget the extra ring filled the pool with
    guesses in every direction while the images ahead waited (pan coarser-than-wanted 0.56
    at 3, 0.47 at 2, 0.66 without prefetch; re-uploads 76 -> 19; zoomed-in PSNR +1.4 dB at
    50%, +0.4 dB at 25%, equal at 10%). A step longer than `cut_ratio` x the distance to
    the nearest visible instance is a cut (a teleport), after which the last step predicts
    nothing: no extrapolation then."""

    ahead_frames: float = 15.0
    neighbour_scale: float = 2.0
    cut_ratio: float = 1.0


def extrapolate_camera(prev: CameraInput, now: CameraInput, frames: float) -> CameraInput:
    """The camera `frames` frames ahead, continuing its last step linearly. The view-projection
    is extrapolated element-wise: exact for a translation (dolly, pan, zoom by moving), first
    order for a rotation."""
    pos = np.asarray(now.position, np.float64)
    step = pos - np.asarray(prev.position, np.float64)
    vp = np.asarray(now.view_proj, np.float64)
    dvp = vp - np.asarray(prev.view_proj, np.float64)
    return replace(now, position=pos + frames * step, view_proj=vp + frames * dvp)


def predict_prefetch(instances: InstanceArrays, textures: TextureArrays, now: CameraInput,
                     prev: CameraInput | None = None, config: PrefetchConfig = PrefetchConfig(),
                     global_bias: float = 0.0) -> np.ndarray:
    """Per texture, the finest mip a short while ahead or just beyond the view wants (inf
    where nothing is predicted): min over (the extrapolated camera's estimate, the
    neighbours' estimate at their real distance). Pure; `update_state` takes it as
    `prefetch_mip`."""
    prep = prepare_instances(instances, textures)
    return estimate_with_prefetch(prep, now, prev, config, global_bias)[1]


def estimate_with_prefetch(prep: PreparedInstances, now: CameraInput,
                           prev: CameraInput | None = None,
                           config: PrefetchConfig | None = PrefetchConfig(),
                           global_bias: float = 0.0) -> tuple[MipEstimate, np.ndarray | None]:
    """This frame's estimate and, unless `config` is None, `predict_prefetch`'s prediction,
    sharing the work: one pass over the instances answers the frustum test for the real and
    the grown spheres, and the neighbours' mips are the same per-instance mips under another
    mask (a neighbour is priced at its own distance, which no frustum changes). Only the
    extrapolated camera needs a second pass. Bit-identical to the separate calls."""
    im = instance_mips(prep, now, global_bias)
    seen = im.visible(prep.radii)
    est = texture_mips(prep, im.mip, seen)
    if config is None:
        return est, None
    out = np.full(len(prep.levels), np.inf)
    if len(prep.radii) == 0:
        return est, out
    # Neighbours: seen by the frustum when grown, priced at their own distance.
    near = im.visible(prep.radii * config.neighbour_scale)
    near &= ~seen
    if near.any():
        out = np.minimum(out, texture_min(prep, im.mip, near)[0])
    if prev is not None and seen.any():
        step = float(np.linalg.norm(np.asarray(now.position, np.float64)
                                    - np.asarray(prev.position, np.float64)))
        # The nearest seen instance, min |centre - position|: sqrt is monotonic, so the root
        # of the smallest sum of squares (summed in np.linalg.norm's order) is that number.
        sx, sy, sz = im.offset_sq
        nearest = float(np.sqrt(np.min(((sx + sy) + sz)[seen])))
        if 0.0 < step <= config.cut_ratio * nearest:
            ahead = extrapolate_camera(prev, now, config.ahead_frames)
            ahead_im = instance_mips(prep, ahead, global_bias)
            out = np.minimum(out, texture_min(prep, ahead_im.mip,
                                              ahead_im.visible(prep.radii))[0])
    return est, out


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


def fade_min_lod(state: StreamerState, now: float, seconds_per_level: float = 0.3,
                 rows: np.ndarray | None = None) -> np.ndarray:
    """Sampler minimum LOD per texture (in levels of the full chain; subtract the storage
    base for GL_TEXTURE_MIN_LOD of a reallocated texture) so new levels blend in over
    `seconds_per_level` each instead of popping, as Unreal does.

    A level starts fading when it arrived AND the next coarser one finished fading, so two
    levels arriving together fade one after the other rather than jumping.

    `rows`, when given, are the only textures that can be fading (any superset of those with
    a level that arrived within levels x `seconds_per_level`: the caller knows when it last
    loaded each texture); the scan for fading textures then looks at those rows alone
    instead of the whole (textures x levels) table every frame. Same result either way."""
    spl = max(seconds_per_level, 1e-9)
    base = state.resident_base.astype(np.float64)
    out = base.astype(np.float32)
    # Only textures with a level that arrived within (levels x spl) can still be fading (the
    # chain of fades is at most that long); every other one sits at its base. Restricting the
    # work to them keeps a settled scene of thousands of textures cheap every frame.
    times_all = state.level_times
    cand = times_all if rows is None else times_all[rows]
    with np.errstate(invalid="ignore"):
        recent = (cand > now - times_all.shape[1] * spl) & np.isfinite(cand)
    hit = np.flatnonzero(recent.any(axis=1))
    if hit.size == 0:
        return out
    rows = hit if rows is None else np.asarray(rows)[hit]
    times = times_all[rows]
    lvl = np.arange(times.shape[1], dtype=np.float64)[None, :]
    # start_l = max(time_l, start_{l+1} + spl)  <=>  w_l = max(time_l + l*spl, w_{l+1})
    w = np.maximum.accumulate((times + lvl * spl)[:, ::-1], axis=1)[:, ::-1]
    start = w - lvl * spl
    with np.errstate(invalid="ignore"):
        progress = np.clip((now - start) / spl, 0.0, 1.0)
    started = (lvl >= state.resident_base[rows, None]) & (start <= now)
    lod = np.where(started, lvl + 1.0 - progress, np.inf).min(axis=1)
    out[rows] = np.where(np.isfinite(lod), np.maximum(lod, base[rows]), base[rows])
    return out
