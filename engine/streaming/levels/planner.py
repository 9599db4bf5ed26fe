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
`make_plan`; the benchmarks register their baselines (lab.baselines) beside it, run
by the same executor under the same hard-budget rules.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..tiers import Tier
from .ops import MipOp, Plan, plan_fits, step_peaks
from .state import (
    Planner,
    PolicyConfig,
    StreamerState,
    TextureTable,
    resident_bytes,
    tail_reserve,
)


#: Key of one level's importance; tuples compare lexicographically (see module docstring).
#: Its first field is the urgency `-tier` (Tier ranks smaller first), so larger is more
#: important in every field.
Importance = tuple[int, int, bool, bool, int]


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


@dataclass(frozen=True)
class TieredPlanner:
    """The shipped policy: `make_plan`."""

    predicts: bool = True

    def plan(self, state: StreamerState, table: TextureTable, frame: int, pool_bytes: int,
             in_flight_bytes: int, config: PolicyConfig, ready: np.ndarray | None) -> Plan:
        return make_plan(state, table, frame, pool_bytes, in_flight_bytes, config, ready)


#: The planners `PolicyConfig.policy` can name; other planners are passed as objects.
PLANNERS: dict[str, Planner] = {"tiered": TieredPlanner()}


def planner_for(policy: str | Planner) -> Planner:
    """The planner `policy` names, or `policy` itself when it is a planner; ValueError
    naming the known ones."""
    if not isinstance(policy, str):
        return policy
    try:
        return PLANNERS[policy]
    except KeyError:
        raise ValueError(f"unknown streaming policy {policy!r}; known: "
                         f"{', '.join(sorted(PLANNERS))}") from None
